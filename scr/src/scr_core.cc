// Configuration, the checkpoint policy, paths and the dataset record of the
// SCR API (scr_core.h).
#include "scr_core.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "dlckpt/base/env.h"
#include "scr.h"

namespace dlckpt::scr {
namespace {

bool IsKey(std::string_view k) {
  if (k.empty()) return false;
  for (char c : k) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

std::string Upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return u;
}

std::vector<std::string_view> Words(std::string_view s) {
  std::vector<std::string_view> w;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
    if (j > i) w.push_back(s.substr(i, j - i));
    i = j;
  }
  return w;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string Shown(std::string_view text) {
  if (text.size() <= kShownBytes) return std::string(text);
  return std::string(text.substr(0, kShownBytes)) + "... (" + std::to_string(text.size()) + " bytes)";
}

Result<ConfigOp> ParseConfig(std::string_view text) {
  std::vector<std::string_view> words = Words(text);
  if (words.empty()) return Status::InvalidArgument("SCR_Config: empty request");
  ConfigOp op;
  for (size_t i = 0; i < words.size(); ++i) {
    std::string_view w = words[i];
    size_t eq = w.find('=');
    std::string_view key = w.substr(0, eq);
    if (!IsKey(key)) {
      return Status::InvalidArgument("SCR_Config: '" + Shown(key) + "' is not a parameter name");
    }
    bool last = i + 1 == words.size();
    if (eq == std::string_view::npos && !last) {
      return Status::InvalidArgument("SCR_Config: '" + Shown(w) + "' has no value");
    }
    if (i == 0) op.key = Upper(key);
    if (eq == std::string_view::npos) {
      // "KEY" or "PARENT=V SUBKEY": a get.
      op.kind = ConfigOp::kGet;
      if (i > 0) op.sub_key = Upper(key);
      return op;
    }
  }
  std::string_view first = words[0];
  std::string_view value = first.substr(first.find('=') + 1);
  if (words.size() == 1 && value.empty()) {
    op.kind = ConfigOp::kUnset;
    return op;
  }
  op.kind = ConfigOp::kSet;
  op.value = words.size() == 1 ? std::string(value) : std::string(Trim(text));
  return op;
}

Config::Config(GetEnv getenv) : getenv_(std::move(getenv)) {}
Config::Config() : getenv_([](const char* k) { return std::getenv(k); }) {}

void Config::Set(const std::string& key, std::string value) { app_[key] = std::move(value); }
void Config::Unset(const std::string& key) { app_.erase(key); }

const std::string* Config::AppValue(const std::string& key) const {
  auto it = app_.find(key);
  return it == app_.end() ? nullptr : &it->second;
}

std::optional<std::string> Config::Get(const std::string& key) const {
  if (const char* v = getenv_ ? getenv_(key.c_str()) : nullptr; v != nullptr && *v != '\0') {
    return std::string(v);
  }
  if (auto it = app_.find(key); it != app_.end()) return it->second;
  if (auto it = file_.find(key); it != file_.end()) return it->second;
  return std::nullopt;
}

Status Config::LoadFile(const std::string& path) {
  Result<std::string> text = Env::Default()->ReadFile(path, kMaxConfigBytes);
  if (!text.ok()) {
    // Env's message quotes the path whole: quote it as every message here does.
    std::string why = text.status().message();
    for (size_t at = why.find(path); !path.empty() && at != std::string::npos; at = why.find(path, at)) {
      const std::string shown = Shown(path);
      why.replace(at, path.size(), shown);
      at += shown.size();
    }
    return Status::Error(text.status().code(), "SCR_CONF_FILE: " + why);
  }
  std::istringstream in(*text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string_view l = line;
    if (size_t hash = l.find('#'); hash != std::string_view::npos) l = l.substr(0, hash);
    l = Trim(l);
    if (l.empty()) continue;
    auto op = ParseConfig(l);
    if (!op.ok() || op->kind != ConfigOp::kSet) {
      return Status::InvalidArgument(Shown(path) + ":" + std::to_string(n) + ": expected KEY=VALUE");
    }
    file_[op->key] = op->value;
  }
  return Status::OK();
}

Result<long> Config::Int(const std::string& key, long dflt) const {
  std::optional<std::string> v = Get(key);
  if (!v) return dflt;
  errno = 0;
  char* end = nullptr;
  long x = std::strtol(v->c_str(), &end, 10);
  if (errno != 0 || end == v->c_str() || *Trim(end).data() != '\0') {
    return Status::InvalidArgument(Shown(key + "=" + *v) + ": expected an integer");
  }
  return x;
}

Result<double> Config::Double(const std::string& key, double dflt) const {
  std::optional<std::string> v = Get(key);
  if (!v) return dflt;
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (errno != 0 || end == v->c_str() || *Trim(end).data() != '\0') {
    return Status::InvalidArgument(Shown(key + "=" + *v) + ": expected a number");
  }
  return x;
}

NeedCheckpoint::NeedCheckpoint(CheckpointPolicy policy, double now) : policy_(policy), last_end_(now) {}

bool NeedCheckpoint::Ask(double now) {
  ++calls_;
  const CheckpointPolicy& p = policy_;
  if (p.interval <= 0 && p.seconds <= 0 && p.overhead <= 0) return true;
  if (p.interval > 0 && calls_ >= p.interval) return true;
  if (p.seconds > 0 && now - last_end_ >= p.seconds) return true;
  if (p.overhead > 0) {
    if (timed_ == 0) return true;
    double cost = total_cost_ / static_cast<double>(timed_);
    double since = now - last_end_;
    if (since + cost > 0 && cost / (since + cost) * 100.0 <= p.overhead) return true;
  }
  return false;
}

void NeedCheckpoint::Started(double now) { started_ = now; }

void NeedCheckpoint::Completed(double now) {
  if (started_ >= 0 && now >= started_) {
    total_cost_ += now - started_;
    ++timed_;
  }
  started_ = -1;
  calls_ = 0;
  last_end_ = now;
}

Result<std::string> NormalizePath(std::string_view name, std::string_view base) {
  if (name.empty()) return Status::InvalidArgument("SCR_Route_file: empty file name");
  if (name.find('\n') != std::string_view::npos || name.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("SCR_Route_file: file name with a newline");
  }
  std::string joined = name.front() == '/' ? std::string(name) : std::string(base) + "/" + std::string(name);
  std::vector<std::string_view> parts;
  std::string_view rest = joined;
  while (!rest.empty()) {
    size_t slash = rest.find('/');
    std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  if (parts.empty()) return Status::InvalidArgument("SCR_Route_file: '" + Shown(name) + "' names /");
  std::string out;
  for (std::string_view p : parts) {
    out += '/';
    out += p;
  }
  if (out.size() >= SCR_MAX_FILENAME) {
    return Status::Error(ENAMETOOLONG, "SCR_Route_file: '" + Shown(name) + "' is too long");
  }
  return out;
}

std::string_view BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string SerializeDataset(const Dataset& d) {
  std::ostringstream o;
  o << "dlckpt-scr-dataset 1\n"
    << "id " << d.id << "\n"
    << "flags " << d.flags << "\n"
    << "name " << d.name << "\n";
  for (const std::string& f : d.files) o << "file " << f << "\n";
  o << "end\n";
  return o.str();
}

Result<Dataset> ParseDataset(std::string_view text) {
  Dataset d;
  bool header = false, id = false, flags = false, name = false, end = false;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return Status::Corruption("dataset record: unterminated line");
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    ++line_no;
    if (end) return Status::Corruption("dataset record: text after 'end'");
    size_t sp = line.find(' ');
    std::string_view key = line.substr(0, sp);
    std::string_view val = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    if (line_no == 1) {
      if (line != "dlckpt-scr-dataset 1") return Status::Corruption("dataset record: bad header");
      header = true;
    } else if (key == "id" || key == "flags") {
      char* stop = nullptr;
      std::string v(val);
      errno = 0;
      unsigned long long x = std::strtoull(v.c_str(), &stop, 10);
      if (v.empty() || errno != 0 || *stop != '\0') return Status::Corruption("dataset record: bad " + std::string(key));
      if (key == "id") {
        d.id = x;
        id = true;
      } else {
        d.flags = static_cast<int>(x);
        flags = true;
      }
    } else if (key == "name") {
      d.name = std::string(val);
      name = true;
    } else if (key == "file") {
      if (val.empty() || val.front() != '/') return Status::Corruption("dataset record: bad file name");
      d.files.emplace_back(val);
    } else if (line == "end") {
      end = true;
    } else {
      return Status::Corruption("dataset record: unknown line " + std::to_string(line_no));
    }
  }
  if (!header || !id || !flags || !name || !end) return Status::Corruption("dataset record: incomplete");
  return d;
}

std::string DefaultDatasetName(uint64_t id) { return "scr.dataset." + std::to_string(id); }

std::string FindFile(const Dataset& d, const std::string& normalized, bool* ambiguous) {
  if (ambiguous != nullptr) *ambiguous = false;
  for (const std::string& f : d.files) {
    if (f == normalized) return f;
  }
  const std::string_view base = BaseName(normalized);
  std::string found;
  for (const std::string& f : d.files) {
    if (BaseName(f) == base) {
      if (!found.empty()) {
        if (ambiguous != nullptr) *ambiguous = true;
        return "";
      }
      found = f;
    }
  }
  return found;
}

Config::Source Config::From(const std::string& key) const {
  if (const char* v = getenv_ ? getenv_(key.c_str()) : nullptr; v != nullptr && *v != '\0') return Source::kEnvironment;
  if (app_.count(key) != 0) return Source::kApplication;
  if (file_.count(key) != 0) return Source::kFile;
  return Source::kNone;
}

const std::vector<IgnoredParameter>& IgnoredParameters() {
  static const std::vector<IgnoredParameter> kIgnored = {
      {"SCR_CACHE_SIZE", "one checkpoint is kept in memory (the protected epoch)"},
      {"SCR_CACHE_BYPASS", "checkpoints always go to memory"},
      {"SCR_CACHE_PURGE", "one checkpoint is kept in memory (the protected epoch)"},
      {"SCR_CNTL_BASE", "dlckpt keeps no control directory"},
      {"SCR_GROUP", "parity groups are dlckpt-run's (--group-size)"},
      {"SCR_HALT_SECONDS", "dlckpt-run --halt-seconds decides a halt; SCR_Should_exit then says 1"},
      {"SCR_HALT_ENABLED", "SCR_Should_exit follows dlckpt-run's halt (--halt-seconds, SIGUSR1, SIGTERM with --persist)"},
      {"SCR_HALT_EXIT", "SCR_Should_exit follows dlckpt-run's halt; the application decides to exit"},
      {"SCR_DISTRIBUTE", "dlckpt-run rebuilds and places the checkpoint after a relaunch"},
      {"SCR_FETCH", "a new job fetches a drained checkpoint with dlckpt-run --restart-from"},
      {"SCR_FETCH_BYPASS", "a new job fetches a drained checkpoint with dlckpt-run --restart-from"},
      {"SCR_FETCH_WIDTH", "a new job fetches a drained checkpoint with dlckpt-run --restart-from"},
      {"SCR_FLUSH_ASYNC", "drains are always in the background (dlckpt-run --persist-every)"},
      {"SCR_FLUSH_POSTSTAGE", "drains are dlckpt-run's (--persist-every, --persist)"},
      {"SCR_FLUSH_TYPE", "drains are dlckpt-run's (--persist-every, --persist)"},
      {"SCR_FLUSH_WIDTH", "drains are dlckpt-run's (--persist-bandwidth)"},
      {"SCR_FLUSH_ON_RESTART", "drains are dlckpt-run's (--persist-every, --persist)"},
      {"SCR_RUNS", "relaunches are dlckpt-run's (--max-recoveries)"},
      {"SCR_MIN_NODES", "relaunches are dlckpt-run's (--spares)"},
      {"SCR_EXCLUDE_NODES", "relaunches are dlckpt-run's (a lost node is replaced by a spare)"},
      {"SCR_MPI_BUF_SIZE", "dlckpt's codec sizes its own buffers"},
      {"SCR_FILE_BUF_SIZE", "dlckpt copies with its own buffers"},
      {"SCR_CRC_ON_COPY", "memfs checks a CRC32C of every file at every commit and rebuild"},
      {"SCR_CRC_ON_DELETE", "memfs checks a CRC32C of every file at every commit and rebuild"},
      {"SCR_CRC_ON_FLUSH", "memfs checks a CRC32C of every file at every commit and rebuild"},
      {"SCR_WATCHDOG_TIMEOUT", "dlckpt-run watches the nodes (heartbeats)"},
      {"SCR_WATCHDOG_TIMEOUT_PFS", "dlckpt-run watches the nodes (heartbeats)"},
      {"SCR_LOG_ENABLE", "dlckpt-run prints its own summary; there is no SCR log"},
      {"SCR_LOG_TXT_ENABLE", "dlckpt-run prints its own summary; there is no SCR log"},
      {"SCR_LOG_SYSLOG_ENABLE", "dlckpt-run prints its own summary; there is no SCR log"},
      {"SCR_LOG_DB_ENABLE", "there is no SCR log database"},
      {"SCR_DB_NAME", "there is no SCR log database"},
      {"SCR_DB_HOST", "there is no SCR log database"},
      {"SCR_DB_USER", "there is no SCR log database"},
      {"SCR_DB_PASS", "there is no SCR log database"},
      {"SCR_JOB_NAME", "the job is named by dlckpt-run --job"},
      {"SCR_JOB_ID", "the job is named by dlckpt-run --job"},
      {"SCR_USER_NAME", "the job is named by dlckpt-run --job"},
      {"CKPT", "the redundancy is dlckpt-run's (--scheme, --group-size, --spares-per-group)"},
      {"STORE", "checkpoints live in memfs stores (SCR_CACHE_BASE only holds the staging directories)"},
      {"GROUPS", "parity groups are dlckpt-run's (--group-size)"},
  };
  return kIgnored;
}

std::vector<std::string> ParameterNotes(const Config& c) {
  struct Layout {
    const char* name;
    const char* option;
  };
  static const Layout kLayout[] = {
      {"SCR_SET_SIZE", "dlckpt-run --group-size N (data nodes per parity group)"},
      {"SCR_SET_FAILURES", "dlckpt-run --spares-per-group N (losses tolerated per group)"},
      {"SCR_COPY_TYPE", "dlckpt-run --scheme xor|rs"},
      {"SCR_FLUSH", "dlckpt-run --persist-every N (with --persist ${SCR_PREFIX:-.}/.dlckpt)"},
  };
  std::vector<std::string> lines;
  for (const Layout& l : kLayout) {
    const Config::Source from = c.From(l.name);
    if (from != Config::Source::kApplication && from != Config::Source::kFile) continue;
    lines.push_back(std::string(l.name) + "=" + Shown(c.Get(l.name).value_or("")) + " (set by " +
                    (from == Config::Source::kApplication ? "SCR_Config" : "SCR_CONF_FILE") + ") maps to " + l.option +
                    ", which dlckpt-run takes from the job's environment or its command line: ignored here");
  }
  for (const IgnoredParameter& p : IgnoredParameters()) {
    if (c.From(p.name) == Config::Source::kNone) continue;
    lines.push_back(IgnoredNote(p.name, p.why, "scr/README.md"));
  }
  return lines;
}

}  // namespace dlckpt::scr
