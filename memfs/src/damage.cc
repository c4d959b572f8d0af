// damage.cc — failed writes into the working files: damaged files, creates
// lost to a full file table, and the refusal of a commit that would freeze
// them (Store::Impl, see store_impl.h and "Failed writes" in
// dlckpt/memfs/memfs.h).
//
// Ownership: a Node's damage lives with the Node (process memory) and, when
// the owner detaches, in its FileEntry of the saved working slot. lost_ is
// mirrored at once into the LostCreate record of the store's header page,
// which only the owner writes.
//
// Thread safety: every function here expects mu_ held.
//
// Failure: nothing here fails; DamageLocked returns the refusal as a Status.
#include <sys/stat.h>

#include <cstring>

#include "dlckpt/base/units.h"
#include "store_impl.h"

namespace dlckpt::memfs {

using namespace layout;  // NOLINT(google-build-using-namespace)

namespace {

// How many damaged files a refusal names.
constexpr size_t kNamedFiles = 3;

std::string DamageText(int err, uint32_t op, uint64_t offset, uint64_t len) {
  const std::string why = std::strerror(err);
  switch (op) {
    case kDamageShortWrite:
      return "a write stored only part of its bytes; " + std::to_string(len) + " bytes from offset " +
             std::to_string(offset) + " are missing (" + why + ")";
    case kDamageResize:
      return "resizing it to " + std::to_string(len) + " bytes failed (" + why + ")";
    default:
      return "a write of " + std::to_string(len) + " bytes at offset " + std::to_string(offset) + " failed (" +
             why + ")";
  }
}

}  // namespace

void Store::Impl::MarkDamagedLocked(Node& node, const Status& failed, uint32_t op, uint64_t offset,
                                    uint64_t len) {
  if (!S_ISREG(node.mode)) return;
  node.rewritten = 0;
  // The failure that reaches lowest into the file is the one that counts.
  if (node.damage.err != 0 && node.damage.offset <= offset) return;
  node.damage = Node::Damage{failed.code() > 0 ? failed.code() : EIO, op, offset, len};
}

void Store::Impl::WrittenLocked(Node& node, uint64_t off, uint64_t n) {
  if (node.damage.err == 0) return;
  if (off <= node.rewritten) node.rewritten = std::max(node.rewritten, off + n);
  if (node.rewritten >= node.size) node.damage = Node::Damage{};
}

void Store::Impl::ResizedLocked(Node& node) {
  if (node.damage.err == 0) return;
  // The application set the length: every byte left is one it wrote.
  if (node.size <= node.damage.offset || node.rewritten >= node.size) node.damage = Node::Damage{};
}

void Store::Impl::LoseCreateLocked(std::string_view path, int err) {
  if (lost_.count == 0) {
    lost_.err = err;
    lost_.path = std::string(path);
  }
  lost_.count++;
  LostCreate l{};
  std::memcpy(l.magic, kLostMagic, sizeof l.magic);
  l.err = static_cast<uint32_t>(lost_.err);
  l.count = lost_.count;
  std::memcpy(l.path, lost_.path.data(), std::min(lost_.path.size(), sizeof l.path - 1));
  l.crc = LostCreateCrc(l);
  std::memcpy(base_ + kLostCreateOffset, &l, sizeof l);
}

void Store::Impl::ClearLostCreateLocked() {
  lost_.err = 0;
  lost_.count = 0;
  lost_.path.clear();
  if (owner_) std::memset(base_ + kLostCreateOffset, 0, sizeof(LostCreate));
}

void Store::Impl::ForgetLostCreateLocked(std::string_view path) {
  if (lost_.count != 1 || !lost_.path.starts_with(path)) return;
  if (lost_.path.size() == path.size() || lost_.path[path.size()] == '/') ClearLostCreateLocked();
}

bool Store::Impl::LoadLostCreateLocked() {
  LostCreate l;
  std::memcpy(&l, base_ + kLostCreateOffset, sizeof l);
  if (std::memcmp(l.magic, kLostMagic, sizeof l.magic) != 0 || l.crc != LostCreateCrc(l) || l.count == 0) {
    return false;
  }
  lost_.err = static_cast<int>(l.err);
  lost_.count = l.count;
  lost_.path.assign(l.path, strnlen(l.path, sizeof l.path));
  return true;
}

Status Store::Impl::DamageLocked(uint64_t epoch) const {
  std::vector<const Node*> damaged;
  for (const auto& [path, node] : files_) {
    if (node->damage.err != 0) damaged.push_back(node.get());
  }
  if (damaged.empty() && lost_.count == 0) return Status::OK();
  std::string why;
  int code = 0;
  for (size_t i = 0; i < damaged.size() && i < kNamedFiles; ++i) {
    const Node::Damage& d = damaged[i]->damage;
    if (!why.empty()) why += "; ";
    why += damaged[i]->path + " is incomplete: " + DamageText(d.err, d.op, d.offset, d.len);
    if (code == 0) code = d.err;
  }
  if (damaged.size() > kNamedFiles) {
    why += "; and " + std::to_string(damaged.size() - kNamedFiles) + " more incomplete file(s)";
  }
  if (lost_.count != 0) {
    if (!why.empty()) why += "; ";
    why += "creating " + lost_.path + " failed (" + std::strerror(lost_.err) + ": the file table was full)";
    if (lost_.count > 1) why += ", and " + std::to_string(lost_.count - 1) + " more create(s)";
    if (code == 0) code = lost_.err;
  }
  return Status::Error(
      code, "store " + name() + ": refusing to commit epoch " + std::to_string(epoch) + ": " + why +
                ". The store holds " + FormatSize(geo_.capacity) + " of file data (" +
                std::to_string(geo_.nblocks) + " blocks of " + FormatSize(geo_.block_size) +
                "; every file fills at least one block, and a rewritten file needs room for its old and new "
                "versions) and at most " + std::to_string(geo_.max_files) +
                " files; raise the capacity (dlckpt-run --capacity, DLCKPT_STORE_CAPACITY, dlckpt-fuse "
                "--capacity) or the file table (DLCKPT_MAX_FILES, --max-files), then write the file again "
                "(O_TRUNC), truncate it to 0 or remove it. Nothing was committed: the acknowledged epoch " +
                std::to_string(versions_.state().acked_epoch) + " is unchanged");
}

}  // namespace dlckpt::memfs
