// api.cc — the public C++ API (dlckpt/intercept/intercept.h).
#include <fcntl.h>

#include <mutex>
#include <shared_mutex>

#include "core.h"
#include "dlckpt/intercept/intercept.h"

// ---- public C++ API ------------------------------------------------------------------------------

namespace dlckpt::intercept {

using internal::P;
using internal::Process;

Status Configure(const StoreConfig& config) {
  Process& p = P();
  internal::InternalScope in;
  StoreConfig previous;
  {
    std::lock_guard<std::mutex> lock(p.config_mu);
    previous = p.config;
    p.config = config;
  }
  auto name = internal::ResolveConfig();
  std::shared_lock<std::shared_mutex> lock(p.store_mu);
  Status result;
  if (!name.ok()) {
    result = name.status();
  } else if (p.store != nullptr && p.store->name() != name->name) {
    result = Status::Busy("store " + p.store->name() + " is attached; cannot switch to " +
                          name->name + " before DetachStore()");
  }
  if (!result.ok()) {
    std::lock_guard<std::mutex> cl(p.config_mu);
    p.config = previous;
  }
  return result;
}

Result<std::string> ProcessStoreName() {
  internal::InternalScope in;
  DLCKPT_ASSIGN_OR_RETURN(auto r, internal::ResolveConfig());
  return r.name;
}

Result<memfs::Store*> ProcessStore() {
  internal::InternalScope in;
  P().pinned.store(true);
  internal::StoreRef ref;
  int e = ref.Acquire(true, true);
  if (e != 0) {
    auto name = ProcessStoreName();
    return Status::FromErrno(e, "process store " + (name.ok() ? *name : std::string("?")));
  }
  return ref.store();
}

namespace {

template <class Op>
Status ResetStore(Op&& op) {
  Process& p = P();
  internal::InternalScope in;
  std::unique_lock<std::shared_mutex> ex(p.store_mu);
  if (p.store == nullptr) {
    int e = internal::AttachLocked(false);
    if (e != 0) return Status::FromErrno(e, "process store");
  }
  Status s = op(p.store);
  p.generation.fetch_add(1);  // memfs closed every handle, whatever the outcome
  return s;
}

}  // namespace

Status RollbackStore() {
  return ResetStore([](memfs::Store* s) { return s->Rollback(); });
}

Status RestoreStore(uint64_t epoch) {
  return ResetStore([epoch](memfs::Store* s) { return s->Restore(epoch); });
}

void InvalidateDescriptors() {
  Process& p = P();
  std::unique_lock<std::shared_mutex> ex(p.store_mu);
  p.generation.fetch_add(1);
}

Status FlushStreams() {
  if (internal::StreamFlushAll() != 0) return Status::FromErrno(errno, "flushing memfs streams");
  return Status::OK();
}

Status DetachStore() {
  Status flushed = FlushStreams();
  Process& p = P();
  std::unique_lock<std::shared_mutex> ex(p.store_mu);
  internal::DestroyStoreLocked();
  p.pinned.store(false);  // no live memfs descriptor is left to pin it
  return flushed;
}

bool RoutesToMemfs(std::string_view path) {
  internal::InternalScope in;
  std::string p(path), out;
  int err = 0;
  return internal::Resolve(AT_FDCWD, p.c_str(), &out, &err) == internal::Route::kMemfs;
}

std::vector<std::string> Prefixes() { return P().prefixes.prefixes(); }

void ArmWriteHook(void (*hook)()) { internal::WriteHook().store(hook, std::memory_order_release); }

}  // namespace dlckpt::intercept

