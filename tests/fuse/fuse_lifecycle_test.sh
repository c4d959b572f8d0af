#!/usr/bin/env bash
# The life of a dlckpt-fuse mount: help and version, refusal of bad options and
# bad mount points (nothing mounted, no store left), a store owned elsewhere,
# unmount by fusermount3 -u, SIGTERM and SIGINT, the checkpoint trigger and
# dlckpt-ctl, a remount, a daemon crash (uncommitted files lost, committed
# ones kept), and a store written without directory entries.
# A mount point alone serves the default store (job local) and says which.
# Usage: fuse_lifecycle_test.sh BIN_DIR
set -euo pipefail
BIN_DIR="$1"
source "$(dirname "$0")/lib.sh"

expect_fail() {  # expect_fail MESSAGE COMMAND...: non-zero exit, MESSAGE in the output
  local want="$1" out
  shift
  if out=$("$@" 2>&1); then fail "'$*' succeeded"; fi
  grep -qF -- "$want" <<< "$out" || fail "'$*' said: $out (want: $want)"
}

help=$("$FUSE_BIN" --help) || fail "--help exit status"
grep -q "usage: dlckpt-fuse MOUNTPOINT" <<< "$help" || fail "--help"
grep -q "allow_other" <<< "$help" || fail "--help lacks libfuse's mount options"
grep -q "^dlckpt-fuse .* (libfuse 3" <<< "$("$FUSE_BIN" --version)" || fail "--version"
grep -q "usage: dlckpt-ctl" <<< "$("$CTL_BIN" --help)" || fail "dlckpt-ctl --help"

# --- refusals: a message naming the problem, nothing mounted, no store ----------
new_store store
new_mountpoint mnt
expect_fail "no MOUNTPOINT given" "$FUSE_BIN" --store "$store"
expect_fail "unknown option --frobnicate" "$FUSE_BIN" "$mnt" --store "$store" --frobnicate 1
expect_fail "bad capacity '12Q'" "$FUSE_BIN" "$mnt" --store "$store" --capacity 12Q
expect_fail "unknown option(s): \`-o bogus_option'" "$FUSE_BIN" "$mnt" --store "$store" -o bogus_option
expect_fail "mount point $TMP/nope: No such file or directory" "$FUSE_BIN" "$TMP/nope" --store "$store"
touch "$TMP/file"
expect_fail "mount point $TMP/file: not a directory" "$FUSE_BIN" "$TMP/file" --store "$store"
expect_fail "block size 3000 is not a power of two" "$FUSE_BIN" "$mnt" --store "$store" --block-size 3000
is_mounted "$mnt" && fail "a refused mount left $mnt mounted"
[ ! -e "/dev/shm$store" ] || fail "a refused mount left store $store behind"

# --- the simplest form: MOUNTPOINT alone serves the default store (job local) -------
new_mountpoint mnt0
out=$(env -u DLCKPT_JOB -u DLCKPT_RANK DLCKPT_NODE="n$TEST_JOB" "$FUSE_BIN" "$mnt0" --capacity 64M 2>&1) ||
  fail "dlckpt-fuse MOUNTPOINT alone: $out"
STORES+=("/dlckpt.local.n$TEST_JOB.r0")
PIDS+=("$(daemon_pid "$mnt0")")
grep -qF "serving store /dlckpt.local.n$TEST_JOB.r0 on $mnt0" <<< "$out" ||
  fail "the default store is not printed: $out"
grep -q "^store: /dlckpt.local.n$TEST_JOB.r0$" "$mnt0/.dlckpt/status" || fail "default store name"
# The file table follows the capacity (one entry per 32 KiB), as under the preload.
grep -q "^max_files: 2048$" "$mnt0/.dlckpt/status" || fail "default max_files: $(cat "$mnt0/.dlckpt/status")"
[ "$(stat -f -c %c "$mnt0")" = 2048 ] || fail "statfs files: $(stat -f -c %c "$mnt0")"
unmount_fs "$mnt0"

# --- store identity from the environment, daemon mode, fusermount3 -u --------------
DLCKPT_JOB="$TEST_JOB" DLCKPT_NODE=nodeZ DLCKPT_RANK=5 "$FUSE_BIN" "$mnt" --capacity 32M ||
  fail "mount with identity from the environment"
STORES+=("/dlckpt.$TEST_JOB.nodeZ.r5")
PIDS+=("$(daemon_pid "$mnt")")
grep -q "^store: /dlckpt.$TEST_JOB.nodeZ.r5$" "$mnt/.dlckpt/status" || fail "store name from env"
grep -q "^rank: 5$" "$mnt/.dlckpt/status" || fail "rank recorded in the store"
expect_fail "already a mount point (fuse.dlckpt)" "$FUSE_BIN" "$mnt" --store "$store"
new_mountpoint mnt2
expect_fail "is owned by another live process" "$FUSE_BIN" "$mnt2" --store "/dlckpt.$TEST_JOB.nodeZ.r5"
is_mounted "$mnt2" && fail "a refused second owner left $mnt2 mounted"
echo kept > "$mnt/f"
unmount_fs "$mnt"
is_mounted "$mnt" && fail "still mounted after fusermount3 -u"
grep -q "job: $TEST_JOB" <<< "$("$STORE_BIN" stat "/dlckpt.$TEST_JOB.nodeZ.r5")" || fail "store lost at unmount"

# --- the checkpoint trigger ---------------------------------------------------------
mount_fs "$mnt" "$store" --capacity 32M
echo one > "$mnt/ckpt.0"
mkdir "$mnt/dir"
echo two > "$mnt/dir/ckpt.1"
expect_fail "not a dlckpt-fuse mount" "$CTL_BIN" checkpoint "$TMP"
expect_fail "unknown command 'frob'" "$CTL_BIN" frob "$mnt"
echo 1 > "$mnt/.dlckpt/checkpoint" || fail "echo 1 > .dlckpt/checkpoint"
grep -q "acknowledged_epoch: 1" <<< "$("$STORE_BIN" stat "$store")" || fail "epoch 1 not committed"
grep -q "^acknowledged_epoch: 1$" "$mnt/.dlckpt/status" || fail "status file after epoch 1"
grep -q "^last_checkpoint: epoch 1$" "$mnt/.dlckpt/status" || fail "status last_checkpoint"
echo changed > "$mnt/ckpt.0"
# Written but not closed: dlckpt-ctl's syncfs pushes it into the epoch.
exec 5> "$mnt/open.txt"
echo "still open" >&5
[ "$("$CTL_BIN" checkpoint "$mnt")" = 2 ] || fail "dlckpt-ctl checkpoint did not print 2"
exec 5>&-
grep -q "^acknowledged_epoch: 2$" <<< "$("$CTL_BIN" status "$mnt")" || fail "dlckpt-ctl status"
[ "$("$STORE_BIN" cat "$store" /ckpt.0)" = changed ] || fail "epoch 2 content"
[ "$("$STORE_BIN" cat "$store" /dir/ckpt.1)" = two ] || fail "epoch 2 file in a directory"
[ "$("$STORE_BIN" cat "$store" /open.txt)" = "still open" ] || fail "open file not in epoch 2"
grep -q "/.dlckpt" <<< "$("$STORE_BIN" ls "$store")" && fail "the control directory is in the store"

# --- SIGTERM unmounts; the store keeps working files; remount shows them --------------
echo uncommitted > "$mnt/late"
kill -TERM "${DAEMON_PID[$mnt]}"
check_daemon_exit "$mnt"
is_mounted "$mnt" && fail "still mounted after SIGTERM"
mount_fs "$mnt" "$store"
[ "$(cat "$mnt/late")" = uncommitted ] || fail "working file lost across a clean unmount"
[ "$(cat "$mnt/dir/ckpt.1")" = two ] || fail "file lost across remount"
unmount_fs "$mnt"

# --- SIGINT, and a daemon-mode mount stopped by SIGTERM -------------------------------
# A non-interactive shell starts background jobs with SIGINT ignored, and
# libfuse (rightly) leaves ignored signals alone: restore the default first.
python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
  "$FUSE_BIN" "$mnt" --store "$store" -f 2>"$TMP/fg.log" &
fg=$!
PIDS+=("$fg")
wait_mounted "$mnt" up
[ "$(cat "$mnt/late")" = uncommitted ] || fail "foreground mount content"
kill -INT "$fg"
wait "$fg" || fail "foreground daemon exited with $? after SIGINT: $(cat "$TMP/fg.log")"
is_mounted "$mnt" && fail "still mounted after SIGINT"
"$FUSE_BIN" "$mnt" --store "$store" || fail "daemon-mode mount"
pid=$(daemon_pid "$mnt")
PIDS+=("$pid")
kill -TERM "$pid"
wait_mounted "$mnt" gone
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "daemon $pid still running after SIGTERM"

# --- a crash: uncommitted work is lost, the acknowledged epoch survives ---------------
mount_fs "$mnt" "$store"
echo lost > "$mnt/after-crash"
echo "overwritten" > "$mnt/ckpt.0"
kill -KILL "${DAEMON_PID[$mnt]}"
wait "${DAEMON_PID[$mnt]}" || true
unset "DAEMON_PID[$mnt]"
expect_fail "Transport endpoint is not connected" "$FUSE_BIN" "$mnt" --store "$store"
fusermount3 -u "$mnt" || umount -l "$mnt"
mount_fs "$mnt" "$store"
[ ! -e "$mnt/after-crash" ] || fail "uncommitted file survived a crash"
[ "$(cat "$mnt/ckpt.0")" = changed ] || fail "acknowledged epoch not restored after a crash"
[ "$(cat "$mnt/open.txt")" = "still open" ] || fail "epoch 2 file lost after a crash"
unmount_fs "$mnt"

# --- a store written without directory entries (e.g. by the preload library) -------
new_store flat
"$STORE_BIN" create "$flat" --capacity 8M
echo payload | "$STORE_BIN" put "$flat" /dlckpt/app/rank0/ckpt.7
mount_fs "$mnt" "$flat"
[ "$(cat "$mnt/dlckpt/app/rank0/ckpt.7")" = payload ] || fail "file below implicit directories"
[ -d "$mnt/dlckpt/app" ] || fail "implicit directory not shown"
mv "$mnt/dlckpt/app" "$mnt/dlckpt/renamed"
[ "$(cat "$mnt/dlckpt/renamed/rank0/ckpt.7")" = payload ] || fail "rename of an implicit directory"
unmount_fs "$mnt"
echo "fuse_lifecycle_test: ok"
