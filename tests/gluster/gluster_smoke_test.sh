#!/usr/bin/env bash
# The short version of the GlusterFS comparison (bench/glusterfs/), and proof
# that the volume leaves nothing behind:
#  1. gluster_bench.sh --short: a 2-brick distributed volume, every row of the
#     IOR, checkpoint and recovery comparison at 2 ranks x 4 MiB, the METRIC
#     lines and the CSV; then nothing of the volume is left.
#  2. gluster_volume.sh run: files land on both bricks and read back equal; the
#     script is then SIGKILLed and its watchdog tears everything down.
#  3. a crashed instance (every gluster process SIGKILLed, a dead FUSE mount
#     left) is cleaned by `down`.
# "Nothing left": no process of ours, no mount, no state directory or mount
# point, /run/gluster as before, no store, mount or process of the comparison.
#
# usage: gluster_smoke_test.sh BIN_DIR     (exit 77: not root, no glusterfs
# packages, no /dev/fuse, port 24007 taken — the test cannot run here)
set -uo pipefail
bin=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
vol=$src/bench/glusterfs/gluster_volume.sh
bench=$src/bench/glusterfs/gluster_bench.sh
export DLCKPT_GLUSTER_DIR=/var/lib/dlckpt-gluster-test DLCKPT_GLUSTER_MNT=/mnt/dlckpt-gluster-test
export DLCKPT_GLUSTER_VOL=dlckpttest PATH=$PATH:/usr/sbin:/sbin
export DLCKPT_GBENCH_TAG=gsmoke$$   # the bench's dlckpt jobs and store: dlckpt.gsmoke<pid>*

[ "$(id -u)" = 0 ] || { echo "skip: needs root"; exit 77; }
command -v glusterd >/dev/null && command -v mount.glusterfs >/dev/null ||
  { echo "skip: glusterfs-server / glusterfs-client not installed"; exit 77; }
[ -c /dev/fuse ] || { echo "skip: no /dev/fuse"; exit 77; }
command -v fio >/dev/null && command -v mpiexec >/dev/null || { echo "skip: fio or mpiexec missing"; exit 77; }

out=$(mktemp -d /tmp/gluster-smoke.XXXXXX)
log=$out/log
trap '"$vol" -q down >/dev/null 2>&1; rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$log" ] && tail -40 "$log" >&2; exit 1; }

run_gluster_before=$(ls -A /run/gluster 2>/dev/null | sort)
nothing_left() {  # what
  "$vol" check >/dev/null 2>&1 || { "$vol" check; fail "$1: the volume left something behind"; }
  [ "$(ls -A /run/gluster 2>/dev/null | sort)" = "$run_gluster_before" ] ||
    fail "$1: /run/gluster changed: $(ls -A /run/gluster)"
  if ls /dev/shm | grep -q "^dlckpt\.$DLCKPT_GBENCH_TAG"; then fail "$1: dlckpt objects left in /dev/shm"; fi
  if findmnt -rn | grep -q "dlckpt\.$DLCKPT_GBENCH_TAG"; then fail "$1: the dlckpt-fuse mount is left"; fi
  if grep -lsaz "^GBENCH_TAG=$DLCKPT_GBENCH_TAG$" /proc/[0-9]*/environ | grep -q .; then
    fail "$1: processes of the comparison are left"
  fi
  if findmnt -rn -t fuse.glusterfs | grep -q "$DLCKPT_GLUSTER_MNT"; then fail "$1: still mounted"; fi
  echo "ok: $1: nothing left (${SECONDS} s)"
}

# 1. The short comparison.
"$bench" --short --no-plot --bin "$bin" --out "$out" >"$log" 2>&1
rc=$?
[ "$rc" = 77 ] && { cat "$log"; echo "skip: the volume cannot run here"; exit 77; }
[ "$rc" = 0 ] || fail "gluster_bench.sh --short exited $rc"
grep -q "gluster: version: glusterfs " "$log" || fail "no version reported"
grep -q "volume $DLCKPT_GLUSTER_VOL: type Distribute, 2 bricks" "$log" || fail "no 2-brick distributed volume reported"
for m in ckpt_speedup_vs_glusterfs recovery_time_vs_glusterfs_restart; do
  grep -qE "^METRIC $m [0-9.]+ x target" "$log" || fail "no METRIC $m line"
done
for r in "ior,glusterfs,write_bw" "ckpt,glusterfs,ckpt_seconds" "ckpt,dlckpt,ckpt_seconds" \
         "recovery,glusterfs,total" "recovery,dlckpt,total"; do
  grep -qE "^$r,[0-9.]+," "$out/glusterfs.csv" || fail "no row $r in the CSV"
done
grep -E "^METRIC|^  [a-z/]+:? .*(MiB/s|checkpoint|restarted)" "$log"
nothing_left "comparison"

# 2. Distribution over bricks, then SIGKILL of the script: the watchdog cleans up.
(
  exec "$vol" -q run -- sh -c '
    set -e
    for i in 0 1 2 3 4 5 6 7 8 9 10 11; do
      head -c 65536 /dev/urandom >"$GLUSTER_MNT/f$i"; cp "$GLUSTER_MNT/f$i" "$GLUSTER_MNT/.orig$i"
    done
    sync
    for i in 0 1 2 3 4 5 6 7 8 9 10 11; do cmp "$GLUSTER_MNT/f$i" "$GLUSTER_MNT/.orig$i"; done
    echo "brick1 $(ls "$GLUSTER_DIR/brick1" | grep -c "^f")"
    echo "brick2 $(ls "$GLUSTER_DIR/brick2" | grep -c "^f")"
    echo ready
    cd "$GLUSTER_MNT" && exec sleep 600'
) >"$log" 2>&1 &
owner=$!
for _ in $(seq 1 600); do grep -q '^ready' "$log" && break; kill -0 "$owner" 2>/dev/null || break; sleep 0.1; done
grep -q '^ready' "$log" || fail "the volume did not come up or a file differed"
b1=$(sed -n 's/^brick1 //p' "$log") b2=$(sed -n 's/^brick2 //p' "$log")
[ "$b1" -gt 0 ] && [ "$b2" -gt 0 ] && [ $(( b1 + b2 )) = 12 ] ||
  fail "12 files should spread over both bricks: brick1 $b1, brick2 $b2"
echo "ok: 12 files distributed: brick1 $b1, brick2 $b2 (${SECONDS} s)"
kill -KILL "$owner"
for _ in $(seq 1 300); do "$vol" check >/dev/null 2>&1 && break; sleep 0.1; done
nothing_left "SIGKILL of gluster_volume.sh run"

# 3. A crashed instance: every gluster process of ours killed, a dead mount left.
"$vol" -q up >"$log" 2>&1 || fail "gluster_volume.sh up failed"
for p in /proc/[0-9]*; do
  [ "$(readlink "$p/exe" 2>/dev/null)" = /usr/sbin/glusterfsd ] || continue
  tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q "$DLCKPT_GLUSTER_DIR/" && kill -KILL "${p#/proc/}" 2>/dev/null
done
sleep 0.5
findmnt -rn --mountpoint "$DLCKPT_GLUSTER_MNT" >/dev/null || fail "the crash should leave a dead mount"
"$vol" -q down >>"$log" 2>&1 || fail "down after a crash exited non-zero"
nothing_left "down after a crash"
echo "gluster smoke test: ok"
