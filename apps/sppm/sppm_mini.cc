// sppm-mini — a small relative of ASCI sPPM: 3-D compressible gas dynamics
// (the Euler equations of an ideal gas, gamma = 1.4) on a uniform Cartesian
// mesh with periodic boundaries.
//
// Numerics. A conservative finite-volume scheme with dimensional splitting,
// organised like sPPM in "double timesteps": one double timestep is an x, y, z
// sequence of 1-D sweeps followed by z, y, x, all with the same dt (Strang-
// style alternation). Each 1-D sweep is MUSCL-Hancock: piecewise-linear
// reconstruction of the primitive variables with the minmod limiter, a
// half-step predictor of the face states, and the HLL Riemann flux (Davis wave
// speeds). This is simpler than sPPM's piecewise-parabolic method, with the
// same data movement: 2 ghost layers, exchanged with the two neighbours along
// the sweep direction before each sweep. dt = CFL h / max(|u_d| + c), CFL 0.4,
// from a global maximum (exact, so the same on every rank).
//
// Invariants checked at the end: total mass and energy are conserved to
// round-off (the periodic flux differences telescope), density and pressure
// stay positive. Every cell's arithmetic depends only on global data, so the
// final state and its checksum are the same for any process grid that yields
// the same global mesh.
//
// Checkpoints (C++ streams): every --ckpt-every double timesteps each rank
// writes its full state (5 conserved fields of its cells) to
// <dir>/sppm-mini.<rank>.<slot>.ckpt with std::ofstream: a binary header, the
// fields, and a trailer with a content hash; std::ifstream reads it back.
#include <getopt.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

#include "app_common.h"
#include "dlckpt_hooks.h"

namespace {

constexpr char kApp[] = "sppm-mini";
constexpr int kNg = 2;        // ghost layers
constexpr int kNvar = 5;      // rho, rho*u, rho*v, rho*w, E
constexpr double kGamma = 1.4;
constexpr double kCfl = 0.4;
constexpr double kPi = 3.14159265358979323846;

int g_rank = 0;

struct Options {
  int n[3] = {24, 24, 24};    // cells per rank
  long long iters = 20;       // double timesteps of the whole run
  long long ckpt_every = 1;   // 0: never checkpoint (nor restart)
  std::string ckpt_dir = "/dlckpt/sppm-mini";
  int slots = 0;
  int sleep_ms = 0;
  long long print_every = 0;
};

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: sppm-mini [options]\n"
               "3-D compressible gas dynamics (finite-volume Euler, MUSCL-Hancock + HLL,\n"
               "dimensional splitting in double timesteps x-y-z then z-y-x), 3-D domain\n"
               "decomposition, checkpoint/restart through C++ streams.\n"
               "\n"
               "  --n N             cells per rank along each axis (default 24)\n"
               "  --nx/--ny/--nz N  cells per rank along one axis\n"
               "                    checkpoint payload per rank = nx * ny * nz * 40 bytes\n"
               "                    (--n 158: about 157 MB, the thesis' sPPM figure)\n"
               "  --iters N         double timesteps of the whole run (default 20)\n"
               "  --ckpt-every N    checkpoint every N double timesteps; 0 = never (default 1)\n"
               "  --ckpt-dir DIR    checkpoint directory (default /dlckpt/sppm-mini);\n"
               "                    use a disk path such as /tmp/p for runs without dlckpt\n"
               "  --ckpt-slots 1|2  files kept per rank: 2 alternate (default without dlckpt),\n"
               "                    1 is rewritten in place (default with dlckpt)\n"
               "  --sleep-ms MS     sleep MS milliseconds per double timestep (compute padding)\n"
               "  --print-every N   progress line every N double timesteps (default iters/10)\n"
               "  --help            this text\n"
               "\n"
               "On start the run resumes from the newest checkpoint that every rank holds\n"
               "intact. The last line of output is 'checksum: <16 hex digits>'.\n");
}

bool ParseCount(const char* name, const char* text, long long min, long long max,
                long long* out) {
  return app_parse_count(kApp, name, text, min, max, out, g_rank == 0) == 0;
}

// Returns 0 to run, 1 after --help, -1 on a usage error (message printed).
int ParseOptions(int argc, char** argv, Options* o) {
  static const option kLong[] = {
      {"n", required_argument, nullptr, 'n'},           {"nx", required_argument, nullptr, 'x'},
      {"ny", required_argument, nullptr, 'y'},          {"nz", required_argument, nullptr, 'z'},
      {"iters", required_argument, nullptr, 'i'},       {"ckpt-every", required_argument, nullptr, 'c'},
      {"ckpt-dir", required_argument, nullptr, 'd'},    {"ckpt-slots", required_argument, nullptr, 's'},
      {"sleep-ms", required_argument, nullptr, 'S'},    {"print-every", required_argument, nullptr, 'p'},
      {"help", no_argument, nullptr, 'h'},              {nullptr, 0, nullptr, 0}};
  opterr = 0;
  int c;
  long long v = 0;
  while ((c = getopt_long(argc, argv, "", kLong, nullptr)) != -1) {
    bool ok = true;
    switch (c) {
      case 'n':
        ok = ParseCount("n", optarg, 1, 4096, &v);
        o->n[0] = o->n[1] = o->n[2] = static_cast<int>(v);
        break;
      case 'x': ok = ParseCount("nx", optarg, 1, 4096, &v); o->n[0] = static_cast<int>(v); break;
      case 'y': ok = ParseCount("ny", optarg, 1, 4096, &v); o->n[1] = static_cast<int>(v); break;
      case 'z': ok = ParseCount("nz", optarg, 1, 4096, &v); o->n[2] = static_cast<int>(v); break;
      case 'i': ok = ParseCount("iters", optarg, 0, LLONG_MAX / 2, &o->iters); break;
      case 'c': ok = ParseCount("ckpt-every", optarg, 0, LLONG_MAX / 2, &o->ckpt_every); break;
      case 'd': o->ckpt_dir = optarg; break;
      case 's': ok = ParseCount("ckpt-slots", optarg, 1, 2, &v); o->slots = static_cast<int>(v); break;
      case 'S': ok = ParseCount("sleep-ms", optarg, 0, 3600000, &v); o->sleep_ms = static_cast<int>(v); break;
      case 'p': ok = ParseCount("print-every", optarg, 0, LLONG_MAX / 2, &o->print_every); break;
      case 'h':
        if (g_rank == 0) Usage(stdout);
        return 1;
      default:
        if (g_rank == 0) {
          std::fprintf(stderr, "%s: unknown or incomplete option '%s'\n", kApp, argv[optind - 1]);
          Usage(stderr);
        }
        return -1;
    }
    if (!ok) return -1;
  }
  if (optind < argc) {
    if (g_rank == 0) std::fprintf(stderr, "%s: unexpected argument '%s'\n", kApp, argv[optind]);
    return -1;
  }
  if (static_cast<long long>(o->n[0] + 2 * kNg) * (o->n[1] + 2 * kNg) * (o->n[2] + 2 * kNg) >
      (1LL << 30)) {
    if (g_rank == 0) std::fprintf(stderr, "%s: more than 2^30 cells per rank\n", kApp);
    return -1;
  }
  if (o->slots == 0) o->slots = app_default_slots();
  if (o->print_every == 0) o->print_every = std::max(1LL, o->iters / 10);
  return 0;
}

// ---- gas dynamics --------------------------------------------------------

using State = std::array<double, kNvar>;  // one cell, in pencil order: rho, m_n, m_t1, m_t2, E

inline State ToConserved(const State& w) {  // w = rho, u_n, u_t1, u_t2, p
  return {w[0], w[0] * w[1], w[0] * w[2], w[0] * w[3],
          w[4] / (kGamma - 1.0) + 0.5 * w[0] * (w[1] * w[1] + w[2] * w[2] + w[3] * w[3])};
}

inline State ToPrimitive(const State& u) {
  const double r = u[0];
  const double un = u[1] / r, u1 = u[2] / r, u2 = u[3] / r;
  return {r, un, u1, u2, (kGamma - 1.0) * (u[4] - 0.5 * r * (un * un + u1 * u1 + u2 * u2))};
}

inline State PhysicalFlux(const State& w, const State& u) {
  return {u[1], u[1] * w[1] + w[4], u[2] * w[1], u[3] * w[1], w[1] * (u[4] + w[4])};
}

inline bool Admissible(const State& u) {
  if (!(u[0] > 0.0)) return false;
  const double kinetic = 0.5 * (u[1] * u[1] + u[2] * u[2] + u[3] * u[3]) / u[0];
  return u[4] - kinetic > 0.0;
}

inline double Minmod(double a, double b) {
  if (a * b <= 0.0) return 0.0;
  return std::fabs(a) < std::fabs(b) ? a : b;
}

// HLL flux between left state ul and right state ur (conserved).
inline State HllFlux(const State& ul, const State& ur) {
  const State wl = ToPrimitive(ul), wr = ToPrimitive(ur);
  const double cl = std::sqrt(kGamma * wl[4] / wl[0]), cr = std::sqrt(kGamma * wr[4] / wr[0]);
  const double sl = std::min(wl[1] - cl, wr[1] - cr), sr = std::max(wl[1] + cl, wr[1] + cr);
  const State fl = PhysicalFlux(wl, ul), fr = PhysicalFlux(wr, ur);
  if (sl >= 0.0) return fl;
  if (sr <= 0.0) return fr;
  State f;
  for (int v = 0; v < kNvar; v++) f[v] = (sr * fl[v] - sl * fr[v] + sl * sr * (ur[v] - ul[v])) / (sr - sl);
  return f;
}

// Updates the interior cells 2..len-3 of one pencil of conserved states by
// dt/h times the flux difference (MUSCL-Hancock + HLL). u is modified in place.
void SweepPencil(std::vector<State>& u, int len, double lam, std::vector<State>& left,
                 std::vector<State>& right, std::vector<State>& face) {
  for (int c = 1; c <= len - 2; c++) {
    const State wm = ToPrimitive(u[c - 1]), w0 = ToPrimitive(u[c]), wp = ToPrimitive(u[c + 1]);
    State wl, wr;
    for (int v = 0; v < kNvar; v++) {
      const double s = Minmod(w0[v] - wm[v], wp[v] - w0[v]);
      wl[v] = w0[v] - 0.5 * s;
      wr[v] = w0[v] + 0.5 * s;
    }
    const State ul = ToConserved(wl), ur = ToConserved(wr);
    const State fl = PhysicalFlux(wl, ul), fr = PhysicalFlux(wr, ur);
    State el, er;
    for (int v = 0; v < kNvar; v++) {
      const double half = 0.5 * lam * (fl[v] - fr[v]);
      el[v] = ul[v] + half;
      er[v] = ur[v] + half;
    }
    if (Admissible(el) && Admissible(er)) {
      left[c] = el;
      right[c] = er;
    } else {  // first order where the predictor would leave the physical states
      left[c] = u[c];
      right[c] = u[c];
    }
  }
  for (int c = 1; c <= len - 3; c++) face[c] = HllFlux(right[c], left[c + 1]);
  for (int c = 2; c <= len - 3; c++)
    for (int v = 0; v < kNvar; v++) u[c][v] -= lam * (face[c][v] - face[c - 1][v]);
}

class Domain {
 public:
  explicit Domain(const Options& o) {
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs_);
    int periods[3] = {1, 1, 1};
    MPI_Dims_create(nprocs_, 3, dims_);
    // reorder = 0: a rank keeps its number, which names its checkpoint files.
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims_, periods, 0, &cart_);
    MPI_Comm_rank(cart_, &rank_);
    MPI_Cart_coords(cart_, rank_, 3, coords_);
    for (int d = 0; d < 3; d++) {
      MPI_Cart_shift(cart_, d, 1, &lower_[d], &upper_[d]);
      n_[d] = o.n[d];
      ext_[d] = n_[d] + 2 * kNg;
      global_[d] = static_cast<long long>(dims_[d]) * n_[d];
    }
    stride_[0] = 1;
    stride_[1] = ext_[0];
    stride_[2] = static_cast<long long>(ext_[0]) * ext_[1];
    h_ = 1.0 / static_cast<double>(global_[0]);
    const size_t total = static_cast<size_t>(stride_[2]) * ext_[2];
    for (auto& f : field_) f.assign(total, 0.0);
    const int maxlen = *std::max_element(ext_, ext_ + 3);
    pencil_.resize(maxlen);
    left_.resize(maxlen);
    right_.resize(maxlen);
    face_.resize(maxlen);
  }
  ~Domain() { MPI_Comm_free(&cart_); }
  Domain(const Domain&) = delete;
  Domain& operator=(const Domain&) = delete;

  MPI_Comm cart() const { return cart_; }
  int rank() const { return rank_; }
  int nprocs() const { return nprocs_; }
  const int* dims() const { return dims_; }
  const int* n() const { return n_; }
  long long cells() const { return static_cast<long long>(n_[0]) * n_[1] * n_[2]; }
  long long global(int d) const { return global_[d]; }
  std::vector<double>& field(int v) { return field_[v]; }
  const std::vector<double>& field(int v) const { return field_[v]; }

  size_t Index(int i, int j, int k) const {
    return static_cast<size_t>(i + kNg) + static_cast<size_t>(j + kNg) * stride_[1] +
           static_cast<size_t>(k + kNg) * stride_[2];
  }

  // A blast in a smoothly varying, sheared gas: every value is a function of
  // the global cell position only.
  void Initialize() {
    for (int k = 0; k < n_[2]; k++)
      for (int j = 0; j < n_[1]; j++)
        for (int i = 0; i < n_[0]; i++) {
          const double x = (coords_[0] * n_[0] + i + 0.5) / global_[0];
          const double y = (coords_[1] * n_[1] + j + 0.5) / global_[1];
          const double z = (coords_[2] * n_[2] + k + 0.5) / global_[2];
          double rho = 1.0 + 0.2 * std::sin(2 * kPi * x) * std::cos(2 * kPi * y) * std::sin(2 * kPi * z);
          const double r2 = (x - 0.35) * (x - 0.35) + (y - 0.45) * (y - 0.45) + (z - 0.5) * (z - 0.5);
          double p = 0.1;
          if (r2 < 0.15 * 0.15) {
            p = 2.0;
            rho *= 1.5;
          }
          const double u = 0.1 * std::sin(2 * kPi * y), v = 0.1 * std::sin(2 * kPi * z),
                       w = 0.1 * std::sin(2 * kPi * x);
          const State c = ToConserved({rho, u, v, w, p});
          const size_t at = Index(i, j, k);
          for (int q = 0; q < kNvar; q++) field_[q][at] = c[q];
        }
  }

  // Largest signal speed over this rank's cells; -1 if a cell is unphysical
  // (its position goes to *bad).
  double MaxSpeed(long long bad[3]) const {
    double smax = 0.0;
    for (int k = 0; k < n_[2]; k++)
      for (int j = 0; j < n_[1]; j++)
        for (int i = 0; i < n_[0]; i++) {
          const size_t at = Index(i, j, k);
          const State w = ToPrimitive({field_[0][at], field_[1][at], field_[2][at], field_[3][at], field_[4][at]});
          if (!(w[0] > 0.0) || !(w[4] > 0.0)) {
            bad[0] = coords_[0] * n_[0] + i;
            bad[1] = coords_[1] * n_[1] + j;
            bad[2] = coords_[2] * n_[2] + k;
            return -1.0;
          }
          const double c = std::sqrt(kGamma * w[4] / w[0]);
          smax = std::max(smax, std::max(std::fabs(w[1]), std::max(std::fabs(w[2]), std::fabs(w[3]))) + c);
        }
    return smax;
  }

  // Sum of field v over this rank's cells times the cell volume.
  double Total(int v) const {
    double s = 0.0;
    for (int k = 0; k < n_[2]; k++)
      for (int j = 0; j < n_[1]; j++) {
        const double* row = &field_[v][Index(0, j, k)];
        for (int i = 0; i < n_[0]; i++) s += row[i];
      }
    return s * h_ * h_ * h_;
  }

  // One 1-D sweep along axis d over every pencil of interior cells.
  void Sweep(int d, double dt) {
    ExchangeGhosts(d);
    const int a = (d + 1) % 3, b = (d + 2) % 3;  // the two other axes
    const int len = ext_[d];
    const double lam = dt / h_;
    // Conserved variables in pencil order: rho, normal, tangential 1 and 2, E.
    const int var[kNvar] = {0, 1 + d, 1 + a, 1 + b, 4};
    for (int jb = 0; jb < n_[b]; jb++)
      for (int ja = 0; ja < n_[a]; ja++) {
        int idx[3];
        idx[d] = -kNg;
        idx[a] = ja;
        idx[b] = jb;
        const size_t base = Index(idx[0], idx[1], idx[2]);
        const long long step = stride_[d];
        for (int c = 0; c < len; c++)
          for (int q = 0; q < kNvar; q++) pencil_[c][q] = field_[var[q]][base + c * step];
        SweepPencil(pencil_, len, lam, left_, right_, face_);
        for (int c = kNg; c < len - kNg; c++)
          for (int q = 0; q < kNvar; q++) field_[var[q]][base + c * step] = pencil_[c][q];
      }
  }

 private:
  // Fills the kNg ghost layers at both ends of axis d from the neighbours
  // (periodic), for the interior cells of the two other axes.
  void ExchangeGhosts(int d) {
    const int a = (d + 1) % 3, b = (d + 2) % 3;
    const size_t slab = static_cast<size_t>(kNg) * n_[a] * n_[b] * kNvar;
    for (auto* buf : {&send_lo_, &send_hi_, &recv_lo_, &recv_hi_}) buf->resize(slab);
    // Layers sent down: first kNg interior layers; up: last kNg.
    Pack(d, 0, send_lo_);
    Pack(d, n_[d] - kNg, send_hi_);
    MPI_Request r[4];
    const int count = static_cast<int>(slab);
    MPI_Irecv(recv_lo_.data(), count, MPI_DOUBLE, lower_[d], 0, cart_, &r[0]);
    MPI_Irecv(recv_hi_.data(), count, MPI_DOUBLE, upper_[d], 1, cart_, &r[1]);
    MPI_Isend(send_hi_.data(), count, MPI_DOUBLE, upper_[d], 0, cart_, &r[2]);
    MPI_Isend(send_lo_.data(), count, MPI_DOUBLE, lower_[d], 1, cart_, &r[3]);
    app_waitall(4, r);
    Unpack(d, -kNg, recv_lo_);
    Unpack(d, n_[d], recv_hi_);
  }

  // Copies layers first..first+kNg-1 along axis d (interior of the others).
  void Pack(int d, int first, std::vector<double>& buf) const {
    ForLayers(d, first, [&](int q, size_t at, size_t p) { buf[p] = field_[q][at]; });
  }

  void Unpack(int d, int first, const std::vector<double>& buf) {
    ForLayers(d, first, [&](int q, size_t at, size_t p) { field_[q][at] = buf[p]; });
  }

  // Calls f(variable, cell index, buffer position) for the cells of layers
  // first..first+kNg-1 along axis d, in the halo buffers' order.
  template <typename F>
  void ForLayers(int d, int first, F f) const {
    const int a = (d + 1) % 3, b = (d + 2) % 3;
    size_t p = 0;
    for (int q = 0; q < kNvar; q++)
      for (int layer = first; layer < first + kNg; layer++)
        for (int jb = 0; jb < n_[b]; jb++)
          for (int ja = 0; ja < n_[a]; ja++) {
            int idx[3];
            idx[d] = layer;
            idx[a] = ja;
            idx[b] = jb;
            f(q, Index(idx[0], idx[1], idx[2]), p++);
          }
  }

  MPI_Comm cart_ = MPI_COMM_NULL;
  int rank_ = 0, nprocs_ = 1;
  int dims_[3] = {0, 0, 0}, coords_[3] = {0, 0, 0}, lower_[3] = {0, 0, 0}, upper_[3] = {0, 0, 0};
  int n_[3] = {0, 0, 0}, ext_[3] = {0, 0, 0};
  long long global_[3] = {0, 0, 0}, stride_[3] = {0, 0, 0};
  double h_ = 1.0;
  std::array<std::vector<double>, kNvar> field_;
  std::vector<State> pencil_, left_, right_, face_;
  std::vector<double> send_lo_, send_hi_, recv_lo_, recv_hi_;

  friend uint64_t StateChecksum(const Domain& dom);
};

uint64_t StateChecksum(const Domain& dom) {
  long long origin[3], global[3], count[3];
  for (int d = 0; d < 3; d++) {
    origin[d] = static_cast<long long>(dom.coords_[d]) * dom.n_[d];
    global[d] = dom.global_[d];
    count[d] = dom.n_[d];
  }
  uint64_t local = 0;
  for (int v = 0; v < kNvar; v++)
    local += app_checksum_block(&dom.field_[v][dom.Index(0, 0, 0)], v, origin, global, count,
                                dom.stride_);
  return app_checksum_combine(local, dom.cart_);
}

// ---- checkpoint files ------------------------------------------------------

constexpr uint32_t kCkptVersion = 1;
constexpr uint64_t kHashSeed = 0x3170706d73ULL;  // "sppm1"

struct CkptHeader {
  char magic[8];          // "SPPMCKPT"
  uint32_t version;       // kCkptVersion
  uint32_t header_bytes;  // sizeof(CkptHeader)
  int32_t rank, nprocs;
  int32_t dims[3];        // process grid
  int32_t n[3];           // cells per rank
  int32_t nvar;
  int64_t iteration;      // double timesteps done
  double time;            // simulated time
  double mass0, energy0;  // totals of the initial state (conservation check)
  uint64_t payload_bytes;
};

struct CkptTrailer {
  char magic[8];          // "SPPMEND1"
  int64_t iteration;
  uint64_t payload_hash;
};

static_assert(std::is_trivially_copyable_v<CkptHeader> && std::is_trivially_copyable_v<CkptTrailer>);
static_assert(sizeof(CkptHeader) == 96 && sizeof(CkptTrailer) == 24, "file format");

struct RunState {
  long long iteration = 0;
  double time = 0.0;
  double mass0 = 0.0, energy0 = 0.0;
};

enum class CkptResult { kOk, kMissing, kDamaged, kMismatch };

class Checkpointer {
 public:
  Checkpointer(Domain& dom, const Options& o) : dom_(dom), o_(o) {
    buffer_.resize(static_cast<size_t>(dom.cells()));
  }

  std::string Path(int slot) const {
    return o_.ckpt_dir + "/" + kApp + "." + std::to_string(dom_.rank()) + "." +
           std::to_string(slot) + ".ckpt";
  }

  long long FileBytes() const {
    return static_cast<long long>(sizeof(CkptHeader) + sizeof(CkptTrailer)) +
           kNvar * dom_.cells() * static_cast<long long>(sizeof(double));
  }

  // Writes the state into `slot`. A failure ends the job: the other ranks
  // would otherwise wait for this one forever.
  void Write(int slot, const RunState& s, bool durable) {
    const std::string path = Path(slot);
    CkptHeader h = MakeHeader(s);
    CkptTrailer t{};
    std::memcpy(t.magic, "SPPMEND1", 8);
    t.iteration = s.iteration;
    t.payload_hash = kHashSeed;
    errno = 0;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    bool ok = out.is_open();
    if (ok) ok = static_cast<bool>(out.write(reinterpret_cast<const char*>(&h), sizeof h));
    for (int v = 0; ok && v < kNvar; v++) {
      PackField(v);
      t.payload_hash = app_hash_bytes(buffer_.data(), buffer_.size() * sizeof(double), t.payload_hash);
      ok = static_cast<bool>(out.write(reinterpret_cast<const char*>(buffer_.data()),
                                       static_cast<std::streamsize>(buffer_.size() * sizeof(double))));
    }
    if (ok) ok = static_cast<bool>(out.write(reinterpret_cast<const char*>(&t), sizeof t));
    if (out.is_open()) {
      out.close();
      ok = ok && !out.fail();
    }
    int saved = errno;
    if (ok && durable && app_make_durable(path.c_str()) != 0) {
      ok = false;
      saved = errno;
    }
    if (!ok) {
      std::fprintf(stderr, "%s: rank %d: cannot write checkpoint %s: %s\n", kApp, dom_.rank(),
                   path.c_str(), saved ? std::strerror(saved) : "stream error");
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }

  // Reads `slot` into the domain's cells and *s. The domain is undefined
  // after a failure; msg says why.
  CkptResult Read(int slot, RunState* s, std::string* msg) {
    const std::string path = Path(slot);
    errno = 0;
    std::ifstream in(path, std::ios::binary);
    if (!in.is_open()) {
      const int e = errno != 0 ? errno : app_open_status(path.c_str());
      if (e == ENOENT) return CkptResult::kMissing;
      *msg = path + " cannot be opened: " + std::strerror(e);
      return CkptResult::kDamaged;
    }
    CkptHeader h{};
    if (!in.read(reinterpret_cast<char*>(&h), sizeof h)) {
      *msg = path + " is damaged: its header is truncated";
      return CkptResult::kDamaged;
    }
    if (std::memcmp(h.magic, "SPPMCKPT", 8) != 0 || h.version != kCkptVersion ||
        h.header_bytes != sizeof h || h.iteration < 0) {
      *msg = path + " is damaged: bad magic number or version in its header";
      return CkptResult::kDamaged;
    }
    RunState got{h.iteration, h.time, h.mass0, h.energy0};
    const CkptHeader want = MakeHeader(got);
    if (h.rank != want.rank || h.nprocs != want.nprocs || h.nvar != want.nvar ||
        h.payload_bytes != want.payload_bytes || !std::equal(h.dims, h.dims + 3, want.dims) ||
        !std::equal(h.n, h.n + 3, want.n)) {
      char text[768];
      std::snprintf(text, sizeof text,
                    " was written by rank %d of %d (process grid %dx%dx%d, %dx%dx%d cells per "
                    "rank); this run is rank %d of %d (grid %dx%dx%d, %dx%dx%d cells per rank). "
                    "Rerun with the same process count and sizes, or use an empty --ckpt-dir",
                    h.rank, h.nprocs, h.dims[0], h.dims[1], h.dims[2], h.n[0], h.n[1], h.n[2],
                    want.rank, want.nprocs, want.dims[0], want.dims[1], want.dims[2], want.n[0],
                    want.n[1], want.n[2]);
      *msg = path + text;
      return CkptResult::kMismatch;
    }
    uint64_t hash = kHashSeed;
    for (int v = 0; v < kNvar; v++) {
      if (!in.read(reinterpret_cast<char*>(buffer_.data()),
                   static_cast<std::streamsize>(buffer_.size() * sizeof(double)))) {
        *msg = path + " is damaged: truncated in field " + std::to_string(v) + " (" +
               std::to_string(in.gcount()) + " of " +
               std::to_string(buffer_.size() * sizeof(double)) + " bytes)";
        return CkptResult::kDamaged;
      }
      hash = app_hash_bytes(buffer_.data(), buffer_.size() * sizeof(double), hash);
      UnpackField(v);
    }
    CkptTrailer t{};
    if (!in.read(reinterpret_cast<char*>(&t), sizeof t)) {
      *msg = path + " is damaged: its trailer is truncated";
      return CkptResult::kDamaged;
    }
    if (std::memcmp(t.magic, "SPPMEND1", 8) != 0 || t.iteration != h.iteration) {
      *msg = path + " is damaged: bad trailer";
      return CkptResult::kDamaged;
    }
    if (t.payload_hash != hash) {
      *msg = path + " is damaged: content hash does not match its trailer";
      return CkptResult::kDamaged;
    }
    if (in.peek() != std::ifstream::traits_type::eof()) {
      *msg = path + " is damaged: unexpected bytes after the trailer";
      return CkptResult::kDamaged;
    }
    *s = got;
    return CkptResult::kOk;
  }

 private:
  CkptHeader MakeHeader(const RunState& s) const {
    CkptHeader h{};
    std::memcpy(h.magic, "SPPMCKPT", 8);
    h.version = kCkptVersion;
    h.header_bytes = sizeof h;
    h.rank = dom_.rank();
    h.nprocs = dom_.nprocs();
    for (int d = 0; d < 3; d++) {
      h.dims[d] = dom_.dims()[d];
      h.n[d] = dom_.n()[d];
    }
    h.nvar = kNvar;
    h.iteration = s.iteration;
    h.time = s.time;
    h.mass0 = s.mass0;
    h.energy0 = s.energy0;
    h.payload_bytes = static_cast<uint64_t>(kNvar * dom_.cells()) * sizeof(double);
    return h;
  }

  void PackField(int v) {
    const int* n = dom_.n();
    size_t p = 0;
    for (int k = 0; k < n[2]; k++)
      for (int j = 0; j < n[1]; j++) {
        const double* row = &dom_.field(v)[dom_.Index(0, j, k)];
        std::copy(row, row + n[0], &buffer_[p]);
        p += n[0];
      }
  }

  void UnpackField(int v) {
    const int* n = dom_.n();
    size_t p = 0;
    for (int k = 0; k < n[2]; k++)
      for (int j = 0; j < n[1]; j++) {
        std::copy(&buffer_[p], &buffer_[p] + n[0], &dom_.field(v)[dom_.Index(0, j, k)]);
        p += n[0];
      }
  }

  Domain& dom_;
  const Options& o_;
  std::vector<double> buffer_;
};

// Finds the checkpoint to resume from and loads it into dom and *s. Returns
// false if the run must stop (message printed). *last_slot: the slot holding
// the loaded checkpoint.
bool Restart(Domain& dom, Checkpointer& ck, const Options& o, RunState* s, int* last_slot) {
  long long held[2] = {-1, -1};
  RunState got[2];
  bool mismatch = false;
  int loaded = -1;
  std::string msg;
  for (int slot = 0; slot < 2; slot++) {
    CkptResult r = ck.Read(slot, &got[slot], &msg);
    if (r == CkptResult::kOk) {
      held[slot] = got[slot].iteration;
      loaded = slot;
      continue;
    }
    if (r != CkptResult::kMissing) loaded = -1;  // a failed read may have overwritten cells
    if (r == CkptResult::kDamaged)
      std::fprintf(stderr, "%s: rank %d: checkpoint %s; not using it\n", kApp, dom.rank(), msg.c_str());
    if (r == CkptResult::kMismatch) {
      std::fprintf(stderr, "%s: rank %d: checkpoint %s\n", kApp, dom.rank(), msg.c_str());
      mismatch = true;
    }
  }
  if (app_any(mismatch, dom.cart())) return false;
  long long newest = -1;
  int lacking = 0, first_lacking = -1;
  const long long chosen = app_agree_restart(held, dom.cart(), &newest, &lacking, &first_lacking);
  if (dom.rank() == 0 && newest >= 0 && chosen != newest)
    std::printf("restart: iteration %lld is not intact on %d rank(s) (first: rank %d)\n", newest,
                lacking, first_lacking);
  if (chosen > o.iters) {
    if (dom.rank() == 0)
      std::fprintf(stderr, "%s: checkpoint iteration %lld in %s is past --iters %lld\n", kApp,
                   chosen, o.ckpt_dir.c_str(), o.iters);
    return false;
  }
  if (chosen < 0 && app_dlckpt_restarted_epoch() > 0) {
    if (dom.rank() == 0)
      std::fprintf(stderr, "%s: dlckpt restored epoch %lld but no checkpoint in %s is intact on "
                   "every rank\n", kApp, app_dlckpt_restarted_epoch(), o.ckpt_dir.c_str());
    return false;
  }
  if (chosen < 0) {
    *last_slot = 1;
    if (dom.rank() == 0) {
      if (newest >= 0)
        std::printf("restart: no iteration is checkpointed intact on every rank; starting from scratch\n");
      else
        std::printf("fresh start: no checkpoint in %s\n", o.ckpt_dir.c_str());
    }
    return true;  // the caller initialises a fresh state
  }
  const int slot = held[0] == chosen ? 0 : 1;
  if (loaded != slot) {
    if (ck.Read(slot, &got[slot], &msg) != CkptResult::kOk || got[slot].iteration != chosen) {
      std::fprintf(stderr, "%s: rank %d: checkpoint changed while restarting: %s\n", kApp,
                   dom.rank(), msg.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  *s = got[slot];
  *last_slot = slot;
  if (dom.rank() == 0) {
    std::printf("restarted from iteration %lld (%s)\n", chosen, o.ckpt_dir.c_str());
    const long long epoch = app_dlckpt_restarted_epoch();
    if (epoch > 0) std::printf("dlckpt: restarted epoch %lld\n", epoch);
  }
  return true;
}

int Run(const Options& o) {
  Domain dom(o);
  Checkpointer ck(dom, o);
  const bool checkpointing = o.ckpt_every > 0;
  const bool durable = !app_dlckpt_linked();
  const int* dims = dom.dims();
  const int* n = dom.n();
  if (dom.rank() == 0) {
    std::printf("sppm-mini: %d ranks (%dx%dx%d), %dx%dx%d cells per rank, global %lldx%lldx%lld, "
                "%lld double timesteps\n",
                dom.nprocs(), dims[0], dims[1], dims[2], n[0], n[1], n[2], dom.global(0),
                dom.global(1), dom.global(2), o.iters);
    if (checkpointing)
      std::printf("checkpoint: every %lld double timesteps to %s, %d slot(s) per rank%s\n",
                  o.ckpt_every, o.ckpt_dir.c_str(), o.slots, app_dlckpt_linked() ? ", dlckpt linked" : "");
    else
      std::printf("checkpoint: disabled\n");
    std::printf("checkpoint bytes per rank: %lld\n", ck.FileBytes());
    std::fflush(stdout);
  }

  RunState s;
  s.iteration = -1;
  int last_slot = 1;
  if (checkpointing) {
    bool bad = false;
    if (app_mkdir_p(o.ckpt_dir.c_str()) != 0 && durable) {
      std::fprintf(stderr,
                   "%s: rank %d: cannot create checkpoint directory %s: %s (choose another "
                   "with --ckpt-dir)\n",
                   kApp, dom.rank(), o.ckpt_dir.c_str(), std::strerror(errno));
      bad = true;
    }
    if (app_any(bad, dom.cart())) return 2;
    if (!Restart(dom, ck, o, &s, &last_slot)) return 2;
  }
  if (s.iteration < 0) {  // fresh start
    dom.Initialize();
    s = RunState{0, 0.0, app_sum_double(dom.Total(0), dom.cart()),
                 app_sum_double(dom.Total(4), dom.cart())};
  }
  std::fflush(stdout);

  const long long start = s.iteration;
  const double t0 = app_now();
  for (long long it = start + 1; it <= o.iters; it++) {
    long long bad[3] = {-1, -1, -1};
    const double local = dom.MaxSpeed(bad);
    if (local < 0)
      std::fprintf(stderr, "%s: rank %d: non-physical state (density or pressure <= 0) in cell "
                   "(%lld, %lld, %lld) before double timestep %lld\n",
                   kApp, dom.rank(), bad[0], bad[1], bad[2], it);
    if (app_any(local < 0, dom.cart())) return 4;
    const double dt = kCfl * (1.0 / static_cast<double>(dom.global(0))) / app_max_double(local, dom.cart());
    for (int d = 0; d < 3; d++) dom.Sweep(d, dt);
    for (int d = 2; d >= 0; d--) dom.Sweep(d, dt);
    s.time += 2 * dt;
    s.iteration = it;
    app_sleep_ms(o.sleep_ms);
    if (dom.rank() == 0 && (it % o.print_every == 0 || it == o.iters))
      std::printf("step %lld t %.6e dt %.6e\n", it, s.time, dt);
    if (checkpointing && it % o.ckpt_every == 0) {
      const double c0 = app_now();
      const int slot = o.slots == 1 ? 0 : 1 - last_slot;
      ck.Write(slot, s, durable);
      app_checkpoint_commit(dom.cart(), kApp);
      last_slot = slot;
      if (dom.rank() == 0)
        std::printf("checkpoint: iteration %lld complete (slot %d, %.3f s)\n", it, slot, app_now() - c0);
    }
    if (dom.rank() == 0) std::fflush(stdout);
  }
  const double elapsed = app_now() - t0;

  // Conservation: periodic boundaries, so the totals change only by round-off.
  const double mass = app_sum_double(dom.Total(0), dom.cart());
  const double energy = app_sum_double(dom.Total(4), dom.cart());
  const double dm = std::fabs(mass - s.mass0) / s.mass0, de = std::fabs(energy - s.energy0) / s.energy0;
  long long bad[3];
  const bool unphysical = app_any(dom.MaxSpeed(bad) < 0, dom.cart());
  const uint64_t sum = StateChecksum(dom);
  if (dom.rank() == 0) {
    std::printf("conservation: mass %.15e (relative change %.1e), energy %.15e (relative change %.1e)\n",
                mass, dm, energy, de);
    std::printf("compute: %lld double timesteps in %.3f s, t = %.6e\n", o.iters - start, elapsed, s.time);
  }
  if (dm > 1e-10 || de > 1e-10 || unphysical) {
    if (dom.rank() == 0)
      std::fprintf(stderr, "%s: error: %s\n", kApp,
                   unphysical ? "non-physical final state" : "mass or energy not conserved");
    return 4;
  }
  if (dom.rank() == 0) {
    char hex[17];
    app_format_hex(sum, hex);
    std::printf("checksum: %s\n", hex);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  Options o;
  const int prc = ParseOptions(argc, argv, &o);
  if (prc != 0) {
    MPI_Finalize();
    return prc > 0 ? 0 : 1;
  }
  if (app_dlckpt_init(MPI_COMM_WORLD) != 0) {
    std::fprintf(stderr, "%s: rank %d: %s\n", kApp, g_rank, app_dlckpt_last_error());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  int rc = Run(o);
  if (app_dlckpt_finalize() != 0) {
    std::fprintf(stderr, "%s: rank %d: %s\n", kApp, g_rank, app_dlckpt_last_error());
    if (rc == 0) rc = 3;
  }
  MPI_Finalize();
  return rc;
}
