#include "dlckpt/base/events.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace dlckpt::events {
namespace {

// Each kind's name, source and arguments, in order. An argument letter:
//   E epoch   G generation   C code   R rank   r "rank" then the rank
//   N node    d done         t total  b bytes
//   s seconds (%.3f)   w seconds (%.6f)   W waited (%.3f)
//   g "groups_delta/groups"   p "bytes/total"
//   P the word "published" when published (last)   T text: the rest of the line (last)
struct Spec {
  Kind kind;
  Source source;
  std::string_view name;
  std::string_view args;
};

constexpr std::array<Spec, kKinds> kSpecs = {{
    {Kind::kInit, Source::kApp, "init", "E"},
    {Kind::kWriteBegin, Source::kApp, "write-begin", "Er"},
    {Kind::kCkptBegin, Source::kApp, "ckpt-begin", "E"},
    {Kind::kCkptCommit, Source::kApp, "ckpt-commit", "EC"},
    {Kind::kCkptRefused, Source::kApp, "ckpt-refused", "ERT"},
    {Kind::kCkptWait, Source::kApp, "ckpt-wait", "Ew"},
    {Kind::kCkptEnd, Source::kApp, "ckpt-end", "EC"},
    {Kind::kDrainBegin, Source::kApp, "drain-begin", "Er"},
    {Kind::kDrainSkip, Source::kApp, "drain-skip", "Er"},
    {Kind::kDrainEnd, Source::kApp, "drain-end", "ErCbwP"},
    {Kind::kPrune, Source::kApp, "prune", "Erdw"},
    {Kind::kReady, Source::kCodec, "ready", "G"},
    {Kind::kProtection, Source::kCodec, "protection", "T"},
    {Kind::kWarmup, Source::kCodec, "warmup", "NsW"},
    {Kind::kEncodeBegin, Source::kCodec, "encode-begin", "E"},
    {Kind::kEncodeDelta, Source::kCodec, "encode-delta", "Egp"},
    {Kind::kEncodeProgress, Source::kCodec, "encode-progress", "Edts"},
    {Kind::kEncodeEnd, Source::kCodec, "encode-end", "EC"},
    {Kind::kRecoverBegin, Source::kCodec, "recover-begin", "E"},
    {Kind::kRebuildBegin, Source::kCodec, "rebuild-begin", "E"},
    {Kind::kRebuildProgress, Source::kCodec, "rebuild-progress", "ENdts"},
    {Kind::kRecoverEnd, Source::kCodec, "recover-end", "EC"},
}};

constexpr bool SpecsInOrder() {
  for (int i = 0; i < kKinds; ++i) {
    if (static_cast<int>(kSpecs[static_cast<size_t>(i)].kind) != i) return false;
  }
  return true;
}
static_assert(SpecsInOrder(), "kSpecs must list the kinds in enum order");

const Spec& SpecOf(Kind k) { return kSpecs[static_cast<size_t>(k)]; }

std::string Fixed(double v, int decimals) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

// A cursor over the arguments of one line.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  std::optional<std::string_view> Word() {
    while (!s_.empty() && s_.front() == ' ') s_.remove_prefix(1);
    if (s_.empty()) return std::nullopt;
    size_t n = s_.find(' ');
    if (n == std::string_view::npos) n = s_.size();
    std::string_view w = s_.substr(0, n);
    s_.remove_prefix(n);
    return w;
  }
  std::string_view Rest() {
    if (!s_.empty() && s_.front() == ' ') s_.remove_prefix(1);
    std::string_view r = s_;
    s_ = {};
    return r;
  }
  bool AtEnd() {
    while (!s_.empty() && s_.front() == ' ') s_.remove_prefix(1);
    return s_.empty();
  }

 private:
  std::string_view s_;
};

template <typename T>
bool ParseNumber(std::string_view w, T* out) {
  auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), *out);
  return ec == std::errc() && p == w.data() + w.size();
}

// "A/B" into two numbers.
template <typename T>
bool ParsePair(std::string_view w, T* a, T* b) {
  size_t slash = w.find('/');
  return slash != std::string_view::npos && ParseNumber(w.substr(0, slash), a) &&
         ParseNumber(w.substr(slash + 1), b);
}

bool ParseArg(char a, Reader* r, Event* e) {
  if (a == 'T') {
    e->text = std::string(r->Rest());
    return true;
  }
  if (a == 'P') {
    if (r->AtEnd()) return true;
    auto w = r->Word();
    e->published = *w == "published";
    return e->published;
  }
  auto w = r->Word();
  if (!w) return false;
  switch (a) {
    case 'E': return ParseNumber(*w, &e->epoch);
    case 'G': return ParseNumber(*w, &e->generation);
    case 'C': return ParseNumber(*w, &e->code);
    case 'R': return ParseNumber(*w, &e->rank);
    case 'r': {
      if (*w != "rank") return false;
      auto n = r->Word();
      return n && ParseNumber(*n, &e->rank);
    }
    case 'N': e->node = std::string(*w); return true;
    case 'd': return ParseNumber(*w, &e->done);
    case 't': return ParseNumber(*w, &e->total);
    case 'b': return ParseNumber(*w, &e->bytes);
    case 's':
    case 'w': return ParseNumber(*w, &e->seconds);
    case 'W': return ParseNumber(*w, &e->waited);
    case 'g': return ParsePair(*w, &e->groups_delta, &e->groups);
    case 'p': return ParsePair(*w, &e->bytes, &e->total);
  }
  return false;
}

void FormatArg(char a, const Event& e, std::string* out) {
  if (a == 'P' && !e.published) return;
  if (a == 'T' && e.text.empty()) return;
  *out += ' ';
  switch (a) {
    case 'E': *out += std::to_string(e.epoch); break;
    case 'G': *out += std::to_string(e.generation); break;
    case 'C': *out += std::to_string(e.code); break;
    case 'R': *out += std::to_string(e.rank); break;
    case 'r': *out += "rank " + std::to_string(e.rank); break;
    case 'N': *out += e.node; break;
    case 'd': *out += std::to_string(e.done); break;
    case 't': *out += std::to_string(e.total); break;
    case 'b': *out += std::to_string(e.bytes); break;
    case 's': *out += Fixed(e.seconds, 3); break;
    case 'w': *out += Fixed(e.seconds, 6); break;
    case 'W': *out += Fixed(e.waited, 3); break;
    case 'g': *out += std::to_string(e.groups_delta) + "/" + std::to_string(e.groups); break;
    case 'p': *out += std::to_string(e.bytes) + "/" + std::to_string(e.total); break;
    case 'P': *out += "published"; break;
    case 'T': *out += e.text; break;
  }
}

}  // namespace

Source Event::source() const { return SpecOf(kind).source; }

std::string_view SourceName(Source s) { return s == Source::kApp ? "app" : "codec"; }
std::string_view KindName(Kind k) { return SpecOf(k).name; }

// One line per kind; a text loses its newlines (an event is one line).
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

Event Init(uint64_t restarted_epoch) { return {.kind = Kind::kInit, .epoch = restarted_epoch}; }
Event WriteBegin(uint64_t epoch, int rank) { return {.kind = Kind::kWriteBegin, .epoch = epoch, .rank = rank}; }
Event CkptBegin(uint64_t epoch) { return {.kind = Kind::kCkptBegin, .epoch = epoch}; }
Event CkptCommit(uint64_t epoch, int code) { return {.kind = Kind::kCkptCommit, .epoch = epoch, .code = code}; }
Event CkptRefused(uint64_t epoch, int rank, std::string why) {
  return {.kind = Kind::kCkptRefused, .epoch = epoch, .rank = rank, .text = OneLine(std::move(why))};
}
Event CkptWait(uint64_t epoch, double seconds) { return {.kind = Kind::kCkptWait, .epoch = epoch, .seconds = seconds}; }
Event CkptEnd(uint64_t epoch, int code) { return {.kind = Kind::kCkptEnd, .epoch = epoch, .code = code}; }
Event DrainBegin(uint64_t epoch, int rank) { return {.kind = Kind::kDrainBegin, .epoch = epoch, .rank = rank}; }
Event DrainSkip(uint64_t epoch, int rank) { return {.kind = Kind::kDrainSkip, .epoch = epoch, .rank = rank}; }
Event DrainEnd(uint64_t epoch, int rank, int code, uint64_t bytes, double seconds, bool published) {
  return {.kind = Kind::kDrainEnd, .epoch = epoch, .code = code, .rank = rank, .bytes = bytes, .seconds = seconds,
          .published = published};
}
Event Prune(uint64_t epoch, int rank, uint64_t removed, double seconds) {
  return {.kind = Kind::kPrune, .epoch = epoch, .rank = rank, .done = removed, .seconds = seconds};
}
Event Ready(uint64_t generation) { return {.kind = Kind::kReady, .generation = generation}; }
Event Protection(std::string what) { return {.kind = Kind::kProtection, .text = OneLine(std::move(what))}; }
Event Warmup(std::string node, double seconds, double waited) {
  return {.kind = Kind::kWarmup, .node = std::move(node), .seconds = seconds, .waited = waited};
}
Event EncodeBegin(uint64_t epoch) { return {.kind = Kind::kEncodeBegin, .epoch = epoch}; }
Event EncodeDelta(uint64_t epoch, uint32_t groups_delta, uint32_t groups, uint64_t bytes, uint64_t total) {
  return {.kind = Kind::kEncodeDelta, .epoch = epoch, .total = total, .bytes = bytes, .groups_delta = groups_delta,
          .groups = groups};
}
Event EncodeProgress(uint64_t epoch, uint64_t done, uint64_t total, double seconds) {
  return {.kind = Kind::kEncodeProgress, .epoch = epoch, .done = done, .total = total, .seconds = seconds};
}
Event EncodeEnd(uint64_t epoch, int code) { return {.kind = Kind::kEncodeEnd, .epoch = epoch, .code = code}; }
Event RecoverBegin(uint64_t epoch) { return {.kind = Kind::kRecoverBegin, .epoch = epoch}; }
Event RebuildBegin(uint64_t epoch) { return {.kind = Kind::kRebuildBegin, .epoch = epoch}; }
Event RebuildProgress(uint64_t epoch, std::string node, uint64_t done, uint64_t total, double seconds) {
  return {.kind = Kind::kRebuildProgress, .epoch = epoch, .node = std::move(node), .done = done, .total = total,
          .seconds = seconds};
}
Event RecoverEnd(uint64_t epoch, int code) { return {.kind = Kind::kRecoverEnd, .epoch = epoch, .code = code}; }

std::string Format(const Event& e) {
  const Spec& s = SpecOf(e.kind);
  std::string out(SourceName(s.source));
  out += ' ';
  out += s.name;
  for (char a : s.args) FormatArg(a, e, &out);
  return out;
}

std::optional<Event> Parse(std::string_view line) {
  Reader r(line);
  auto ns = r.Word();
  auto source = r.Word();
  auto name = r.Word();
  if (!ns || !source || !name) return std::nullopt;
  const Spec* spec = nullptr;
  for (const Spec& s : kSpecs) {
    if (s.name == *name && SourceName(s.source) == *source) spec = &s;
  }
  if (spec == nullptr) return std::nullopt;
  Event e;
  e.kind = spec->kind;
  if (!ParseNumber(*ns, &e.ns)) return std::nullopt;
  for (char a : spec->args) {
    if (!ParseArg(a, &r, &e)) return std::nullopt;
  }
  if (!r.AtEnd()) return std::nullopt;
  return e;
}

void Emit(const Event& e) noexcept {
  const char* path = std::getenv("DLCKPT_EVENTS");
  if (path == nullptr || *path == '\0') return;
  std::string what;
  try {
    what = Format(e);
  } catch (...) {
    return;
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char line[512];
  int n = snprintf(line, sizeof line, "%lld %s\n", static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec,
                   what.c_str());
  if (n <= 0) return;
  if (n >= static_cast<int>(sizeof line)) {
    n = sizeof line - 1;
    line[n - 1] = '\n';
  }
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t w = write(fd, line, static_cast<size_t>(n));
  (void)w;
  close(fd);
}

double HoldSeconds(const char* name, uint64_t epoch) {
  const char* v = std::getenv(name);
  if (v == nullptr) return 0;
  char* end = nullptr;
  const unsigned long long e = std::strtoull(v, &end, 10);
  if (end == v || *end != ':') return 0;
  const double seconds = std::strtod(end + 1, nullptr);
  if (!(seconds > 0 && seconds < 3600)) return 0;
  return (e == 0 || e == epoch) ? seconds : 0;
}

std::vector<Event> Follower::Poll() {
  std::vector<Event> out;
  int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[65536];
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof buf, static_cast<off_t>(offset_));
    if (n <= 0) break;
    offset_ += static_cast<uint64_t>(n);
    partial_.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  size_t start = 0;
  for (;;) {
    size_t nl = partial_.find('\n', start);
    if (nl == std::string::npos) break;
    if (auto e = Parse(std::string_view(partial_).substr(start, nl - start))) out.push_back(std::move(*e));
    start = nl + 1;
  }
  partial_.erase(0, start);
  return out;
}

}  // namespace dlckpt::events
