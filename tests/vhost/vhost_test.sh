#!/usr/bin/env bash
# vhost_test.sh CASE PROBE — system tests of the virtual-host harness (ctest label "vhost").
#   mpi       3 hosts, 6 ranks: every rank reports its virtual host's name, allreduce and ring
#             agree, /dev/shm and host names are per host, nothing is left running after a job
#   crash     crash a host under a running job: mpiexec exits non-zero in bounded time, the
#             host's /dev/shm is gone, the survivors' shm objects remain, no rank is left
#   poweroff  power a host off under a running job: the job does not end by itself (Hydra and
#             the peers see only silence), and `down` still ends and cleans everything
# PROBE is the dlckpt-vhost-probe executable. Exits 77 (skip) without root or namespaces.
# Every launch runs under `timeout -k` in its own session; the EXIT trap kills what is left,
# takes the cluster down and fails the test if anything of it survives. If the test is killed
# outright, the next one's `dlckpt-vhost gc` takes its cluster down (up --owner).
set -euo pipefail

readonly CASE=${1:?usage: vhost_test.sh mpi|crash|poweroff PROBE}
readonly PROBE=${2:?usage: vhost_test.sh CASE PROBE}
HERE=$(dirname "$(readlink -f "$0")")
readonly VH=$HERE/dlckpt-vhost
readonly VH_RUN=${DLCKPT_VHOST_RUN:-/run/dlckpt-vhost}
readonly P=v${CASE:0:1}$$            # cluster name: unique per test process
OUT=$(mktemp -d "${TMPDIR:-/tmp}/dlckpt-vhost-test.XXXXXX")
readonly OUT
readonly T0=$SECONDS
JOB_PID=''

log() { echo "[$(date +%T.%3N)] $*"; }
fail() { log "FAIL: $*"; exit 1; }
now_ms() { date +%s%3N; }

if ! msg=$("$VH" check 2>&1); then
  echo "SKIP: $msg"
  exit 77
fi

# Clusters of earlier tests killed before their trap ran (ctest's timeout sends SIGKILL).
"$VH" gc

# Hosts have a private /tmp; a build tree under /tmp would be invisible to them.
TMP_OPT=()
case $(readlink -f "$PROBE") in /tmp/*) TMP_OPT=(--shared-tmp) ;; esac

leftovers() {  # prints what the cluster left behind; true if nothing
  local bad=0 f
  if [[ -e $VH_RUN/$P ]]; then echo "leftover state $VH_RUN/$P"; bad=1; fi
  if ip -o link show | grep -E "(dv-$P-[0-9]+|dvb-$P)[@:]"; then bad=1; fi
  if pgrep -af -- "__holder $P-|--tag $P( |\$)|ssh -x $P-"; then bad=1; fi
  for f in /proc/[0-9]*/mountinfo; do
    if grep -qs "dlckpt-vhost-[a-z]*:$P-" "$f"; then echo "leftover mount in $f"; bad=1; fi
  done
  return "$bad"
}

cleanup() {
  local rc=$?
  trap - EXIT
  if [[ -n $JOB_PID ]]; then kill -KILL -- "-$JOB_PID" 2>/dev/null || :; wait "$JOB_PID" 2>/dev/null || :; fi
  "$VH" down --name "$P" || rc=1
  if ! leftovers; then log "FAIL: cluster $P left the above behind"; rc=1; fi
  if ((rc == 0)); then rm -rf "$OUT"; else log "outputs kept in $OUT"; fi
  log "vhost_$CASE: $( ((rc == 0)) && echo passed || echo FAILED) in $((SECONDS - T0)) s"
  exit "$rc"
}
trap cleanup EXIT

# start_job SECS ARGS...: mpiexec across the cluster in its own session, bounded by timeout;
# output in $OUT/job.log, its pid (= process group) in JOB_PID.
start_job() {
  local secs=$1
  shift
  setsid timeout -k 5 "$secs" "$VH" mpiexec --name "$P" -n 6 "$PROBE" --tag "$P" "$@" \
    >"$OUT/job.log" 2>&1 </dev/null &
  JOB_PID=$!
}

# wait_job SECS -> 0 and JOB_RC set once the job ended within SECS, else 1.
wait_job() {
  local deadline=$((SECONDS + $1))
  while kill -0 "$JOB_PID" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
  JOB_RC=0
  wait "$JOB_PID" || JOB_RC=$?
  JOB_PID=''
}

wait_looping() {  # until all 6 ranks print "looping"
  local deadline=$((SECONDS + 30))
  until (($(grep -c 'looping$' "$OUT/job.log" || true) == 6)); do
    kill -0 "$JOB_PID" 2>/dev/null || { cat "$OUT/job.log"; fail "job ended before looping"; }
    ((SECONDS < deadline)) || { cat "$OUT/job.log"; fail "ranks not looping after 30 s"; }
    sleep 0.05
  done
}

ranks_on() {  # ranks_on HOST -> number of probe processes of this test on HOST
  "$VH" exec "$1" -- ps -e -o args= | grep -c -- "--tag $P" || true
}

up() {
  local t
  t=$(now_ms)
  "$VH" up --name "$P" -n 3 --owner $$ "${TMP_OPT[@]}"
  UP_MS=$(($(now_ms) - t))
  log "up: 3 hosts in $UP_MS ms"
}

case_mpi() {
  up
  # Hosts: names, resolution, private /dev/shm.
  local h i r
  for i in 0 1 2; do
    h=$("$VH" exec "$P-$i" -- hostname)
    [[ $h == "$P-$i" ]] || fail "host $P-$i calls itself '$h'"
  done
  "$VH" exec "$P-2" -- getent hosts "$P-0" | grep -q "^10\.\|^[0-9]" || fail "$P-0 does not resolve on $P-2"
  "$VH" exec "$P-0" -- sh -c 'echo x >/dev/shm/dlckpt-vhost-test'
  if "$VH" exec "$P-1" -- test -e /dev/shm/dlckpt-vhost-test; then fail "/dev/shm shared between hosts"; fi
  [[ ! -e /dev/shm/dlckpt-vhost-test ]] || fail "/dev/shm of $P-0 is the head's"

  # 6 ranks, round-robin over the hosts (Hydra's default with -hosts): rank r on P-(r%3).
  local t
  t=$(now_ms)
  timeout -k 5 60 "$VH" mpiexec --name "$P" -n 6 "$PROBE" --tag "$P" >"$OUT/job.log" 2>&1 ||
    { cat "$OUT/job.log"; fail "mpiexec exited $?"; }
  local job_ms=$(($(now_ms) - t))
  cat "$OUT/job.log"
  for r in 0 1 2 3 4 5; do
    grep -qx "rank $r of 6 host $P-$((r % 3))" "$OUT/job.log" || fail "rank $r not on host $P-$((r % 3))"
  done
  grep -qx "probe ok: 6 ranks on 3 hosts" "$OUT/job.log" || fail "probe did not report success"

  # Blocks of 2 (-ppn 2): rank r on P-(r/2).
  timeout -k 5 60 "$VH" mpiexec --name "$P" -ppn 2 -n 6 "$PROBE" --tag "$P" >"$OUT/job2.log" 2>&1 ||
    { cat "$OUT/job2.log"; fail "mpiexec -ppn 2 exited $?"; }
  for r in 0 1 2 3 4 5; do
    grep -qx "rank $r of 6 host $P-$((r / 2))" "$OUT/job2.log" || fail "-ppn 2: rank $r not on $P-$((r / 2))"
  done

  for i in 0 1 2; do
    [[ $(ranks_on "$P-$i") == 0 ]] || fail "ranks left running on $P-$i after the job"
  done
  t=$(now_ms)
  "$VH" down --name "$P"
  log "timings: up $UP_MS ms, 6-rank job $job_ms ms, down $(($(now_ms) - t)) ms"
}

case_crash() {
  up
  start_job 90 --shm 8 --loop 60
  wait_looping
  local objs
  objs=$("$VH" exec "$P-1" -- ls /dev/shm | tr '\n' ' ')
  [[ $objs == *dlckpt-vhost-probe.1* && $objs == *dlckpt-vhost-probe.4* ]] ||
    fail "shm objects of ranks 1 and 4 missing on $P-1: $objs"
  local shmem0 t
  shmem0=$(awk '/^Shmem:/ {print $2}' /proc/meminfo)
  t=$(now_ms)
  "$VH" crash "$P-1"
  wait_job 30 || fail "mpiexec still running 30 s after $P-1 crashed"
  local end_ms=$(($(now_ms) - t))
  log "mpiexec exited $JOB_RC ${end_ms} ms after the crash"
  ((JOB_RC != 0)) || fail "mpiexec exited 0 although $P-1 crashed"
  local rc=0
  "$VH" exec "$P-1" -- true 2>/dev/null || rc=$?
  ((rc == 255)) || fail "exec into crashed $P-1 returned $rc, expected 255"
  if grep -qs "dlckpt-vhost-shm:$P-1 " /proc/[0-9]*/mountinfo; then fail "/dev/shm of $P-1 still mounted"; fi
  ! ip link show "dv-$P-1" >/dev/null 2>&1 || fail "veth dv-$P-1 survives the crash"
  log "Shmem fell by $(((shmem0 - $(awk '/^Shmem:/ {print $2}' /proc/meminfo)) / 1024)) MiB machine-wide (the crashed host held 16 MiB)"
  # Survivors: Hydra killed their ranks; their shm objects outlive the processes.
  for i in 0 2; do
    [[ $(ranks_on "$P-$i") == 0 ]] || fail "ranks left running on $P-$i"
  done
  objs=$("$VH" exec "$P-0" -- ls /dev/shm | tr '\n' ' ')
  [[ $objs == *dlckpt-vhost-probe.0* && $objs == *dlckpt-vhost-probe.3* ]] ||
    fail "shm objects of the survivors on $P-0 are gone: $objs"
}

case_poweroff() {
  up
  start_job 120 --loop 90
  wait_looping
  local t
  t=$(now_ms)
  "$VH" poweroff "$P-1"
  local i
  for i in 1 2 3 4 5 6 7 8; do
    sleep 1
    kill -0 "$JOB_PID" 2>/dev/null || { cat "$OUT/job.log"; fail "job ended $i s after the power-off"; }
  done
  log "job still running $(($(now_ms) - t)) ms after $P-1 was powered off (expected: nobody notices)"
  [[ $(ranks_on "$P-0") == 2 && $(ranks_on "$P-2") == 2 ]] || fail "survivors' ranks are not all alive"
  local rc=0
  "$VH" exec "$P-1" -- true 2>/dev/null || rc=$?
  ((rc == 255)) || fail "exec into powered-off $P-1 returned $rc, expected 255"
  if grep -qs "dlckpt-vhost-shm:$P-1 " /proc/[0-9]*/mountinfo; then fail "/dev/shm of $P-1 still mounted"; fi
  t=$(now_ms)
  "$VH" down --name "$P"
  log "down: $(($(now_ms) - t)) ms"
  wait_job 20 || fail "mpiexec still running 20 s after down"
  log "mpiexec exited $JOB_RC $(($(now_ms) - t)) ms after down"
}

log "vhost_$CASE: cluster $P, probe $PROBE"
"case_$CASE"
