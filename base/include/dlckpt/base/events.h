// dlckpt/base/events.h — the job's event log: its whole vocabulary, how an
// event is written and how it is read back.
//
// Processes of a job (codec service, application ranks) append one line per
// event to the file named by $DLCKPT_EVENTS:
//   "<monotonic ns> <source> <name> [args]"
// e.g. "81234567 app ckpt-end 3 0". dlckpt-run follows the file to report
// phases and to inject failures at precise points (e.g. "during encode");
// tests and benchmarks read it too. The line format is stable: shell tests
// match it with grep.
//
// Every kind of event is an enumerator of Kind; an Event carries the fields
// its kind uses (listed beside each enumerator; the others stay at their
// defaults). Format() and Parse() are the only places that spell an event's
// name or its arguments' order; Parse(Format(e)) == e for every kind, up to
// the precision of the seconds (printed with 3 decimals, 6 for kCkptWait).
//
// Emitting is best effort: with $DLCKPT_EVENTS unset or unwritable it does
// nothing, and it never fails the caller. A line longer than 511 bytes is
// cut (only a kCkptRefused or kProtection text can be that long). All
// functions are thread-safe.
#ifndef DLCKPT_BASE_EVENTS_H_
#define DLCKPT_BASE_EVENTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlckpt::events {

// Who writes an event: an application rank (through libdlckpt) or the codec
// service. It follows from the kind.
enum class Source : uint8_t { kApp, kCodec };

enum class Kind : uint8_t {
  // Application (rank 0 unless a rank is named).
  kInit,           // epoch: the epoch the run restarted from (0: a fresh start)
  kWriteBegin,     // epoch, rank: the first write into memfs of checkpoint `epoch`
  kCkptBegin,      // epoch
  kCkptCommit,     // epoch, code: every store committed it (code 0) or not
  kCkptRefused,    // epoch, rank, text: why that rank's store refused the commit
  kCkptWait,       // epoch, seconds: back-pressure, waiting for that epoch's encode
  kCkptEnd,        // epoch, code: the checkpoint is protected (code 0) or dropped
  kDrainBegin,     // epoch, rank
  kDrainSkip,      // epoch, rank
  kDrainEnd,       // epoch, rank, code, bytes, seconds, published
  kPrune,          // epoch (just published), rank, done (older epochs removed), seconds
  // Codec service (its rank 0 unless a node is named).
  kReady,          // generation
  kProtection,     // text: the protection left ("unprotected: no spare node left; ...")
  kWarmup,         // node, seconds (the warm-up took), waited (the next command waited for it)
  kEncodeBegin,    // epoch
  kEncodeDelta,    // epoch, groups_delta, groups, bytes (sent), total (image bytes)
  kEncodeProgress, // epoch, done, total, seconds
  kEncodeEnd,      // epoch, code
  kRecoverBegin,   // epoch
  kRebuildBegin,   // epoch
  kRebuildProgress,// epoch, node, done, total, seconds
  kRecoverEnd,     // epoch, code
};
inline constexpr int kKinds = static_cast<int>(Kind::kRecoverEnd) + 1;

struct Event {
  Kind kind = Kind::kInit;
  int64_t ns = 0;  // CLOCK_MONOTONIC, set by Emit
  uint64_t epoch = 0;
  uint64_t generation = 0;
  int code = 0;     // a Status code (errno), 0 for success
  int rank = 0;
  std::string node{};
  uint64_t done = 0, total = 0, bytes = 0;
  uint32_t groups_delta = 0, groups = 0;
  double seconds = 0, waited = 0;
  bool published = false;
  std::string text{};  // one line; may contain spaces

  Source source() const;
  bool ok() const { return code == 0; }
  bool operator==(const Event&) const = default;
};

// One constructor per kind, with the fields it uses.
Event Init(uint64_t restarted_epoch);
Event WriteBegin(uint64_t epoch, int rank);
Event CkptBegin(uint64_t epoch);
Event CkptCommit(uint64_t epoch, int code);
Event CkptRefused(uint64_t epoch, int rank, std::string why);
Event CkptWait(uint64_t epoch, double seconds);
Event CkptEnd(uint64_t epoch, int code);
Event DrainBegin(uint64_t epoch, int rank);
Event DrainSkip(uint64_t epoch, int rank);
Event DrainEnd(uint64_t epoch, int rank, int code, uint64_t bytes, double seconds, bool published);
Event Prune(uint64_t epoch, int rank, uint64_t removed, double seconds);
Event Ready(uint64_t generation);
Event Protection(std::string what);
Event Warmup(std::string node, double seconds, double waited);
Event EncodeBegin(uint64_t epoch);
Event EncodeDelta(uint64_t epoch, uint32_t groups_delta, uint32_t groups, uint64_t bytes, uint64_t total);
Event EncodeProgress(uint64_t epoch, uint64_t done, uint64_t total, double seconds);
Event EncodeEnd(uint64_t epoch, int code);
Event RecoverBegin(uint64_t epoch);
Event RebuildBegin(uint64_t epoch);
Event RebuildProgress(uint64_t epoch, std::string node, uint64_t done, uint64_t total, double seconds);
Event RecoverEnd(uint64_t epoch, int code);

// "app", "codec"; "ckpt-end", ...
std::string_view SourceName(Source s);
std::string_view KindName(Kind k);

// The line for `e` without its timestamp and newline: "<source> <name> [args]".
std::string Format(const Event& e);
// A line as Emit writes it, "<ns> <source> <name> [args]" (no newline).
// nullopt for a line that is not a well-formed event of a known kind.
std::optional<Event> Parse(std::string_view line);

// Appends "<now> " + Format(e) to $DLCKPT_EVENTS.
void Emit(const Event& e) noexcept;

// Failure injection's holds. dlckpt-run sets NAME=E:S in a process's
// environment so that the process waits S seconds inside a phase of epoch E
// and a kill it schedules on that phase's event lands inside the phase
// (DLCKPT_WRITE_HOLD, DLCKPT_DRAIN_HOLD, DLCKPT_CODEC_HOLD_ENCODE in
// docs/environment.md). Returns S when $name asks for `epoch` (E = 0 asks for
// every epoch), else 0: unset, malformed, another epoch, or S outside (0, 3600).
double HoldSeconds(const char* name, uint64_t epoch);

// Reads events appended since the last call (whole lines only). Lines that
// do not parse are skipped.
class Follower {
 public:
  explicit Follower(std::string path) : path_(std::move(path)) {}
  std::vector<Event> Poll();

 private:
  std::string path_;
  uint64_t offset_ = 0;
  std::string partial_;
};

}  // namespace dlckpt::events

#endif  // DLCKPT_BASE_EVENTS_H_
