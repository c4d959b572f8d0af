# Shared helpers of the dlckpt-fuse system tests. Source after `set -euo pipefail`
# with BIN_DIR set. Each test gets a private temp dir, a unique store name, and
# an EXIT trap that always runs the test's cleanup_hook (if it defines one),
# unmounts (fusermount3 -u, then umount -l), stops the daemons it started (by
# pid) and removes its stores and files.

BIN_DIR=$(cd "$BIN_DIR" && pwd)
FUSE_BIN="$BIN_DIR/dlckpt-fuse"
CTL_BIN="$BIN_DIR/dlckpt-ctl"
STORE_BIN="$BIN_DIR/dlckpt-store"

if [ ! -e /dev/fuse ]; then
  echo "SKIP: /dev/fuse is absent: FUSE mounts cannot be tested here"
  exit 77
fi
if [ ! -r /dev/fuse ] || [ ! -w /dev/fuse ]; then
  echo "SKIP: /dev/fuse is not usable by $(id -un): FUSE mounts cannot be tested here"
  exit 77
fi

TMP=$(mktemp -d /tmp/dlckpt-fuse-test.XXXXXX)
TEST_JOB="ft$$x$RANDOM"
STORES=()
MOUNTS=()
PIDS=()

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# new_store VAR: a new unique store name into VAR (removed at exit).
new_store() {
  local s="/dlckpt.${TEST_JOB}.n0.r${#STORES[@]}"
  STORES+=("$s")
  printf -v "$1" '%s' "$s"
}

# new_mountpoint VAR: a new empty mount point directory into VAR.
new_mountpoint() {
  local m
  m=$(mktemp -d "$TMP/mnt.XXXXXX")
  MOUNTS+=("$m")
  printf -v "$1" '%s' "$m"
}

# Whether $1 is a mount point, and of which type ($2, optional).
is_mounted() {
  awk -v m="$1" -v t="${2:-}" '$5 == m { for (i = 6; i <= NF; i++) if ($i == "-") break;
         if (t == "" || $(i + 1) == t) found = 1 } END { exit !found }' /proc/self/mountinfo
}

unmount_quietly() {
  local m="$1"
  if is_mounted "$m"; then
    fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  fi
}

cleanup() {
  local rc=$?
  set +e
  cd /
  if declare -F cleanup_hook >/dev/null; then cleanup_hook; fi
  for m in "${MOUNTS[@]}"; do unmount_quietly "$m"; done
  for p in "${PIDS[@]}"; do
    if kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null
      for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      if kill -0 "$p" 2>/dev/null; then kill -KILL "$p"; fi
    fi
  done
  for m in "${MOUNTS[@]}"; do unmount_quietly "$m"; done
  for s in "${STORES[@]}"; do "$STORE_BIN" rm "$s" >/dev/null 2>&1; done
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT

# Waits until $1 is (or, with "gone", is no longer) a mount point.
wait_mounted() {
  local m="$1" want="${2:-up}"
  for _ in $(seq 100); do
    if is_mounted "$m"; then
      [ "$want" = up ] && return 0
    else
      [ "$want" = gone ] && return 0
    fi
    sleep 0.1
  done
  fail "mount point $m did not become $want"
}

declare -A DAEMON_PID DAEMON_LOG

# mount_fs MOUNTPOINT STORE [OPTIONS...]: serves in the foreground as a job of
# this shell, so that unmount_fs can check its exit status and its stderr
# (sanitizer reports); returns once mounted.
mount_fs() {
  local m="$1" s="$2" log pid
  shift 2
  log="$TMP/daemon.${#PIDS[@]}.log"
  "$FUSE_BIN" "$m" --store "$s" -f "$@" 2>"$log" &
  pid=$!
  PIDS+=("$pid")
  DAEMON_PID[$m]=$pid
  DAEMON_LOG[$m]=$log
  for _ in $(seq 100); do
    is_mounted "$m" fuse.dlckpt && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  fail "dlckpt-fuse $m --store $s $* did not mount: $(cat "$log")"
}

# The pid of the daemon serving mount point $1 (from its status file).
daemon_pid() {
  awk '/^pid:/ { print $2 }' "$1/.dlckpt/status"
}

# check_daemon_exit MOUNTPOINT: waits for the daemon started by mount_fs and
# fails unless it exited with status 0 and reported no sanitizer error.
check_daemon_exit() {
  local m="$1" pid="${DAEMON_PID[$1]}" log="${DAEMON_LOG[$1]}" rc=0
  wait "$pid" || rc=$?
  unset "DAEMON_PID[$m]"
  [ "$rc" = 0 ] || fail "daemon $pid of $m exited with status $rc: $(cat "$log")"
  if grep -q "AddressSanitizer\|LeakSanitizer\|runtime error" "$log"; then
    fail "daemon $pid of $m: $(cat "$log")"
  fi
}

# Unmounts with fusermount3 and checks that the daemon exited cleanly.
unmount_fs() {
  local m="$1" pid
  if [ -n "${DAEMON_PID[$m]:-}" ]; then
    fusermount3 -u "$m" || fail "fusermount3 -u $m failed"
    check_daemon_exit "$m"
    return 0
  fi
  pid=$(daemon_pid "$m")  # a daemon-mode mount: not our child
  fusermount3 -u "$m" || fail "fusermount3 -u $m failed"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  fail "daemon $pid of $m did not exit after unmount"
}
