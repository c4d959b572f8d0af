// The dlckpt-codec service (codec_service.h): setup, HELLO (groups from the
// application's layout), the local stores, the command dispatch, rank 0's
// network side (listener, rendezvous, clients) and the entry points. ENCODE is
// in service_encode.cc, SURVEY and RECOVER in service_recover.cc; the Service
// class is declared in service_impl.h.
// Thread safety: none; one Service per process, driven by one thread. Every
// command is collective over the world communicator. Failures: a command's
// error is agreed on by all processes and answered to the client as an ERROR
// or DONE; a client's protocol error closes that client only; the service
// stops only on SHUTDOWN or when MPI or the listener fails. Rank 0 reads its
// clients without blocking (protocol::FrameServer): a command runs only once
// its whole frame has arrived, so a slow, silent or hostile peer never delays
// another client.
#include "service_impl.h"

#include <netdb.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "dlckpt/base/events.h"
#include "dlckpt/base/mpi.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/node.h"
#include "dlckpt/base/units.h"
#include "dlckpt/codec/groups.h"
#include "dlckpt/memfs/memfs.h"
#include "dlckpt/control/protocol.h"
#include "dlckpt/control/stripes.h"
#include "parity.h"

namespace dlckpt::codec {

namespace protocol = control::protocol;

namespace internal {

double Now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::vector<Extent> SliceExtents(std::span<const Extent> extents, uint64_t offset, uint64_t len) {
  std::vector<Extent> out;
  uint64_t start = 0;
  const uint64_t end = offset + len;
  for (const Extent& e : extents) {
    const uint64_t e_end = start + e.len;
    if (e_end > offset && start < end) {
      const uint64_t from = std::max(start, offset), to = std::min(e_end, end);
      out.push_back(Extent{e.data + (from - start), static_cast<size_t>(to - from)});
    }
    start = e_end;
    if (start >= end) break;
  }
  return out;
}

ReduceSpec SpreadStripeSpec(std::shared_ptr<const Combination> encoder, uint32_t n, uint32_t k, uint32_t s,
                            std::string label) {
  ReduceSpec spec;
  spec.label = std::move(label);
  spec.combination = std::move(encoder);
  for (uint32_t m : control::SpreadDataMembers(n, k, s)) spec.source_ranks.push_back(static_cast<int>(m));
  for (uint32_t j = 0; j < k; ++j) spec.output_ranks.push_back(static_cast<int>(control::SpreadParityHolder(n, s, j)));
  return spec;
}

uint64_t SpreadSegmentOf(const std::vector<protocol::MemberRecord>& members, uint32_t n, uint32_t k) {
  uint64_t longest = 0;
  for (const auto& m : members) {
    uint64_t len = 0;
    for (uint64_t size : m.sizes) len += size;
    longest = std::max(longest, len);
  }
  return control::SpreadSegmentBytes(longest, n, k);
}

ReduceTransport::ProgressFn ProgressEvents(events::Event event) {
  const char* a = std::getenv("DLCKPT_PROGRESS_AFTER");
  const double after = a != nullptr && *a != '\0' ? std::strtod(a, nullptr) : 2.0;
  const double start = Now();
  double last = -1;
  return [event = std::move(event), after, start, last](uint64_t done, uint64_t total) mutable {
    const double now = Now();
    if (now - start < after || (last >= 0 && now - last < 1.0)) return;
    last = now;
    event.done = done;
    event.total = total;
    event.seconds = now - start;
    events::Emit(event);
  };
}

std::string Fixed(double v, int decimals) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

int RankOfStore(const std::string& name, const std::string& job, const std::string& node) {
  auto id = ParseStoreName(name);
  return id.ok() && id->job == job && id->node == node ? id->rank : -1;
}

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

double EncodeHold(uint64_t epoch) { return events::HoldSeconds("DLCKPT_CODEC_HOLD_ENCODE", epoch); }

}  // namespace internal

namespace {

bool ConstantTimeEqual(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

}  // namespace

using internal::kCmdEncode;
using internal::kCmdHello;
using internal::kCmdRecover;
using internal::kCmdShutdown;
using internal::kCmdSurvey;
using internal::RankOfStore;

// ---- collectives -----------------------------------------------------------------

Status Service::BroadcastCommand(uint32_t* cmd, std::string* payload, bool defer) {
  // Rank 0 sends the command to every other process itself instead of an
  // MPI_Ibcast: an idle process tests for it only every kIdle.max_ns, and in
  // a broadcast tree each level waits for that before it forwards (measured
  // with 5 processes: the last started an encode 6.8-8 ms after rank 0 with
  // MPI_Ibcast, 1.6-1.8 ms after with these sends; bench/README.md).
  constexpr int kTagHead = 0x6c0, kTagPayload = 0x6c1;
  if (payload->size() > static_cast<uint64_t>(INT_MAX)) return Status::InvalidArgument("command payload too large");
  if (rank_ == 0) {
    // A failure once a send is posted leaves some processes with the command
    // and others without, and sends in flight: the job cannot go on
    // (command_broken_; Serve returns the error, and dlckpt-codec ends the
    // MPI job).
    DLCKPT_RETURN_IF_ERROR(CompleteCommand());
    posted_head_[0] = *cmd;
    posted_head_[1] = payload->size();
    posted_.reserve(2 * static_cast<size_t>(size_));
    Status st;
    for (int r = 1; r < size_ && st.ok(); ++r) {
      posted_.emplace_back();
      st = mpi::Check(MPI_Isend(posted_head_, 2, MPI_UINT64_T, r, kTagHead, world_, &posted_.back()), "command");
      if (!st.ok() || payload->empty()) continue;
      posted_.emplace_back();
      st = mpi::Check(MPI_Isend(payload->data(), static_cast<int>(payload->size()), MPI_CHAR, r, kTagPayload, world_,
                                &posted_.back()),
                      "command");
    }
    if (!st.ok()) {
      command_broken_ = true;
      return st;
    }
    doorbells_.Ring();
    return defer ? Status::OK() : CompleteCommand();
  }
  uint64_t head[2] = {0, 0};
  MPI_Request req;
  DLCKPT_RETURN_IF_ERROR(mpi::Check(MPI_Irecv(head, 2, MPI_UINT64_T, 0, kTagHead, world_, &req), "command"));
  // Idle processes sleep between tests, woken by their doorbell: no spinning.
  DLCKPT_RETURN_IF_ERROR(doorbells_.Wait(&req, "command", idle_max_ns_, idle_first_ns_));
  if (head[1] > static_cast<uint64_t>(INT_MAX)) return Status::InvalidArgument("command payload too large");
  *cmd = static_cast<uint32_t>(head[0]);
  payload->resize(head[1]);
  if (head[1] > 0) {
    DLCKPT_RETURN_IF_ERROR(mpi::Check(
        MPI_Irecv(payload->data(), static_cast<int>(head[1]), MPI_CHAR, 0, kTagPayload, world_, &req), "command"));
    DLCKPT_RETURN_IF_ERROR(Wait(&req));
  }
  return Status::OK();
}

Status Service::CompleteCommand() {
  if (posted_.empty()) return Status::OK();
  Status st = mpi::WaitAll(static_cast<int>(posted_.size()), posted_.data(), "command");
  posted_.clear();
  if (!st.ok()) command_broken_ = true;
  return st;
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
  c_ = std::make_unique<mpi::Collective>(world_, "node " + cfg_.node);
  DLCKPT_ASSIGN_OR_RETURN(nodes_, c_->Allgather(cfg_.node));
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
  go.parity = cfg_.parity;
  auto formed = FormGroups(infos, go);
  protection_.clear();
  for (int k = cfg_.spares_per_group; !formed.ok() && k >= 1; --k) {
    for (int g = go.group_size; !formed.ok() && g <= std::max(go.group_size, data_nodes); ++g) {
      GroupOptions alt{g, k, cfg_.parity};
      auto f = FormGroups(infos, alt);
      if (f.ok()) {
        formed = std::move(f);
        protection_ = "degraded: " + std::to_string(k) + " parity per group of at most " +
                      std::to_string(g) + " data nodes (" +
                      (cfg_.parity == ParityMode::kSpares ? "spare nodes used up by recoveries"
                                                          : "too few nodes left to spread more") + ")";
      }
    }
  }
  if (!formed.ok()) {
    protection_ = cfg_.parity == ParityMode::kSpares
                      ? "unprotected: no spare node left; checkpoints are committed without parity"
                      : "unprotected: too few nodes left to spread parity over; checkpoints are committed "
                        "without parity";
    layout_ = GroupLayout{};
    role_ = Role{};
  } else {
    layout_ = std::move(*formed);
    DLCKPT_ASSIGN_OR_RETURN(role_, FindRole(layout_, rank_));
    // --parity auto: say when a group keeps its parity on its own members.
    std::string spread;
    for (const Group& g : layout_.groups) {
      if (g.spread) spread += (spread.empty() ? "" : ", ") + std::to_string(g.id);
    }
    if (cfg_.parity == ParityMode::kAuto && !spread.empty() && protection_.empty()) {
      protection_ = "spread: group(s) " + spread + " keep their parity on their own data nodes (no spare node "
                    "left for them); each still survives " + std::to_string(go.spares_per_group) +
                    " lost node(s)";
    }
  }
  if (rank_ == 0 && !protection_.empty()) {
    Log(protection_);
    events::Emit(events::Protection(protection_));
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
  DLCKPT_RETURN_IF_ERROR(c_->Agree(mine, "forming groups"));
  DLCKPT_ASSIGN_OR_RETURN(uint64_t slot_bytes, GroupBound());
  have_layout_ = true;
  // A node that is no longer a spare drops the parity of earlier layouts once
  // this layout's first encode has completed everywhere (see Encode).
  drop_old_parity_ = role_.kind == RoleKind::kData &&
                     !layout_.groups[static_cast<size_t>(role_.group)].spread;
  if (rank_ == 0) Log("groups: " + DescribeLayout(layout_));
  if (serving_) {
    StartWarmup(slot_bytes, 1, true);
    second_slot_bytes_ = role_.kind == RoleKind::kSpare ? slot_bytes : 0;
  }
  return Status::OK();
}

// ---- local stores -------------------------------------------------------------------

memfs::Store* Service::CachedStore(int32_t rank, Status* error) {
  auto it = stores_.find(rank);
  if (it != stores_.end()) return it->second.get();
  auto name = StoreName(cfg_.job, cfg_.node, rank);
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
  surveyed_.clear();
  auto names = Env::Default()->ListShm(StorePrefix(cfg_.job, cfg_.node));
  if (names.ok()) {
    for (const auto& n : *names) {
      protocol::StoreReport sr;
      sr.name = n;
      sr.job = cfg_.job;
      sr.rank = RankOfStore(n, cfg_.job, cfg_.node);
      if (sr.rank < 0) continue;
      auto s = memfs::Store::Attach(n, memfs::AttachMode::kReadOnly);
      if (!s.ok()) {
        sr.error = s.status().message();
      } else {
        // Every committed epoch is verified: recovery may restore either,
        // and a copy that fails is an erasure, not a source.
        memfs::EpochState e = (*s)->epochs();
        sr.acked = e.acknowledged;
        sr.pending = e.pending;
        for (auto [epoch, ok] : {std::pair{e.acknowledged, &sr.acked_ok}, std::pair{e.pending, &sr.pending_ok}}) {
          if (epoch == 0) continue;
          Status v = (*s)->Verify(epoch);
          if (v.ok()) continue;
          *ok = false;
          sr.damage += (sr.damage.empty() ? "" : "; ") + std::string("epoch ") + std::to_string(epoch) + ": " +
                       v.message();
        }
      }
      surveyed_[n] = sr;
      rep.stores.push_back(sr);
    }
  }
  rep.parities = parity_.Scan(&rep.parity_damage);
  for (const auto& w : rep.parity_damage) Log("ignoring damaged parity: " + w);
  return rep;
}

void Service::Shutdown() {
  group_transport_.reset();
  if (group_comm_ != MPI_COMM_NULL) MPI_Comm_free(&group_comm_);
  stores_.clear();
  if (cfg_.cleanup_on_shutdown) {
    auto names = Env::Default()->ListShm(NodePrefix(cfg_.job, cfg_.node));
    if (names.ok()) {
      for (const auto& n : *names) {
        // Only this uid's objects: another user's planted one stays.
        if (ForeignShm(Env::Default(), n).ok()) (void)Env::Default()->UnlinkShm(n);
      }
    }
  }
}

// ---- command dispatch --------------------------------------------------------------

Result<std::string> Service::Execute(uint32_t cmd, const std::string& payload,
                                     protocol::MsgType* reply_type) {
  FinishWarmup();
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
      std::string done = protocol::EncodeDone(Encode(m.epoch, m.keep));
      if (second_slot_bytes_ != 0) {
        // While the application computes until its next checkpoint.
        StartWarmup(second_slot_bytes_, 2, false);
        second_slot_bytes_ = 0;
      }
      return done;
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

std::string Service::PublishedHost() const {
  std::string host = cfg_.rendezvous_host;
  if (host.empty()) {
    host = HostName();
    struct addrinfo hints {};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) == 0 && res) {
      char ip[NI_MAXHOST];
      if (getnameinfo(res->ai_addr, res->ai_addrlen, ip, sizeof ip, nullptr, 0, NI_NUMERICHOST) == 0) {
        host = ip;
      }
      freeaddrinfo(res);
    }
  }
  return host;
}

Status Service::Listen() {
  const std::string host = PublishedHost();
  // Clients connect to the published address: a loopback one is all that
  // needs to listen (virtual nodes); otherwise every interface (hosts).
  const std::string bind_to = protocol::ListenAddressFor(host);
  DLCKPT_ASSIGN_OR_RETURN(server_, protocol::FrameServer::Listen(cfg_.port, protocol::FrameServer::Limits{},
                                                                 [this](const std::string& m) { Log(m); }, bind_to));
  DLCKPT_ASSIGN_OR_RETURN(token_, protocol::NewToken());
  protocol::Rendezvous r{host, server_->port(), token_, cfg_.job};
  DLCKPT_RETURN_IF_ERROR(protocol::WriteRendezvous(cfg_.rendezvous, r));
  Log("listening on " + (bind_to.empty() ? "all interfaces" : bind_to) + " port " + std::to_string(server_->port()) +
      " (published " + host + "); rendezvous " + cfg_.rendezvous);
  return Status::OK();
}

void Service::HandleRequest(protocol::FrameServer::Request& q) {
  const protocol::Frame& f = q.frame;
  auto close_with = [&](int code, const std::string& why) { server_->Reject(q.id, code, why); };
  Status valid = protocol::ValidatePayload(f);
  if (!valid.ok()) return close_with(EBADMSG, "malformed " + std::string(protocol::MsgTypeName(f.type)) +
                                                  ": " + valid.message());
  protocol::Role role = q.role.value_or(protocol::Role::kApplication);
  if (!q.role) {
    if (f.type != protocol::MsgType::kHello) {
      return close_with(EACCES, std::string("first message must be HELLO, not ") + protocol::MsgTypeName(f.type));
    }
    auto h = protocol::DecodeHello(f.payload);
    if (!ConstantTimeEqual(h->token, token_)) return close_with(EACCES, "wrong token");
    if (h->job != cfg_.job) return close_with(EACCES, "job " + h->job + " is not " + cfg_.job);
    role = h->role;
    server_->Authenticate(q.id, role);
    if (role == protocol::Role::kSupervisor) {
      (void)server_->Reply(q.id, protocol::MsgType::kHelloOk, "");
      return;
    }
  } else if (f.type == protocol::MsgType::kHello) {
    return close_with(EPROTO, "HELLO sent twice");
  }
  uint32_t cmd = 0;
  std::string payload = std::move(q.frame.payload);
  switch (f.type) {
    case protocol::MsgType::kHello: cmd = kCmdHello; break;
    case protocol::MsgType::kEncode:
      if (role != protocol::Role::kApplication) return close_with(EPERM, "ENCODE is for the application");
      cmd = kCmdEncode;
      break;
    case protocol::MsgType::kSurvey: cmd = kCmdSurvey; break;
    case protocol::MsgType::kRecover:
      if (role != protocol::Role::kSupervisor) return close_with(EPERM, "RECOVER is for the supervisor");
      cmd = kCmdRecover;
      break;
    case protocol::MsgType::kShutdown: cmd = kCmdShutdown; break;
    case protocol::MsgType::kStatus:
      (void)server_->Reply(q.id, protocol::MsgType::kStatusReply, protocol::EncodeStatusReply({StatusText()}));
      return;
    default:
      (void)server_->Reply(q.id, protocol::MsgType::kError,
                           protocol::EncodeError({EPROTO, std::string("unexpected ") + protocol::MsgTypeName(f.type)}));
      Log(std::string("refused unexpected ") + protocol::MsgTypeName(f.type) + " from " + q.peer);
      return;
  }
  // Rank 0 starts the command at once; its sends complete while it runs
  // (every MPI call of the command moves them on), `payload` unchanged.
  // Only a small payload: a large one may need rank 0's answer to arrive,
  // and the command may make no MPI call for a while (FinishWarmup).
  constexpr size_t kDeferBytes = 4096;
  Status b = BroadcastCommand(&cmd, &payload, /*defer=*/payload.size() <= kDeferBytes);
  protocol::MsgType reply_type = protocol::MsgType::kError;
  std::string reply;
  if (b.ok()) {
    auto r = Execute(cmd, payload, &reply_type);
    b = CompleteCommand();
    if (!b.ok()) {
      reply_type = protocol::MsgType::kError;
      reply = protocol::EncodeError({b.code(), b.message()});
    } else if (r.ok()) {
      reply = std::move(*r);
    } else {
      reply_type = protocol::MsgType::kError;
      reply = protocol::EncodeError({r.status().code(), r.status().message()});
    }
  } else {
    reply = protocol::EncodeError({b.code(), b.message()});
  }
  Status sent = server_->Reply(q.id, reply_type, reply);
  if (!sent.ok()) Log("reply to " + q.peer + " failed: " + sent.ToString());
  if (cmd == kCmdShutdown) stop_ = true;
  if (command_broken_) {
    fatal_ = b.Prefixed("sending a command to the codec processes");
    stop_ = true;
  }
}

Status Service::Serve() {
  serving_ = true;
  {
    // $DLCKPT_CODEC_DOORBELL=0 (rank 0's): none, for measuring without.
    const bool off = rank_ == 0 && !EnvSwitchOn("DLCKPT_CODEC_DOORBELL");
    if (off) Log("doorbells off (DLCKPT_CODEC_DOORBELL=0): idle processes test for commands every 2 ms");
    if (const char* v = std::getenv("DLCKPT_CODEC_IDLE_SLEEP_MS"); v != nullptr && std::atol(v) > 0) {
      idle_first_ns_ = idle_max_ns_ = std::atol(v) * 1'000'000L;
    }
    DLCKPT_RETURN_IF_ERROR(
        doorbells_.SetUp(*c_, rank_ == 0 && !off ? PublishedHost() : "", [this](const std::string& m) { Log(m); }));
  }
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
  events::Emit(events::Ready(cfg_.generation));
  // No connection can delay another: the server hands out only complete
  // frames and blocks in poll(2) between them.
  while (!stop_) {
    DLCKPT_ASSIGN_OR_RETURN(std::optional<protocol::FrameServer::Request> q, server_->Next(1000));
    if (q) HandleRequest(*q);
  }
  unlink(cfg_.rendezvous.c_str());
  return fatal_;
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
