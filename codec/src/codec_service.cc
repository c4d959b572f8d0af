#include "codec_service.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "dlckpt/erasure.h"
#include "dlckpt/events.h"
#include "dlckpt/groups.h"
#include "dlckpt/memfs.h"
#include "dlckpt/protocol.h"
#include "dlckpt/recovery.h"
#include "parity.h"

namespace dlckpt::codec {

namespace {

enum Command : uint32_t {
  kCmdHello = 1,
  kCmdEncode = 2,
  kCmdSurvey = 3,
  kCmdRecover = 4,
  kCmdShutdown = 5,
};

double Now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::string Fixed(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

bool ConstantTimeEqual(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

// The rank in a store name "/dlckpt.<job>.<node>.r<rank>", or -1.
int RankOfStore(const std::string& name) {
  size_t p = name.rfind(".r");
  if (p == std::string::npos || p + 2 >= name.size()) return -1;
  int r = 0;
  for (size_t i = p + 2; i < name.size(); ++i) {
    if (!isdigit(static_cast<unsigned char>(name[i]))) return -1;
    r = r * 10 + (name[i] - '0');
    if (r > (1 << 28)) return -1;
  }
  return r;
}

}  // namespace

class Service {
 public:
  Service(MPI_Comm world, ServiceConfig config)
      : world_(world), cfg_(std::move(config)), parity_(cfg_.job, cfg_.node) {}

  Status Init();
  Status Serve();
  // One-shot modes (no network): encode `epoch` of the stores found on the
  // nodes; or survey, decide and rebuild after losing `lost` nodes.
  Status EncodeOnce(uint64_t epoch);
  Status RecoverOnce(const std::vector<std::string>& lost, uint64_t epoch);

 private:
  // ---- collectives helpers ----
  // Completes a request without spinning: sleeps between tests, from 10 us
  // up to `max_sleep_ns`: 100 us inside an operation (every step of a
  // collective needs each peer to test), 2 ms while idle between commands
  // (an idle process then costs ~nothing).
  Status Wait(MPI_Request* req, long max_sleep_ns = 100000) {
    long sleep_ns = 10000;
    for (;;) {
      int done = 0;
      int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return Status::IOError("MPI_Test failed on node " + cfg_.node);
      if (done) return Status::OK();
      struct timespec ts{0, sleep_ns};
      nanosleep(&ts, nullptr);
      if (sleep_ns < max_sleep_ns) sleep_ns = std::min(max_sleep_ns, sleep_ns * 3 / 2);
    }
  }
  Status Agree(const Status& mine, const std::string& what);
  Result<std::vector<std::string>> AllgatherStrings(const std::string& mine);
  Status BroadcastCommand(uint32_t* cmd, std::string* payload);

  // ---- commands (collective) ----
  Result<std::string> Execute(uint32_t cmd, const std::string& payload, protocol::MsgType* reply_type);
  Status Hello(const protocol::Hello& h);
  protocol::Done Encode(uint64_t epoch, uint64_t keep);
  Result<protocol::SurveyReply> Survey();
  protocol::Done Recover(const protocol::Recover& r);
  void Shutdown();

  // ---- local state ----
  protocol::NodeReport LocalReport();
  Status LocalImage(uint64_t epoch, const std::vector<int32_t>& ranks, std::vector<Extent>* extents,
                    std::vector<uint64_t>* sizes, const std::vector<uint64_t>* expect);
  memfs::Store* CachedStore(int32_t rank, Status* error);
  void Log(const std::string& msg) const {
    std::fprintf(stderr, "dlckpt-codec[%d %s]: %s\n", rank_, cfg_.node.c_str(), msg.c_str());
    std::fflush(stderr);
  }

  // ---- rank 0 network side ----
  Status Listen();
  void HandleClient(size_t i);
  std::string StatusText() const;

  MPI_Comm world_;
  ServiceConfig cfg_;
  int rank_ = 0, size_ = 1;
  std::vector<std::string> nodes_;  // node of each codec rank
  std::map<std::string, int> rank_of_node_;
  std::unique_ptr<ReduceTransport> world_transport_;

  // From the application's HELLO.
  bool have_layout_ = false;
  std::map<int32_t, std::string> app_node_;  // app rank -> node
  GroupLayout layout_;
  Role role_;
  MPI_Comm group_comm_ = MPI_COMM_NULL;
  std::unique_ptr<ReduceTransport> group_transport_;
  std::vector<int32_t> my_app_ranks_;
  std::map<int32_t, std::unique_ptr<memfs::Store>> stores_;  // read-only attachments
  ParitySlots parity_;
  uint64_t last_encoded_ = 0;
  int encodes_ = 0;
  std::string protection_;  // "" when the configured protection holds
  bool drop_old_parity_ = false;

  // Rank 0.
  struct Client {
    std::unique_ptr<protocol::Connection> conn;
    bool authed = false;
    protocol::Role role = protocol::Role::kApplication;
  };
  std::unique_ptr<protocol::Listener> listener_;
  std::vector<Client> clients_;
  std::string token_;
  bool stop_ = false;
};

// ---- collectives -----------------------------------------------------------------

Status Service::Agree(const Status& mine, const std::string& what) {
  int failed = mine.ok() ? size_ : rank_;
  int lowest = size_;
  MPI_Request req;
  MPI_Iallreduce(&failed, &lowest, 1, MPI_INT, MPI_MIN, world_, &req);
  DLCKPT_RETURN_IF_ERROR(Wait(&req));
  if (lowest == size_) return Status::OK();
  char buf[2048] = {};
  int code = 0;
  if (rank_ == lowest) {
    code = mine.code();
    std::snprintf(buf, sizeof buf, "%s", mine.message().c_str());
  }
  MPI_Request reqs[2];
  MPI_Ibcast(&code, 1, MPI_INT, lowest, world_, &reqs[0]);
  MPI_Ibcast(buf, sizeof buf, MPI_CHAR, lowest, world_, &reqs[1]);
  DLCKPT_RETURN_IF_ERROR(Wait(&reqs[0]));
  DLCKPT_RETURN_IF_ERROR(Wait(&reqs[1]));
  buf[sizeof buf - 1] = '\0';
  return Status::Error(code > 0 ? code : EIO, what + ": node " + nodes_[static_cast<size_t>(lowest)] +
                                                  ": " + buf);
}

Result<std::vector<std::string>> Service::AllgatherStrings(const std::string& mine) {
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size_));
  MPI_Request req;
  MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, world_, &req);
  DLCKPT_RETURN_IF_ERROR(Wait(&req));
  std::vector<int> displs(static_cast<size_t>(size_));
  int total = 0;
  for (int i = 0; i < size_; ++i) {
    displs[static_cast<size_t>(i)] = total;
    total += lens[static_cast<size_t>(i)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Iallgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                  world_, &req);
  DLCKPT_RETURN_IF_ERROR(Wait(&req));
  std::vector<std::string> out;
  for (int i = 0; i < size_; ++i) {
    out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(i)]),
                             static_cast<size_t>(lens[static_cast<size_t>(i)])));
  }
  return out;
}

Status Service::BroadcastCommand(uint32_t* cmd, std::string* payload) {
  uint64_t head[2] = {*cmd, payload->size()};
  MPI_Request req;
  MPI_Ibcast(head, 2, MPI_UINT64_T, 0, world_, &req);
  // Idle processes sleep up to 2 ms between tests: no spinning.
  DLCKPT_RETURN_IF_ERROR(Wait(&req, 2000000));
  *cmd = static_cast<uint32_t>(head[0]);
  payload->resize(head[1]);
  if (head[1] > 0) {
    MPI_Ibcast(payload->data(), static_cast<int>(head[1]), MPI_CHAR, 0, world_, &req);
    DLCKPT_RETURN_IF_ERROR(Wait(&req));
  }
  return Status::OK();
}

// ---- setup -----------------------------------------------------------------------

Status Service::Init() {
  MPI_Comm_rank(world_, &rank_);
  MPI_Comm_size(world_, &size_);
  if (cfg_.scheme != "xor" && cfg_.scheme != "rs") {
    return Status::InvalidArgument("--scheme must be xor or rs");
  }
  if (cfg_.scheme == "xor" && cfg_.spares_per_group != 1) {
    return Status::InvalidArgument("--scheme xor has one parity per group; use --scheme rs for " +
                                   std::to_string(cfg_.spares_per_group));
  }
  DLCKPT_ASSIGN_OR_RETURN(nodes_, AllgatherStrings(cfg_.node));
  Status dup;
  for (int i = 0; i < size_; ++i) {
    auto [it, fresh] = rank_of_node_.emplace(nodes_[static_cast<size_t>(i)], i);
    if (!fresh && dup.ok()) {
      dup = Status::InvalidArgument("codec processes " + std::to_string(it->second) + " and " +
                                    std::to_string(i) + " both run on node " + it->first +
                                    " (start exactly one per node)");
    }
  }
  DLCKPT_RETURN_IF_ERROR(dup);
  DLCKPT_ASSIGN_OR_RETURN(world_transport_, ReduceTransport::Create(world_, cfg_.transport));
  return Status::OK();
}

// ---- HELLO: groups from the application's layout ----------------------------------

Status Service::Hello(const protocol::Hello& h) {
  if (group_transport_) group_transport_.reset();
  if (group_comm_ != MPI_COMM_NULL) MPI_Comm_free(&group_comm_);
  stores_.clear();
  have_layout_ = false;
  app_node_.clear();
  my_app_ranks_.clear();

  std::map<std::string, std::vector<int>> by_node;
  Status bad;
  for (const auto& e : h.layout) {
    app_node_[e.rank] = e.node;
    by_node[e.node].push_back(e.rank);
    if (!rank_of_node_.count(e.node) && bad.ok()) {
      bad = Status::InvalidArgument("application rank " + std::to_string(e.rank) + " runs on node " +
                                    e.node + ", where no codec process runs");
    }
  }
  if (app_node_.size() != h.layout.size() && bad.ok()) {
    bad = Status::InvalidArgument("the application layout names a rank twice");
  }
  DLCKPT_RETURN_IF_ERROR(bad);
  std::vector<NodeInfo> infos;
  for (int i = 0; i < size_; ++i) {
    NodeInfo ni;
    ni.codec_rank = i;
    ni.node = nodes_[static_cast<size_t>(i)];
    auto it = by_node.find(ni.node);
    if (it != by_node.end()) {
      ni.app_ranks = it->second;
      std::sort(ni.app_ranks.begin(), ni.app_ranks.end());
    }
    infos.push_back(ni);
  }
  // The configured layout; after recoveries have used up spare nodes, the
  // best protection still possible (fewer parities, then larger groups), or
  // none at all. A later failure beyond it is reported as unrecoverable.
  GroupOptions go;
  const int data_nodes = static_cast<int>(by_node.size());
  go.group_size = cfg_.group_size > 0 ? cfg_.group_size : data_nodes;
  go.spares_per_group = cfg_.spares_per_group;
  auto formed = FormGroups(infos, go);
  protection_.clear();
  for (int k = cfg_.spares_per_group; !formed.ok() && k >= 1; --k) {
    for (int g = go.group_size; !formed.ok() && g <= data_nodes; ++g) {
      GroupOptions alt{g, k};
      auto f = FormGroups(infos, alt);
      if (f.ok()) {
        formed = std::move(f);
        protection_ = "degraded: " + std::to_string(k) + " parity per group of at most " +
                      std::to_string(g) + " data nodes (spare nodes used up by recoveries)";
      }
    }
  }
  if (!formed.ok()) {
    protection_ = "unprotected: no spare node left; checkpoints are committed without parity";
    layout_ = GroupLayout{};
    role_ = Role{};
  } else {
    layout_ = std::move(*formed);
    DLCKPT_ASSIGN_OR_RETURN(role_, FindRole(layout_, rank_));
  }
  if (rank_ == 0 && !protection_.empty()) {
    Log(protection_);
    events::Emit("codec", "protection " + protection_);
  }
  for (const auto& ni : infos) {
    if (ni.codec_rank == rank_) my_app_ranks_.assign(ni.app_ranks.begin(), ni.app_ranks.end());
  }
  int color = role_.kind == RoleKind::kStandby ? MPI_UNDEFINED : role_.group;
  int rc = MPI_Comm_split(world_, color, role_.chunk, &group_comm_);
  if (rc != MPI_SUCCESS) return Status::IOError("MPI_Comm_split for the groups failed");
  Status mine;
  if (group_comm_ != MPI_COMM_NULL) {
    auto t = ReduceTransport::Create(group_comm_, cfg_.transport);
    if (t.ok()) {
      group_transport_ = std::move(*t);
    } else {
      mine = t.status();
    }
  }
  DLCKPT_RETURN_IF_ERROR(Agree(mine, "forming groups"));
  have_layout_ = true;
  // A node that is no longer a spare drops the parity of earlier layouts once
  // this layout's first encode has completed everywhere (see Encode).
  drop_old_parity_ = role_.kind == RoleKind::kData;
  if (rank_ == 0) Log("groups: " + DescribeLayout(layout_));
  return Status::OK();
}

// ---- local stores -------------------------------------------------------------------

memfs::Store* Service::CachedStore(int32_t rank, Status* error) {
  auto it = stores_.find(rank);
  if (it != stores_.end()) return it->second.get();
  auto name = memfs::StoreName(cfg_.job, cfg_.node, rank);
  if (!name.ok()) {
    *error = name.status();
    return nullptr;
  }
  auto s = memfs::Store::Attach(*name, memfs::AttachMode::kReadAll);
  if (!s.ok()) {
    *error = s.status();
    return nullptr;
  }
  return (stores_[rank] = std::move(*s)).get();
}

Status Service::LocalImage(uint64_t epoch, const std::vector<int32_t>& ranks,
                           std::vector<Extent>* extents, std::vector<uint64_t>* sizes,
                           const std::vector<uint64_t>* expect) {
  for (size_t i = 0; i < ranks.size(); ++i) {
    Status err;
    memfs::Store* s = CachedStore(ranks[i], &err);
    if (!s) return err.Prefixed("rank " + std::to_string(ranks[i]));
    DLCKPT_ASSIGN_OR_RETURN(memfs::Image img, s->GetImage(epoch));
    if (expect && (*expect)[i] != img.size) {
      return Status::Corruption("store of rank " + std::to_string(ranks[i]) + " holds an image of " +
                                std::to_string(img.size) + " bytes for epoch " + std::to_string(epoch) +
                                " but the parity was computed over " + std::to_string((*expect)[i]));
    }
    extents->insert(extents->end(), img.extents.begin(), img.extents.end());
    if (sizes) sizes->push_back(img.size);
  }
  return Status::OK();
}

protocol::NodeReport Service::LocalReport() {
  protocol::NodeReport rep;
  rep.node = cfg_.node;
  auto names = Env::Default()->ListShm("/dlckpt." + cfg_.job + "." + cfg_.node + ".r");
  if (names.ok()) {
    for (const auto& n : *names) {
      protocol::StoreReport sr;
      sr.name = n;
      sr.job = cfg_.job;
      sr.rank = RankOfStore(n);
      if (sr.rank < 0) continue;
      auto s = memfs::Store::Attach(n, memfs::AttachMode::kReadOnly);
      if (!s.ok()) {
        sr.error = s.status().message();
      } else {
        memfs::EpochState e = (*s)->epochs();
        sr.acked = e.acknowledged;
        sr.pending = e.pending;
      }
      rep.stores.push_back(sr);
    }
  }
  std::vector<std::string> warn;
  rep.parities = parity_.Scan(&warn);
  for (const auto& w : warn) Log("ignoring damaged parity: " + w);
  return rep;
}

// ---- ENCODE ---------------------------------------------------------------------------

namespace {

// Failure injection for dlckpt-run --at phase:encode|phase:recover:
// DLCKPT_CODEC_HOLD_ENCODE="E:S" makes every codec process wait S seconds after
// encode-begin of epoch E (0: of every epoch), DLCKPT_CODEC_HOLD_REBUILD="S" after
// rebuild-begin, so that a node killed "during the encode" or "during the
// rebuild" dies inside it however fast it would be. 0 when unset or malformed.
double Hold(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return 0;
  double seconds = std::strtod(v, nullptr);
  return (seconds > 0 && seconds < 3600) ? seconds : 0;
}

void Sleep(double seconds) {
  struct timespec ts{static_cast<time_t>(seconds),
                     static_cast<long>((seconds - static_cast<double>(static_cast<time_t>(seconds))) * 1e9)};
  nanosleep(&ts, nullptr);
}

double EncodeHold(uint64_t epoch) {
  const char* v = std::getenv("DLCKPT_CODEC_HOLD_ENCODE");
  if (v == nullptr) return 0;
  char* end = nullptr;
  unsigned long long e = std::strtoull(v, &end, 10);
  if (end == v || *end != ':') return 0;
  double seconds = std::strtod(end + 1, nullptr);
  if (!(seconds > 0 && seconds < 3600)) return 0;
  return (e == 0 || e == epoch) ? seconds : 0;
}

}  // namespace

protocol::Done Service::Encode(uint64_t epoch, uint64_t keep) {
  double t0 = Now();
  protocol::Done done;
  done.epoch = epoch;
  if (rank_ == 0) events::Emit("codec", "encode-begin " + std::to_string(epoch));
  if (double hold = EncodeHold(epoch); hold > 0) Sleep(hold);
  auto finish = [&](const Status& s) {
    done.code = s.code();
    done.message = s.ok() ? "" : s.message();
    done.seconds = Now() - t0;
    if (rank_ == 0) {
      events::Emit("codec", "encode-end " + std::to_string(epoch) + " " + std::to_string(s.code()));
    }
    return done;
  };
  if (!have_layout_) return finish(Status::InvalidArgument("ENCODE before the application's HELLO"));

  // Every data node's image: its stores' images in rank order, read in place.
  std::vector<Extent> extents;
  std::vector<uint64_t> sizes;
  Status mine;
  if (role_.kind == RoleKind::kData) {
    mine = LocalImage(epoch, my_app_ranks_, &extents, &sizes, nullptr);
    if (!mine.ok()) stores_.clear();  // re-attach next time (a relaunched rank may have new stores)
  }
  // One exchange carries both every node's readiness and its member record
  // (node, ranks, image sizes) for the parity headers: fewer collectives,
  // fewer wake-ups of sleeping processes.
  protocol::MemberRecord mine_record{cfg_.node, {}, sizes};
  if (!sizes.empty()) mine_record.ranks.assign(my_app_ranks_.begin(), my_app_ranks_.end());
  protocol::Writer w;
  w.I32(mine.code());
  w.Str(mine.message());
  protocol::PutMember(w, mine_record);
  auto gathered = AllgatherStrings(w.data());
  if (!gathered.ok()) return finish(gathered.status());
  std::vector<protocol::MemberRecord> records(gathered->size());
  const std::string what = "encode of epoch " + std::to_string(epoch);
  for (size_t i = 0; i < records.size(); ++i) {
    protocol::Reader rd((*gathered)[i], "member record");
    int32_t code = 0;
    std::string msg;
    Status st = rd.I32(&code);
    if (st.ok()) st = rd.Str(&msg);
    if (st.ok()) st = protocol::GetMember(rd, &records[i]);
    if (!st.ok()) return finish(st);
    if (code != 0) return finish(Status::Error(code, what + ": node " + nodes_[i] + ": " + msg));
    for (uint64_t size : records[i].sizes) done.bytes += size;
  }

  Status run_status;
  if (role_.kind != RoleKind::kStandby) {
    const Group& g = layout_.groups[static_cast<size_t>(role_.group)];
    auto code = ErasureCode::Create(g.scheme(), g.n(), g.k());
    if (!code.ok()) {
      run_status = code.status();
    } else {
      protocol::ParityReport info;
      info.epoch = epoch;
      info.generation = cfg_.generation;
      info.group = static_cast<uint32_t>(g.id);
      info.k = static_cast<uint32_t>(g.k());
      info.ngroups = static_cast<uint32_t>(layout_.groups.size());
      info.scheme = g.scheme() == Scheme::kXor ? 0 : 1;
      for (const auto& d : g.data) info.members.push_back(records[static_cast<size_t>(d.codec_rank)]);
      struct ParitySink final : OutputSink {
        ParitySlots* slots;
        protocol::ParityReport info;
        uint64_t keep;
        Result<uint8_t*> Begin(int output, uint64_t length) override {
          info.index = static_cast<uint32_t>(output);
          return slots->Prepare(info, length, keep);
        }
      } sink;
      sink.slots = &parity_;
      sink.info = info;
      sink.keep = keep;
      std::string label = "group " + std::to_string(g.id) + " encode of epoch " + std::to_string(epoch);
      double t_run = Now();
      auto stats = group_transport_->Run(EncodeSpec(**code, label), extents, &sink);
      if (!stats.ok()) {
        run_status = stats.status();
      } else if (role_.kind == RoleKind::kSpare) {
        run_status = parity_.Complete();
      }
      if (getenv("DLCKPT_CODEC_TRACE")) {
        Log(label + ": prepare " + Fixed(t_run - t0) + " s, transport " + Fixed(Now() - t_run) + " s");
      }
    }
  }
  Status all = Agree(run_status, what);
  if (all.ok()) {
    last_encoded_ = epoch;
    ++encodes_;
    if (drop_old_parity_) {
      parity_.RemoveAll();
      drop_old_parity_ = false;
    }
  }
  return finish(all);
}

// ---- SURVEY ---------------------------------------------------------------------------

Result<protocol::SurveyReply> Service::Survey() {
  protocol::SurveyReply mine;
  mine.nodes.push_back(LocalReport());
  DLCKPT_ASSIGN_OR_RETURN(auto all, AllgatherStrings(protocol::EncodeSurveyReply(mine)));
  protocol::SurveyReply out;
  for (const auto& s : all) {
    DLCKPT_ASSIGN_OR_RETURN(protocol::SurveyReply one, protocol::DecodeSurveyReply(s));
    for (auto& n : one.nodes) out.nodes.push_back(std::move(n));
  }
  return out;
}

// ---- RECOVER --------------------------------------------------------------------------

protocol::Done Service::Recover(const protocol::Recover& req) {
  double t0 = Now();
  protocol::Done done;
  done.epoch = req.epoch;
  const uint64_t e = req.epoch;
  if (rank_ == 0) events::Emit("codec", "recover-begin " + std::to_string(e));
  auto finish = [&](const Status& s) {
    done.code = s.code();
    done.message = s.ok() ? "" : s.message();
    done.seconds = Now() - t0;
    if (rank_ == 0) events::Emit("codec", "recover-end " + std::to_string(e) + " " + std::to_string(s.code()));
    return done;
  };
  stores_.clear();
  auto survey = Survey();
  if (!survey.ok()) return finish(survey.status());

  // The encoding the rebuilds use: complete parity of (group, e, generation).
  std::map<uint32_t, std::vector<std::pair<uint32_t, std::string>>> parity_at;  // group -> (index, node)
  std::map<uint32_t, protocol::ParityReport> group_info;
  std::map<int32_t, std::string> store_node;  // rank -> node holding it at epoch e
  for (const auto& n : survey->nodes) {
    for (const auto& p : n.parities) {
      if (p.complete && p.epoch == e && p.generation == req.generation) {
        parity_at[p.group].push_back({p.index, n.node});
        group_info[p.group] = p;
      }
    }
    for (const auto& s : n.stores) {
      if (s.error.empty() && (s.acked == e || s.pending == e)) store_node[s.rank] = n.node;
    }
  }
  std::set<int32_t> rebuilt_ranks;
  Status plan_error;
  for (const auto& t : req.rebuilds) {
    auto gi = group_info.find(t.group);
    if (gi == group_info.end() || t.member >= gi->second.members.size()) {
      plan_error = Status::NotFound("no complete parity of group " + std::to_string(t.group) +
                                    " for epoch " + std::to_string(e) + " survives");
      break;
    }
    if (!rank_of_node_.count(t.target_node)) {
      plan_error = Status::NotFound("rebuild target node " + t.target_node + " has no codec process");
      break;
    }
    for (int32_t r : gi->second.members[t.member].ranks) rebuilt_ranks.insert(r);
  }
  Status all = Agree(plan_error, "recover");
  if (!all.ok()) return finish(all);

  // 1. Every surviving store goes to epoch e; stale copies of rebuilt ranks go.
  Status mine;
  auto names = Env::Default()->ListShm("/dlckpt." + cfg_.job + "." + cfg_.node + ".r");
  if (names.ok()) {
    for (const auto& n : *names) {
      int32_t r = RankOfStore(n);
      if (r < 0) continue;
      if (e == 0 || rebuilt_ranks.count(r)) {
        (void)memfs::Store::Destroy(n);
        continue;
      }
      auto s = memfs::Store::Attach(n, memfs::AttachMode::kOwner);
      Status st = s.ok() ? (*s)->Restore(e) : s.status();
      // No silent corruption: a restored checkpoint is checked like a rebuilt one.
      if (st.ok()) st = (*s)->Verify(e);
      if (!st.ok() && mine.ok()) mine = st.Prefixed("restore " + n + " to epoch " + std::to_string(e));
    }
  }
  if (e == 0) parity_.RemoveAll();
  all = Agree(mine, "recover");
  if (!all.ok()) return finish(all);
  if (rank_ == 0) events::Emit("codec", "rebuild-begin " + std::to_string(e));
  if (double hold = Hold("DLCKPT_CODEC_HOLD_REBUILD"); hold > 0) Sleep(hold);

  // 2. Rebuild, one group at a time, over all codec processes.
  std::map<uint32_t, std::vector<protocol::RebuildTask>> by_group;
  for (const auto& t : req.rebuilds) by_group[t.group].push_back(t);
  uint64_t rebuilt_bytes = 0;
  for (const auto& [g, tasks] : by_group) {
    const protocol::ParityReport& info = group_info.at(g);
    int n = static_cast<int>(info.members.size());
    int k = static_cast<int>(info.k);
    Status local;
    std::vector<int> chunk_ranks(static_cast<size_t>(n + k), -1);
    std::set<uint32_t> lost;
    for (const auto& t : tasks) lost.insert(t.member);
    for (int i = 0; i < n; ++i) {
      if (lost.count(static_cast<uint32_t>(i))) continue;
      const auto& m = info.members[static_cast<size_t>(i)];
      std::string holder;
      for (int32_t r : m.ranks) {
        auto it = store_node.find(r);
        if (it == store_node.end() || (!holder.empty() && holder != it->second)) {
          holder.clear();
          break;
        }
        holder = it->second;
      }
      if (!holder.empty()) chunk_ranks[static_cast<size_t>(i)] = rank_of_node_.at(holder);
    }
    for (const auto& [index, node] : parity_at[g]) {
      if (index < static_cast<uint32_t>(k)) chunk_ranks[static_cast<size_t>(n) + index] = rank_of_node_.at(node);
    }
    std::vector<int> wanted, targets;
    for (const auto& t : tasks) {
      wanted.push_back(static_cast<int>(t.member));
      targets.push_back(rank_of_node_.at(t.target_node));
    }
    std::string label = "group " + std::to_string(g) + " rebuild of epoch " + std::to_string(e);
    auto code = ErasureCode::Create(info.scheme == 0 ? Scheme::kXor : Scheme::kReedSolomon, n, k);
    if (!code.ok()) {
      all = Agree(code.status(), label);
      return finish(all);
    }
    auto spec = RebuildSpec(**code, chunk_ranks, wanted, targets, label);
    if (!spec.ok()) {
      all = Agree(spec.status(), label);
      return finish(all);
    }
    // My input: a surviving data member's stores, or a parity.
    std::vector<Extent> input;
    for (int c = 0; c < n + k && local.ok(); ++c) {
      if (chunk_ranks[static_cast<size_t>(c)] != rank_) continue;
      if (!input.empty()) {
        local = Status::InvalidArgument(label + ": node " + cfg_.node + " holds two chunks of the group");
        break;
      }
      if (c < n) {
        const auto& m = info.members[static_cast<size_t>(c)];
        local = LocalImage(e, m.ranks, &input, nullptr, &m.sizes);
      } else {
        auto ext = parity_.Find(g, static_cast<uint32_t>(c - n), e, req.generation);
        if (ext.ok()) {
          input.push_back(*ext);
        } else {
          local = ext.status();
        }
      }
    }
    // My outputs: lost members rebuilt here, split back into their stores.
    struct Target {
      const protocol::MemberRecord* member;
      std::vector<std::unique_ptr<memfs::ImageBuilder>> builders;
      uint64_t offset = 0;
    };
    std::map<int, Target> outs;
    for (size_t w = 0; w < wanted.size() && local.ok(); ++w) {
      if (targets[w] != rank_) continue;
      Target& t = outs[static_cast<int>(w)];
      t.member = &info.members[static_cast<size_t>(wanted[w])];
      for (int32_t r : t.member->ranks) {
        auto name = memfs::StoreName(cfg_.job, cfg_.node, r);
        if (!name.ok()) {
          local = name.status();
          break;
        }
        (void)memfs::Store::Destroy(*name);
        auto b = memfs::ImageBuilder::Begin(*name, cfg_.node);
        if (!b.ok()) {
          local = b.status();
          break;
        }
        t.builders.push_back(std::move(*b));
      }
    }
    all = Agree(local, label);
    if (!all.ok()) return finish(all);
    OrderedSink sink([&](int output, const uint8_t* data, size_t len) -> Status {
      Target& t = outs.at(output);
      // Route the member image to its stores by the recorded sizes.
      uint64_t base = 0;
      for (size_t i = 0; i < t.builders.size() && len > 0; ++i) {
        uint64_t size = t.member->sizes[i];
        if (t.offset < base + size) {
          size_t take = static_cast<size_t>(std::min<uint64_t>(len, base + size - t.offset));
          DLCKPT_RETURN_IF_ERROR(t.builders[i]->Append(data, take));
          data += take;
          len -= take;
          t.offset += take;
        }
        base += size;
      }
      t.offset += len;  // zero padding past the member's image
      return Status::OK();
    });
    auto stats = world_transport_->Run(*spec, input, outs.empty() ? nullptr : &sink);
    Status result = stats.status();
    if (result.ok()) {
      for (auto& [w, t] : outs) {
        for (size_t i = 0; i < t.builders.size() && result.ok(); ++i) {
          result = t.builders[i]->Finish().status();
          rebuilt_bytes += t.member->sizes[i];
        }
      }
    }
    outs.clear();  // unfinished builders remove their half-built stores
    all = Agree(result, label);
    if (!all.ok()) return finish(all);
    if (rank_ == 0) {
      Log(label + ": rebuilt " + std::to_string(tasks.size()) + " member(s) in " +
          Fixed(stats.ok() ? stats->seconds : 0) + " s");
    }
  }
  // Everyone's byte count (only targets know theirs).
  uint64_t sum = 0;
  MPI_Request r;
  MPI_Iallreduce(&rebuilt_bytes, &sum, 1, MPI_UINT64_T, MPI_SUM, world_, &r);
  (void)Wait(&r);
  done.bytes = sum;
  return finish(Status::OK());
}

void Service::Shutdown() {
  group_transport_.reset();
  if (group_comm_ != MPI_COMM_NULL) MPI_Comm_free(&group_comm_);
  stores_.clear();
  if (cfg_.cleanup_on_shutdown) {
    auto names = Env::Default()->ListShm("/dlckpt." + cfg_.job + "." + cfg_.node + ".");
    if (names.ok()) {
      for (const auto& n : *names) (void)Env::Default()->UnlinkShm(n);
    }
  }
}

// ---- command dispatch --------------------------------------------------------------

Result<std::string> Service::Execute(uint32_t cmd, const std::string& payload,
                                     protocol::MsgType* reply_type) {
  switch (cmd) {
    case kCmdHello: {
      DLCKPT_ASSIGN_OR_RETURN(protocol::Hello h, protocol::DecodeHello(payload));
      Status s = Hello(h);
      *reply_type = s.ok() ? protocol::MsgType::kHelloOk : protocol::MsgType::kError;
      return s.ok() ? std::string() : protocol::EncodeError({s.code(), s.message()});
    }
    case kCmdEncode: {
      DLCKPT_ASSIGN_OR_RETURN(protocol::Encode m, protocol::DecodeEncode(payload));
      *reply_type = protocol::MsgType::kDone;
      return protocol::EncodeDone(Encode(m.epoch, m.keep));
    }
    case kCmdSurvey: {
      auto s = Survey();
      if (!s.ok()) {
        *reply_type = protocol::MsgType::kError;
        return protocol::EncodeError({s.status().code(), s.status().message()});
      }
      *reply_type = protocol::MsgType::kSurveyReply;
      return protocol::EncodeSurveyReply(*s);
    }
    case kCmdRecover: {
      DLCKPT_ASSIGN_OR_RETURN(protocol::Recover m, protocol::DecodeRecover(payload));
      *reply_type = protocol::MsgType::kDone;
      return protocol::EncodeDone(Recover(m));
    }
    case kCmdShutdown:
      Shutdown();
      *reply_type = protocol::MsgType::kDone;
      return protocol::EncodeDone({});
  }
  return Status::InvalidArgument("unknown command " + std::to_string(cmd));
}

// ---- rank 0: the network ---------------------------------------------------------------

std::string Service::StatusText() const {
  std::ostringstream os;
  os << "job " << cfg_.job << " generation " << cfg_.generation << "; " << size_ << " codec process(es)";
  os << "; encodes " << encodes_ << ", last encoded epoch " << last_encoded_;
  if (have_layout_) os << "; " << DescribeLayout(layout_);
  if (!protection_.empty()) os << "; " << protection_;
  return os.str();
}

Status Service::Listen() {
  DLCKPT_ASSIGN_OR_RETURN(listener_, protocol::Listener::Listen(cfg_.port));
  DLCKPT_ASSIGN_OR_RETURN(token_, protocol::NewToken());
  std::string host = cfg_.rendezvous_host;
  if (host.empty()) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    host = name;
    struct addrinfo hints {};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo* res = nullptr;
    if (getaddrinfo(name, nullptr, &hints, &res) == 0 && res) {
      char ip[NI_MAXHOST];
      if (getnameinfo(res->ai_addr, res->ai_addrlen, ip, sizeof ip, nullptr, 0, NI_NUMERICHOST) == 0) {
        host = ip;
      }
      freeaddrinfo(res);
    }
  }
  protocol::Rendezvous r{host, listener_->port(), token_, cfg_.job};
  DLCKPT_RETURN_IF_ERROR(protocol::WriteRendezvous(cfg_.rendezvous, r));
  Log("listening on " + host + ":" + std::to_string(listener_->port()) + "; rendezvous " + cfg_.rendezvous);
  return Status::OK();
}

void Service::HandleClient(size_t i) {
  Client& c = clients_[i];
  auto close_with = [&](int code, const std::string& why) {
    Log("rejected " + c.conn->peer() + ": " + why);
    (void)c.conn->Send(protocol::MsgType::kError, protocol::EncodeError({code, why}));
    c.conn.reset();
  };
  auto f = c.conn->Receive(30000);
  if (!f.ok()) {
    if (f.status().code() != ECONNRESET) Log("dropping " + c.conn->peer() + ": " + f.status().ToString());
    c.conn.reset();
    return;
  }
  Status valid = protocol::ValidatePayload(*f);
  if (!valid.ok()) return close_with(EBADMSG, "malformed " + std::string(protocol::MsgTypeName(f->type)) +
                                                  ": " + valid.message());
  if (!c.authed) {
    if (f->type != protocol::MsgType::kHello) {
      return close_with(EACCES, std::string("first message must be HELLO, not ") + protocol::MsgTypeName(f->type));
    }
    auto h = protocol::DecodeHello(f->payload);
    if (!ConstantTimeEqual(h->token, token_)) return close_with(EACCES, "wrong token");
    if (h->job != cfg_.job) return close_with(EACCES, "job " + h->job + " is not " + cfg_.job);
    c.authed = true;
    c.role = h->role;
    if (h->role == protocol::Role::kSupervisor) {
      (void)c.conn->Send(protocol::MsgType::kHelloOk, "");
      return;
    }
  } else if (f->type == protocol::MsgType::kHello) {
    return close_with(EPROTO, "HELLO sent twice");
  }
  uint32_t cmd = 0;
  std::string payload = f->payload;
  switch (f->type) {
    case protocol::MsgType::kHello: cmd = kCmdHello; break;
    case protocol::MsgType::kEncode:
      if (c.role != protocol::Role::kApplication) return close_with(EPERM, "ENCODE is for the application");
      cmd = kCmdEncode;
      break;
    case protocol::MsgType::kSurvey: cmd = kCmdSurvey; break;
    case protocol::MsgType::kRecover:
      if (c.role != protocol::Role::kSupervisor) return close_with(EPERM, "RECOVER is for the supervisor");
      cmd = kCmdRecover;
      break;
    case protocol::MsgType::kShutdown: cmd = kCmdShutdown; break;
    case protocol::MsgType::kStatus:
      (void)c.conn->Send(protocol::MsgType::kStatusReply, protocol::EncodeStatusReply({StatusText()}));
      return;
    default:
      (void)c.conn->Send(protocol::MsgType::kError,
                         protocol::EncodeError({EPROTO, std::string("unexpected ") + protocol::MsgTypeName(f->type)}));
      Log(std::string("refused unexpected ") + protocol::MsgTypeName(f->type) + " from " + c.conn->peer());
      return;
  }
  Status b = BroadcastCommand(&cmd, &payload);
  protocol::MsgType reply_type = protocol::MsgType::kError;
  std::string reply;
  if (b.ok()) {
    auto r = Execute(cmd, payload, &reply_type);
    if (r.ok()) {
      reply = std::move(*r);
    } else {
      reply_type = protocol::MsgType::kError;
      reply = protocol::EncodeError({r.status().code(), r.status().message()});
    }
  } else {
    reply = protocol::EncodeError({b.code(), b.message()});
  }
  Status sent = c.conn->Send(reply_type, reply);
  if (!sent.ok()) {
    Log("reply to " + c.conn->peer() + " failed: " + sent.ToString());
    c.conn.reset();
  }
  if (cmd == kCmdShutdown) stop_ = true;
}

Status Service::Serve() {
  if (rank_ != 0) {
    for (;;) {
      uint32_t cmd = 0;
      std::string payload;
      DLCKPT_RETURN_IF_ERROR(BroadcastCommand(&cmd, &payload));
      protocol::MsgType t;
      auto r = Execute(cmd, payload, &t);
      (void)r;
      if (cmd == kCmdShutdown) return Status::OK();
    }
  }
  DLCKPT_RETURN_IF_ERROR(Listen());
  events::Emit("codec", "ready " + std::to_string(cfg_.generation));
  while (!stop_) {
    std::vector<struct pollfd> fds;
    fds.push_back({listener_->fd(), POLLIN, 0});
    for (const auto& c : clients_) fds.push_back({c.conn->fd(), POLLIN, 0});
    int rc = poll(fds.data(), fds.size(), 1000);
    if (rc < 0 && errno != EINTR) return Status::FromErrno(errno, "poll");
    if (rc <= 0) continue;
    if (fds[0].revents & POLLIN) {
      auto c = listener_->Accept();
      if (c.ok()) {
        clients_.push_back(Client{std::move(*c)});
      } else {
        Log(c.status().ToString());
      }
    }
    for (size_t i = 1; i < fds.size() && !stop_; ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) HandleClient(i - 1);
    }
    clients_.erase(std::remove_if(clients_.begin(), clients_.end(),
                                  [](const Client& c) { return !c.conn; }),
                   clients_.end());
  }
  unlink(cfg_.rendezvous.c_str());
  return Status::OK();
}

Status Service::EncodeOnce(uint64_t epoch) {
  // The layout is what the nodes hold: every store of the job on each node.
  protocol::Writer w;
  auto names = Env::Default()->ListShm("/dlckpt." + cfg_.job + "." + cfg_.node + ".r");
  std::vector<int32_t> ranks;
  if (names.ok()) {
    for (const auto& n : *names) {
      if (RankOfStore(n) >= 0) ranks.push_back(RankOfStore(n));
    }
  }
  w.U32(static_cast<uint32_t>(ranks.size()));
  for (int32_t r : ranks) w.I32(r);
  DLCKPT_ASSIGN_OR_RETURN(auto all, AllgatherStrings(w.data()));
  protocol::Hello h;
  h.job = cfg_.job;
  for (size_t i = 0; i < all.size(); ++i) {
    protocol::Reader rd(all[i], "store list");
    uint32_t n = 0;
    (void)rd.U32(&n);
    for (uint32_t j = 0; j < n; ++j) {
      int32_t r;
      (void)rd.I32(&r);
      auto name = memfs::StoreName(cfg_.job, nodes_[i], r);
      h.layout.push_back({r, nodes_[i], name.ok() ? *name : ""});
    }
  }
  if (h.layout.empty()) return Status::NotFound("no store of job " + cfg_.job + " on any node");
  DLCKPT_RETURN_IF_ERROR(Hello(h));
  protocol::Done d = Encode(epoch, 0);
  if (d.code != 0) return Status::Error(d.code, d.message);
  if (rank_ == 0) {
    std::printf("encoded epoch %llu: %llu bytes in %.3f s; %s\n", static_cast<unsigned long long>(epoch),
                static_cast<unsigned long long>(d.bytes), d.seconds, StatusText().c_str());
  }
  return Status::OK();
}

Status Service::RecoverOnce(const std::vector<std::string>& lost, uint64_t epoch) {
  DLCKPT_ASSIGN_OR_RETURN(protocol::SurveyReply survey, Survey());
  // Rank 0 decides, as dlckpt-run would, and tells everyone.
  std::string plan_bytes;
  Status decided;
  if (rank_ == 0) {
    recovery::Input in;
    in.survey = survey;
    in.dead_nodes.insert(lost.begin(), lost.end());
    std::set<std::string> used;
    for (const auto& n : survey.nodes) {
      for (const auto& st : n.stores) {
        if (st.rank >= 0) {
          in.placement[st.rank] = n.node;
          used.insert(n.node);
        }
      }
      for (const auto& p : n.parities) {
        for (const auto& m : p.members) {
          if (!in.dead_nodes.count(m.node)) continue;
          for (int32_t r : m.ranks) in.placement.emplace(r, m.node);
        }
      }
    }
    for (const auto& n : nodes_) {
      if (!used.count(n)) in.free_nodes.push_back(n);
    }
    auto plan = in.placement.empty() ? Result<recovery::Plan>(Status::NotFound("no store of job " + cfg_.job))
                                     : recovery::Decide(in);
    if (plan.ok() && epoch != 0 && plan->epoch != epoch) {
      plan = Status::Error(ENOTRECOVERABLE, "epoch " + std::to_string(epoch) +
                                                " was asked for, but the newest recoverable epoch is " +
                                                std::to_string(plan->epoch));
    }
    if (plan.ok()) {
      std::printf("recovery plan: %s\n", plan->summary.c_str());
      for (const auto& [r, node] : plan->placement) std::printf("  rank %d -> %s\n", r, node.c_str());
      std::fflush(stdout);
      plan_bytes = protocol::EncodeRecover(recovery::ToRecoverMessage(*plan));
    } else {
      decided = plan.status();
    }
  }
  DLCKPT_RETURN_IF_ERROR(Agree(decided, "recovery decision"));
  uint32_t cmd = kCmdRecover;
  DLCKPT_RETURN_IF_ERROR(BroadcastCommand(&cmd, &plan_bytes));
  DLCKPT_ASSIGN_OR_RETURN(protocol::Recover req, protocol::DecodeRecover(plan_bytes));
  protocol::Done d = Recover(req);
  if (d.code != 0) return Status::Error(d.code, d.message);
  if (rank_ == 0) {
    std::printf("recovered epoch %llu: %llu bytes rebuilt in %.3f s\n", static_cast<unsigned long long>(d.epoch),
                static_cast<unsigned long long>(d.bytes), d.seconds);
  }
  return Status::OK();
}

Status RunService(MPI_Comm world, const ServiceConfig& config) {
  Service s(world, config);
  DLCKPT_RETURN_IF_ERROR(s.Init());
  return s.Serve();
}

Status RunEncodeOnce(MPI_Comm world, const ServiceConfig& config, uint64_t epoch) {
  Service s(world, config);
  DLCKPT_RETURN_IF_ERROR(s.Init());
  return s.EncodeOnce(epoch);
}

Status RunRecoverOnce(MPI_Comm world, const ServiceConfig& config, const std::vector<std::string>& lost,
                      uint64_t epoch) {
  Service s(world, config);
  DLCKPT_RETURN_IF_ERROR(s.Init());
  return s.RecoverOnce(lost, epoch);
}

}  // namespace dlckpt::codec
