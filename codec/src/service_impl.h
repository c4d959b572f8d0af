// service_impl.h — private to the dlckpt-codec service (codec_service.h):
// the Service class that RunService, RunEncodeOnce and RunRecoverOnce drive,
// and the few helpers its files share. The class is split by concern:
//   codec_service.cc    setup, HELLO (group formation), local stores, the
//                       command dispatch, rank 0's network side, the entry points;
//   service_encode.cc   ENCODE and the one-shot encode;
//   service_recover.cc  SURVEY, RECOVER and the one-shot recovery;
//   service_warmup.cc   attaching stores and reserving parity slots after a
//                       HELLO, before the first ENCODE.
// Thread safety: none; one Service per process, used by the thread that runs
// it (and, between HELLO and the next command, the warm-up thread, see
// StartWarmup). Every command is collective over the world communicator: all processes
// call the same member in the same order. Failures are returned as a Status
// (or a Done carrying the code and a message naming node, group and epoch)
// after all processes agreed on them; nothing aborts.
#ifndef DLCKPT_CODEC_SERVICE_IMPL_H_
#define DLCKPT_CODEC_SERVICE_IMPL_H_

#include <mpi.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "codec_service.h"
#include "dlckpt/base/events.h"
#include "dlckpt/base/mpi.h"
#include "dlckpt/codec/delta_transport.h"
#include "dlckpt/codec/groups.h"
#include "dlckpt/control/frame_server.h"
#include "dlckpt/control/protocol.h"
#include "dlckpt/memfs/memfs.h"
#include "doorbell.h"
#include "parity.h"

namespace dlckpt::codec {

namespace internal {

enum Command : uint32_t {
  kCmdHello = 1,
  kCmdEncode = 2,
  kCmdSurvey = 3,
  kCmdRecover = 4,
  kCmdShutdown = 5,
};

// Monotonic seconds.
double Now();
// Bytes [offset, offset + len) of the image `extents` describe, as extents
// (fewer bytes, or none, past the image's end).
std::vector<Extent> SliceExtents(std::span<const Extent> extents, uint64_t offset, uint64_t len);
// The spread segment (control::SpreadSegmentBytes) of a group whose members'
// image sizes `members` record: the encode and the rebuild cut alike.
uint64_t SpreadSegmentOf(const std::vector<control::protocol::MemberRecord>& members, uint32_t n, uint32_t k);
// The encode of spread stripe s of a group of n members and k parity chunks
// (control/stripes.h): `encoder` (the code's n - k sources to k outputs)
// over the stripe's data members, output j to the member holding parity j.
ReduceSpec SpreadStripeSpec(std::shared_ptr<const Combination> encoder, uint32_t n, uint32_t k, uint32_t s,
                            std::string label);
// What this process brings to an agreement on a transport's outcome: its
// own error, or OK when it only learned that another rank failed
// (ECANCELED from ReduceTransport::Run), so that the agreed error is the
// failing rank's, not "rank R failed its part".
inline Status OwnError(const Status& s) { return s.code() == ECANCELED ? Status::OK() : s; }
// Progress of a long encode or rebuild as copies of `event` (an
// events::EncodeProgress or RebuildProgress) with done and total (bytes of
// the padded length) and the seconds since it began; dlckpt-run shows them.
// Nothing for the first $DLCKPT_PROGRESS_AFTER seconds (default 2), then at
// most one a second.
ReduceTransport::ProgressFn ProgressEvents(events::Event event);
// `v` with `decimals` decimals.
std::string Fixed(double v, int decimals = 3);
// The rank of store `name` when it is a store of (job, node), else -1.
int RankOfStore(const std::string& name, const std::string& job, const std::string& node);

// Failure injection for dlckpt-run --at phase:encode|phase:recover:
// DLCKPT_CODEC_HOLD_ENCODE="E:S" makes every codec process wait S seconds after
// encode-begin of epoch E (0: of every epoch), DLCKPT_CODEC_HOLD_REBUILD="S" after
// rebuild-begin, so that a node killed "during the encode" or "during the
// rebuild" dies inside it however fast it would be. 0 when unset or malformed.
double Hold(const char* name);
void Sleep(double seconds);
double EncodeHold(uint64_t epoch);

// Incremental encode (service_delta.cc). $DLCKPT_DELTA: "auto" (the default:
// delta when the changed fraction is at most DeltaThreshold()), "on" (delta
// whenever the kept parity allows it), "off" (always full).
enum class DeltaMode { kAuto, kOn, kOff };
DeltaMode DeltaModeFromEnv();
// $DLCKPT_DELTA_THRESHOLD if in (0, 1], else the measured default for the
// scheme and layout (bench/README.md, "Incremental encode": where a delta
// stops paying).
double DeltaThreshold(Scheme scheme, bool spread);
// More changed ranges than this in one member: no delta (the list travels in
// the encode's exchange).
inline constexpr size_t kMaxDeltaRanges = size_t{1} << 18;

// The alignment of a spread delta's ranges in segment coordinates (spread
// segments are multiples of 4 KiB, control::SpreadSegmentBytes): whole pages
// and parity blocks' multiples, so that packing reads whole pages.
inline constexpr uint64_t kSpreadDeltaAlign = 4096;

// What one node adds to an encode's exchange for an incremental encode.
struct DeltaInfo {
  // Data nodes: the changes of their member image since the kept epoch.
  bool have_delta = false;
  std::vector<uint64_t> old_sizes;  // image size of each store in the kept epoch
  std::vector<memfs::Store::ByteRange> ranges;
  // Spares, and the members of a spread group: the complete parity of the
  // kept epoch they hold (of the group's layout).
  bool have_kept = false;
  uint8_t scheme = 0;
  uint32_t k = 0;
  std::vector<control::protocol::MemberRecord> kept_members;
};
void PutDeltaInfo(control::protocol::Writer& w, const DeltaInfo& d);
Status GetDeltaInfo(control::protocol::Reader& r, DeltaInfo* d);

// A group's choice between a delta and a full encode, the same on every
// process (a pure function of the exchanged records).
struct DeltaPlan {
  bool use = false;
  std::string why;                               // why not (for the trace)
  std::vector<memfs::Store::ByteRange> ranges;   // U: the union of the members' changed ranges
  uint64_t length = 0;                           // the new parity length
  double fraction = 1;                           // packed bytes / length
  // Spread layout: U_s of each stripe s, in segment coordinates (length is
  // the segment length; ranges stays empty).
  std::vector<std::vector<memfs::Store::ByteRange>> stripes;
  uint64_t packed = 0;  // the bytes a delta packs (per source, all stripes)
  uint64_t whole = 0;   // the same for a full encode
};
DeltaPlan PlanDelta(const Group& g, uint64_t keep, const std::vector<control::protocol::MemberRecord>& records,
                    const std::vector<DeltaInfo>& infos, DeltaMode mode, double threshold);
// The same for a group whose parity is spread over its members
// (control/stripes.h): every member reports both its changes and the spread
// parity of `keep` it holds, the segment length must not have changed, and
// each stripe has its own U_s (plan.stripes, StripeUnion, 4 KiB-aligned);
// plan.length is the segment length, plan.fraction the packed bytes of all
// stripes over n segments.
DeltaPlan PlanSpreadDelta(const Group& g, uint64_t keep, const std::vector<control::protocol::MemberRecord>& records,
                          const std::vector<DeltaInfo>& infos, DeltaMode mode, double threshold);

}  // namespace internal

class Service {
 public:
  Service(MPI_Comm world, ServiceConfig config)
      : world_(world), cfg_(std::move(config)), parity_(cfg_.job, cfg_.node) {}
  ~Service() { FinishWarmup(); }
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  Status Init();
  Status Serve();
  // One-shot modes (no network): encode `epoch` of the stores found on the
  // nodes; or survey, decide and rebuild after losing `lost` nodes.
  Status EncodeOnce(uint64_t epoch);
  Status RecoverOnce(const std::vector<std::string>& lost, uint64_t epoch);

 private:
  // ---- collectives helpers ----
  // Completes a request of an operation without spinning (dlckpt/base/mpi.h;
  // between commands an idle process waits in doorbells_.Wait).
  static Status Wait(MPI_Request* req, mpi::Backoff backoff = mpi::kBusy) {
    return mpi::Wait(req, "codec collective", backoff);
  }
  // Collective: rank 0 sends *cmd and *payload to every other process, which
  // receive them (an idle process's wait: doorbells_). With `defer`, rank 0
  // returns once the sends are posted, and *payload must stay unchanged
  // until CompleteCommand (or the next BroadcastCommand) completes them.
  Status BroadcastCommand(uint32_t* cmd, std::string* payload, bool defer = false);
  // Rank 0: completes the sends of the last command (OK when none).
  Status CompleteCommand();

  // ---- commands (collective) ----
  Result<std::string> Execute(uint32_t cmd, const std::string& payload, control::protocol::MsgType* reply_type);
  Status Hello(const control::protocol::Hello& h);
  control::protocol::Done Encode(uint64_t epoch, uint64_t keep);
  // Collective over the group: a spread group's encode (stripes.h), one
  // transport run per stripe, this member's parity object completed at the
  // end. `image`: this member's image of the epoch.
  Status EncodeSpread(const Group& g, control::protocol::ParityReport info, uint64_t keep, const std::string& label,
                      std::span<const Extent> image);
  Result<control::protocol::SurveyReply> Survey();
  control::protocol::Done Recover(const control::protocol::Recover& r);
  // Parts of Recover (service_recover.cc). CheckPlan: local, the plan's
  // nodes all have a codec process and every rebuilt member's group is
  // described; the ranks rebuilt. RestoreSurvivors: local, see Recover.
  // RebuildGroup: collective, returns the agreed outcome.
  Status CheckPlan(const control::protocol::Recover& req, std::set<int32_t>* rebuilt_ranks) const;
  Status RestoreSurvivors(uint64_t epoch, const std::set<int32_t>& rebuilt_ranks);
  Status RebuildGroup(const control::protocol::Recover& req, const control::protocol::RebuildGroup& group,
                      const std::vector<control::protocol::RebuildTask>& tasks, uint64_t* rebuilt_bytes);
  void Shutdown();

  // ---- local state ----
  control::protocol::NodeReport LocalReport();
  Status LocalImage(uint64_t epoch, const std::vector<int32_t>& ranks, std::vector<Extent>* extents,
                    std::vector<uint64_t>* sizes, const std::vector<uint64_t>* expect);
  memfs::Store* CachedStore(int32_t rank, Status* error);
  // ---- warm-up (service_warmup.cc) ----
  // The image this node's stores hold at most in steady state: metadata and
  // half the data capacity of each (an estimate; not a limit).
  uint64_t LocalStoreBytes() const;
  // Collective: a spare's estimate of its group's parity length (the
  // largest member's LocalStoreBytes); 0 elsewhere.
  Result<uint64_t> GroupBound();
  // Starts the thread that attaches this data node's stores (`stores`), or
  // reserves `slots` of this spare's parity slots for `slot_bytes`
  // ($DLCKPT_CODEC_WARMUP=0: nothing). After a HELLO a spare reserves the
  // slot the first encode takes, and the other one once that encode is done
  // (second_slot_bytes_), so the first encode waits for one slot only.
  // Until FinishWarmup the thread alone touches parity_ and warmup_.
  void StartWarmup(uint64_t slot_bytes, int slots, bool stores);
  // Joins the warm-up, if any, and adopts the stores it attached; logs a
  // failure, emits events::Warmup. Every command calls it first.
  void FinishWarmup();
  // ---- incremental encode (service_delta.cc) ----
  // This node's DeltaInfo for encoding `epoch` over the parity of `keep`;
  // data nodes also keep their old image and own ranges for RunDelta.
  internal::DeltaInfo LocalDelta(uint64_t epoch, uint64_t keep);
  // The group's delta encode along `plan` (collective over the group).
  // `new_image`: this data node's image of the epoch encoded.
  Status RunDelta(const Group& g, const ErasureCode& code, const internal::DeltaPlan& plan,
                  const control::protocol::ParityReport& info, uint64_t keep, const std::string& label,
                  std::span<const Extent> new_image);
  // The delta encode of a spread group along `plan` (PlanSpreadDelta;
  // collective over the group): one run per stripe over its packed deltas
  // (U_s), and each member's parity object is the kept one updated, segment
  // j over U of the stripe whose parity j it holds.
  Status RunSpreadDelta(const Group& g, control::protocol::ParityReport info, uint64_t keep,
                        const std::string& label, const internal::DeltaPlan& plan, std::span<const Extent> new_image);
  void Log(const std::string& msg) const {
    std::fprintf(stderr, "dlckpt-codec[%d %s]: %s\n", rank_, cfg_.node.c_str(), msg.c_str());
    std::fflush(stderr);
  }

  // ---- rank 0 network side ----
  // The address clients and doorbells reach rank 0 by (numeric when the
  // host name resolves).
  std::string PublishedHost() const;
  Status Listen();
  void HandleRequest(control::protocol::FrameServer::Request& q);
  std::string StatusText() const;

  MPI_Comm world_;
  ServiceConfig cfg_;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<mpi::Collective> c_;  // over world_, "node N" in errors
  std::vector<std::string> nodes_;  // node of each codec rank
  std::map<std::string, int> rank_of_node_;
  std::unique_ptr<ReduceTransport> world_transport_;
  // Wakes idle processes for a command (Serve; none in one-shot modes).
  Doorbells doorbells_;
  // How an idle process with a doorbell sleeps between tests for a command
  // (Doorbells::Wait). $DLCKPT_CODEC_IDLE_SLEEP_MS (tests only) makes every
  // sleep that long, so that a command reaches such a process only through
  // its doorbell.
  long idle_first_ns_ = mpi::kIdle.min_ns, idle_max_ns_ = kDoorbellIdleMaxNs;

  // From the application's HELLO.
  bool have_layout_ = false;
  std::map<int32_t, std::string> app_node_;  // app rank -> node
  GroupLayout layout_;
  Role role_;
  MPI_Comm group_comm_ = MPI_COMM_NULL;
  std::unique_ptr<ReduceTransport> group_transport_;
  std::vector<int32_t> my_app_ranks_;
  std::map<int32_t, std::unique_ptr<memfs::Store>> stores_;  // read-only attachments
  // What this process's last survey (LocalReport) found of each local store,
  // by name: a recovery re-verifies an epoch only if the store changed since.
  std::map<std::string, control::protocol::StoreReport> surveyed_;
  ParitySlots parity_;
  struct Warmup {
    bool active = false;
    std::thread thread;
    std::map<int32_t, std::unique_ptr<memfs::Store>> stores;
    Status status;
    double began = 0, done = 0;
    int slots = 0;  // parity slots reserved (spares)
  };
  Warmup warmup_;
  uint64_t second_slot_bytes_ = 0;  // spare: the slot to reserve after the next encode (0: none)
  bool serving_ = false;  // Serve(): warm up after a HELLO (not in one-shot modes)
  // Incremental encode: this data node's image of the kept epoch and its
  // changed ranges (from LocalDelta).
  std::vector<Extent> delta_old_;
  std::vector<memfs::Store::ByteRange> delta_own_;
  // Spares: the last encode this process wrote, if it was a delta that
  // completed: its epoch, the kept epoch it updated (whose parity then
  // stays in the other slot), both lengths and the union U it changed. The
  // next delta encode keeping `epoch` writes over that other slot and needs
  // to copy only U and the tail, not every unchanged byte.
  struct SlotHistory {
    bool valid = false;
    uint64_t epoch = 0, from = 0, length = 0, from_length = 0;
    std::vector<memfs::Store::ByteRange> ranges;
  };
  SlotHistory history_;
  // Spares: what the last RunDelta copied into a reused slot from the kept
  // parity (its stale ranges), for CompleteDelta's resting blocks; empty
  // when it copied every unchanged byte (a fresh slot, or no history).
  std::optional<std::vector<memfs::Store::ByteRange>> delta_rewritten_;
  uint64_t last_encoded_ = 0;
  int encodes_ = 0;
  std::string protection_;  // "" when the configured protection holds
  bool drop_old_parity_ = false;

  // Rank 0: every client connection, read without blocking (see
  // control::protocol::FrameServer for the deadlines and limits).
  std::unique_ptr<control::protocol::FrameServer> server_;
  std::string token_;
  bool stop_ = false;
  // Rank 0: a command reached only some processes (BroadcastCommand); Serve
  // stops and returns fatal_.
  bool command_broken_ = false;
  // Rank 0: the last command's sends not yet completed, and their head.
  std::vector<MPI_Request> posted_;
  uint64_t posted_head_[2] = {0, 0};
  Status fatal_;
};

}  // namespace dlckpt::codec

#endif  // DLCKPT_CODEC_SERVICE_IMPL_H_
