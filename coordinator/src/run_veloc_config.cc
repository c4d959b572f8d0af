// run_veloc_config.cc — VeloC's configuration file read by dlckpt-run
// (--veloc-config): the keys with a dlckpt meaning become dlckpt-run's own
// options, the others one note each (run_options.h, VelocConfigTokens).
#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/strings.h"
#include "run_options.h"

namespace dlckpt::run {

namespace {

// VeloC's configuration keys that dlckpt-run does not map (veloc/README.md
// lists them with the mapped ones).
constexpr IgnoredSetting kVelocIgnored[] = {
    {"failure_domain", "dlckpt's failure domain is the node (a virtual node or a --hosts entry); parity groups "
                       "are --group-size data nodes"},
    {"scratch_versions", "memory holds one checkpoint, the newest protected one"},
    {"axl_type", "dlckpt drains with its own writer (--persist-bandwidth caps it)"},
    {"chksum", "always on: memfs checks a CRC32C of every file at commit and rebuild, and each drained epoch's "
               "MANIFEST holds its files' CRC32C, checked by --restart-from"},
    {"meta", "the checksums are in each drained epoch's MANIFEST"},
    {"watchdog_interval", "dlckpt-run watches the nodes (heartbeats, --heartbeat-timeout)"},
    {"log_prefix", "dlckpt-run logs in its run directory (--run-dir) and prints a summary"},
    {"daos_pool", "drains go to a POSIX directory (--persist DIR)"},
    {"daos_cont", "drains go to a POSIX directory (--persist DIR)"},
};
constexpr char kVelocDoc[] = "veloc/README.md";

// A VeloC interval: seconds, -1 (off) or 0 (every checkpoint).
Result<long> VelocInterval(const std::string& where, const KeyValueLine& kv) {
  char* end = nullptr;
  const long v = std::strtol(kv.value.c_str(), &end, 10);
  if (kv.value.empty() || *end != '\0' || v < -1) {
    return Status::InvalidArgument(where + ": " + kv.key + " = " + kv.value +
                                   ": want a number of seconds, 0 (every checkpoint) or -1 (off)");
  }
  return v;
}

}  // namespace

Result<std::vector<VelocToken>> VelocConfigTokens(const std::string& path, const std::string& text,
                                                  std::vector<std::string>* notes) {
  auto lines = ParseKeyValueLines(path, text);
  if (!lines.ok()) return lines.status();
  auto where = [&](const KeyValueLine& kv) { return path + ":" + std::to_string(kv.line); };
  auto note = [&](const KeyValueLine& kv, std::string_view why) {
    notes->push_back("VeloC configuration file " + where(kv) + ": " +
                     IgnoredNote(kv.key + " = " + kv.value, why, kVelocDoc));
  };
  // persistent_interval = -1 turns the flushes off, wherever it is.
  bool flushes_off = false;
  for (const KeyValueLine& kv : *lines) {
    if (kv.key != "persistent_interval") continue;
    DLCKPT_ASSIGN_OR_RETURN(long v, VelocInterval(where(kv), kv));
    flushes_off = v == -1;
  }
  std::vector<VelocToken> out;
  for (const KeyValueLine& kv : *lines) {
    const std::string& k = kv.key;
    if (k == "scratch") continue;  // VELOC_Init's staging directory
    if (k == "persistent") {
      if (kv.value.empty()) continue;
      if (flushes_off) {
        note(kv, "persistent_interval = -1 turns VeloC's flushes off: nothing is drained");
      } else {
        out.push_back({kv.line, {"--persist", kv.value}});
      }
    } else if (k == "persistent_interval") {
      DLCKPT_ASSIGN_OR_RETURN(long v, VelocInterval(where(kv), kv));
      if (v == 0) {
        out.push_back({kv.line, {"--persist-every", "1"}});
      } else if (v > 0) {
        note(kv, "it is seconds between flushes; dlckpt drains every Nth checkpoint (--persist-every N, default "
                 "10), not by time");
      }
    } else if (k == "ec_interval") {
      DLCKPT_ASSIGN_OR_RETURN(long v, VelocInterval(where(kv), kv));
      if (v != 0) {
        note(kv, "dlckpt encodes every checkpoint (what ec_interval = 0 asks): there is no interval, and parity "
                 "cannot be turned off");
      }
    } else if (k == "max_versions") {
      char* end = nullptr;
      const long v = std::strtol(kv.value.c_str(), &end, 10);
      if (kv.value.empty() || *end != '\0' || v < 0) {
        return Status::InvalidArgument(where(kv) + ": max_versions = " + kv.value +
                                       ": want a number of checkpoints (0: all)");
      }
      if (v == 0) {
        note(kv, "keeping every drained checkpoint is not offered; dlckpt keeps the newest --persist-keep K "
                 "(default 2)");
      } else {
        out.push_back({kv.line, {"--persist-keep", kv.value}});
      }
    } else if (k == "mode") {
      out.push_back({kv.line, {"--encode", kv.value}});
    } else {
      auto known = std::find_if(std::begin(kVelocIgnored), std::end(kVelocIgnored),
                                [&](const IgnoredSetting& i) { return k == i.name; });
      note(kv, known != std::end(kVelocIgnored) ? known->why : "not a VeloC setting dlckpt knows");
    }
  }
  return out;
}

}  // namespace dlckpt::run
