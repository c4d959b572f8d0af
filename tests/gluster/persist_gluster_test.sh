#!/usr/bin/env bash
# The second level (issue 20) on a real parallel file system: a 2-brick
# GlusterFS volume (bench/glusterfs/gluster_volume.sh) mounted as the
# --persist DIR of heat2d on 4 virtual nodes in 2 groups of 2 with one XOR
# spare each:
#  1. the failure-free run gives the reference checksum;
#  2. vn0 and vn1 (one group) killed together after checkpoint 7, more than
#     parity rebuilds: dlckpt-run restarts from the newest drained epoch on
#     the volume, and the run ends with the failure-free checksum (heat2d
#     sleeps 100 ms per iteration so that a drain ends before the next one
#     is due and before the kill);
#  3. dlckpt-store drained / verify-drained on the mount: a complete epoch
#     whose every file matches its CRC32C; the drained files are spread over
#     both bricks;
#  4. after teardown nothing is left: no gluster process, mount, brick or
#     state of ours (gluster_volume.sh check), /run/gluster as before, no
#     store, process or run directory of the test's jobs.
# The volume is brought up and torn down by `gluster_volume.sh run` (its
# watchdog tears down even when this script is SIGKILLed). Its names differ
# from gluster_smoke_test's (state /var/lib/dlckpt-gluster-persist, mount
# /mnt/dlckpt-gluster-persist, volume dlckptpersist); both need TCP port 24007,
# so they take turns (RESOURCE_LOCK in CMakeLists.txt; here a wait of up to
# 5 minutes for the port).
#
# usage: persist_gluster_test.sh BIN_DIR     (exit 77: not root, no glusterfs
# packages, no /dev/fuse, no mpiexec, port 24007 taken — cannot run here)
set -uo pipefail
bin=$(cd "$1" && pwd)
self=$(readlink -f "$0")
src=$(cd "$(dirname "$self")/../.." && pwd)
vol=$src/bench/glusterfs/gluster_volume.sh
export DLCKPT_GLUSTER_DIR=/var/lib/dlckpt-gluster-persist DLCKPT_GLUSTER_MNT=/mnt/dlckpt-gluster-persist
export DLCKPT_GLUSTER_VOL=dlckptpersist PATH=$PATH:/usr/sbin:/sbin

# The part that runs with the volume mounted ($GLUSTER_MNT): steps 1-3.
if [ "${2:-}" = --inner ]; then
  job=$3 out=$4
  log=$out/log
  fail() { echo "FAIL: $*" >&2; echo "---- output:" >&2; cat "$log" >&2; exit 1; }
  checksum() { sed -n 's/^checksum: //p' "$log" | tail -1; }
  # 100 ms per iteration, 0.5 s between checkpoints: without it checkpoints
  # come every 20-40 ms, and a drain on the volume (create, write, fsync over
  # FUSE and TCP, then the manifest) can still run when vn0,vn1 are killed at
  # checkpoint 7, leaving no complete drained epoch (exit 3; seen under load).
  H=("$bin/heat2d-dlckpt" --nx 128 --ny 128 --iters 60 --ckpt-every 5 --sleep-ms 100)
  layout=(--nodes 4 --spares 2 --group-size 2)
  pdir=$GLUSTER_MNT/drained
  cmd=("$bin/dlckpt-run" --job "${job}a" "${layout[@]}" -- "${H[@]}")
  echo "+ ${cmd[*]}"
  timeout -k 5 180 "${cmd[@]}" >"$log" 2>&1 || fail "failure-free run exited $?"
  ref=$(checksum)
  [ -n "$ref" ] || fail "no checksum in the failure-free run"
  echo "ok: failure-free checksum $ref (${SECONDS} s)"

  cmd=("$bin/dlckpt-run" --job "${job}b" "${layout[@]}" --persist "$pdir" --persist-every 2
       --kill-node vn0,vn1 --at checkpoint:7 -- "${H[@]}")
  echo "+ ${cmd[*]}"
  timeout -k 5 240 "${cmd[@]}" >"$log" 2>&1 || fail "run with --persist on GlusterFS exited $?"
  grep -q "restart from the persistent copy: drained epoch [0-9]* " "$log" || fail "did not restart from a drained epoch"
  grep -q "recovery 1: restart from the persistent copy" "$log" || fail "the summary does not say where the recovery came from"
  grep -q "drained to $pdir: epoch(s) [0-9]" "$log" || fail "the summary does not list the drained epochs"
  grep -E "restart from the persistent copy|^dlckpt-run: summary" "$log"
  [ "$(checksum)" = "$ref" ] || fail "checksum $(checksum), failure-free $ref"
  echo "ok: vn0,vn1 lost, restarted from the volume, checksum $(checksum) (${SECONDS} s)"

  "$bin/dlckpt-store" drained "$pdir" >"$log" 2>&1 || fail "dlckpt-store drained $pdir failed"
  cat "$log"
  grep -q ' complete ' "$log" || fail "no complete drained epoch on the volume"
  "$bin/dlckpt-store" verify-drained "$pdir" >"$log" 2>&1 || fail "dlckpt-store verify-drained $pdir failed"
  cat "$log"
  grep -q "every CRC32C matches" "$log" || fail "verify-drained did not check every CRC32C"
  # The drained files live on the bricks; a distributed volume hashes them over both.
  b1=$(find "$GLUSTER_DIR/brick1/drained" -type f 2>/dev/null | wc -l)
  b2=$(find "$GLUSTER_DIR/brick2/drained" -type f 2>/dev/null | wc -l)
  [ "$b1" -gt 0 ] && [ "$b2" -gt 0 ] || fail "the drained files should spread over both bricks: brick1 $b1, brick2 $b2"
  echo "ok: drained epochs verified on the volume; files on brick1 $b1, brick2 $b2 (${SECONDS} s)"
  exit 0
fi

[ "$(id -u)" = 0 ] || { echo "skip: needs root"; exit 77; }
command -v glusterd >/dev/null && command -v mount.glusterfs >/dev/null ||
  { echo "skip: glusterfs-server / glusterfs-client not installed"; exit 77; }
[ -c /dev/fuse ] || { echo "skip: no /dev/fuse"; exit 77; }
command -v mpiexec >/dev/null || { echo "skip: mpiexec missing"; exit 77; }

job=pglus$$
out=$(mktemp -d /tmp/gluster-persist.XXXXXX)
clean_jobs() {
  local p j
  for p in $(grep -lsa "DLCKPT_JOB=$job" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    [ "$p" = $$ ] || kill -9 "$p" 2>/dev/null
  done
  for j in a b; do "$bin/dlckpt-store" rm --job "$job$j" >/dev/null 2>&1; done
  rm -f /dev/shm/dlckpt."$job"* 2>/dev/null
  rm -rf /tmp/dlckpt-run."$job"*
}
trap 'clean_jobs; "$vol" -q down >/dev/null 2>&1; rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Port 24007 is one per machine: wait while another test's glusterd holds it.
for _ in $(seq 1 300); do
  [ -z "$(ss -Hltn 'sport = :24007' 2>/dev/null)" ] && break
  sleep 1
done
run_gluster_before=$(ls -A /run/gluster 2>/dev/null | sort)

"$vol" -q run -- "$self" "$bin" --inner "$job" "$out"
rc=$?
[ "$rc" = 77 ] && { echo "skip: the volume cannot run here"; exit 77; }
[ "$rc" = 0 ] || fail "the scenario on GlusterFS failed (exit $rc)"

# Nothing left.
sleep 0.2
"$vol" check >/dev/null 2>&1 || { "$vol" check; fail "the volume left something behind"; }
[ "$(ls -A /run/gluster 2>/dev/null | sort)" = "$run_gluster_before" ] ||
  fail "/run/gluster changed: $(ls -A /run/gluster)"
if ls /dev/shm | grep -q "^dlckpt\.$job"; then fail "dlckpt objects left in /dev/shm: $(ls /dev/shm | grep "^dlckpt\.$job")"; fi
if grep -lsa "DLCKPT_JOB=$job" /proc/[0-9]*/environ | grep -v "^/proc/$$/" | grep -q .; then
  fail "processes of the test's jobs are left"
fi
ls -d /tmp/dlckpt-run."$job"* >/dev/null 2>&1 && fail "run directories left: $(ls -d /tmp/dlckpt-run."$job"*)"
echo "ok: torn down, nothing left (${SECONDS} s)"
echo "persist gluster test: ok"
