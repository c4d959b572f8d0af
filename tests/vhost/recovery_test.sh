#!/usr/bin/env bash
# recovery_test.sh MODE SCENARIO BIN_DIR TEST_BIN_DIR — dlckpt-run end to end with node losses,
# on virtual hosts (MODE hosts: one Linux-namespace host per node, tests/vhost/dlckpt-vhost;
# needs root) or on the single-namespace virtual nodes vn0, vn1, ... (MODE nodes: DLCKPT_NODE,
# dlckpt-run's default; no root needed).
#
# Two kinds of node failure, injected by dlckpt-run itself (--kill-node / --poweroff-node):
#   crash     every process of the node killed at once, its memory gone (hosts: dlckpt-vhost
#             crash; Hydra notices and ends the jobs)
#   power-off the node goes silent first, then dies (hosts: dlckpt-vhost poweroff cuts the link,
#             then kills the host; nodes: its processes are stopped, its shared memory
#             destroyed). Hydra never notices: only dlckpt-run's heartbeats do, and the test
#             reports `METRIC heartbeat_detection_seconds` (target < 3 s).
#
# Scenarios (node I is P-I on hosts, vnI on nodes; "d+s" = data nodes + spares):
#   clean          ckpt_app, 3+1 XOR, no failure
#   xor-crash      ckpt_app, 3+1 XOR, node 1 crashes after checkpoint 2
#   xor-poweroff   ckpt_app, 3+1 XOR, node 1 is powered off after checkpoint 2
#   rs-two         ckpt_app, 4+2 RS, node 3 is powered off when the encoding of checkpoint 3
#                  begins (on hosts its link goes down 0.1-0.4 s later, often a checkpoint or
#                  two on), then node 1 crashes during the rebuild: the recovery starts over
#                  with both lost
#   toomany        ckpt_app, 3+1 XOR, node 1 crashes and node 2 is powered off: unrecoverable,
#                  dlckpt-run exits 3 with a message naming the group, nothing left anywhere
#   toomany-persist  as toomany, with --persist --persist-every 1 (the second level): on
#                  nodes the run restarts from the drained epoch on fresh virtual nodes and
#                  ends with the checksum; on hosts the two lost hosts exceed the one spare,
#                  and dlckpt-run exits 3 naming how many hosts are missing
#   halt           ckpt_app, 3+1 XOR, --persist: SIGUSR1 to dlckpt-run once checkpoint 2 is
#                  protected (Slurm's --signal before the time limit). Every node drains its
#                  own stores (dlckpt-store drain, launched on the hosts), dlckpt-run exits 7;
#                  the drained epoch verifies, and --restart-from it ends with the checksum
#   sppm-poweroff  sppm-mini-dlckpt, 4+1 XOR, node 2 powered off after checkpoint 2, with
#                  --heartbeat-timeout 1 (the others use the default, 1.5 s)
#   sppm-rs        sppm-mini-dlckpt, 4+2 RS, node 0 crashes and node 2 is powered off at once
#   spread         ckpt_app, 4+0 XOR with --parity spread (the parity on the members), node 1
#                  crashes after checkpoint 2: rebuilt from the survivors' parity, its rank
#                  relaunched on a surviving host (oversubscribed, and dlckpt-run says so)
# A power-off must be detected by heartbeats, not sooner than timeout - 2 periods (the last
# beat may come a little more than a period before the link is cut). How much later is a
# speed: over min(timeout + 1.2 s, 3 s) it is noted with the machine's load, not failed (at
# load 12 the monitor saw 2.3 s of silence against a 1 s timeout).
# Every successful run must print the checksum of a failure-free run of the same program
# (mpiexec on the head, no dlckpt-run), ckpt_app must restore its checkpoint byte for byte
# ("checkpoint verified"), and afterwards no process of the job may run anywhere, no store may
# be left in any host's (or the head's) /dev/shm, and the run directory must be gone.
#
# Exits 77 (skip) in MODE hosts without root or namespaces. Every launch runs under
# `timeout -k`; dlckpt-run also under its own --timeout. The EXIT trap kills whatever of the job
# is left, takes the cluster down and fails the test if anything of it survives; if the test
# is killed outright, the next vhost test's `dlckpt-vhost gc` takes its cluster down.
set -uo pipefail

readonly MODE=${1:?usage: recovery_test.sh hosts|nodes SCENARIO BIN_DIR TEST_BIN_DIR}
readonly SCENARIO=${2:?usage: recovery_test.sh MODE SCENARIO BIN_DIR TEST_BIN_DIR}
BIN=$(readlink -f "${3:?BIN_DIR}")
TBIN=$(readlink -f "${4:?TEST_BIN_DIR}")
readonly BIN TBIN
HERE=$(dirname "$(readlink -f "$0")")
readonly VH=$HERE/dlckpt-vhost
readonly VH_RUN=${DLCKPT_VHOST_RUN:-/run/dlckpt-vhost}
readonly P=vr$$                       # cluster name (hosts mode), unique per test process
readonly JOB=vrec${SCENARIO//[^a-z0-9]/}$$
readonly T0=$SECONDS
readonly TARGET_DETECT_S=3
readonly HB_PERIOD_S=0.2                    # the codec processes' heartbeat period
hb_timeout=1.5                              # dlckpt-run's default --heartbeat-timeout
CLUSTER_UP=0
OUT=''
METRICS=()

log() { echo "[$(date +%T.%3N)] $*"; }
fail() {
  log "FAIL ($MODE $SCENARIO): $*"
  [[ -n $OUT && -f $OUT/run.log ]] && { echo "---- dlckpt-run output:"; cat "$OUT/run.log"; }
  exit 1
}

case $MODE in
  hosts)
    if ! msg=$("$VH" check 2>&1); then
      echo "SKIP: $msg"
      exit 77
    fi
    "$VH" gc ;;
  nodes) ;;
  *) echo "recovery_test.sh: MODE must be hosts or nodes, not '$MODE'" >&2; exit 2 ;;
esac

# The run directory (rendezvous file, events, codec log) must be visible to dlckpt-run on the
# head and to codec and application rank 0 inside the hosts: hosts have a private /tmp, so it
# lives under /var/tmp, which they share with the head (like a home directory on NFS).
OUT=$(mktemp -d /var/tmp/dlckpt-vhost-recovery.XXXXXX) || exit 1
readonly OUT RUN_DIR=$OUT/run

# --- the scenario ------------------------------------------------------------------------------

# The application runs on for about 2 s after its checkpoint 2, so that a kill injected there
# (a dlckpt-vhost command, which waits for the cluster's lock) lands while it runs, also on a
# loaded machine.
ckpt=("$TBIN/ckpt_app" --iters 14 --kib 512 --sleep-ms 150 --write-pieces 8)
sppm=("$BIN/sppm-mini-dlckpt" --iters 16 --sleep-ms 80)
expect_rc=0 poweroff=0 extra=()
case $SCENARIO in
  clean)         app=("${ckpt[@]}"); data=3 spares=1 scheme=xor; inject=() ;;
  xor-crash)     app=("${ckpt[@]}"); data=3 spares=1 scheme=xor; inject=(--kill-node @1 --at checkpoint:2+0.02) ;;
  xor-poweroff)  app=("${ckpt[@]}"); data=3 spares=1 scheme=xor; inject=(--poweroff-node @1 --at checkpoint:2+0.02)
                 poweroff=1 ;;
  rs-two)        app=("${ckpt[@]}"); data=4 spares=2 scheme=rs
                 inject=(--poweroff-node @3 --at phase:encode:3 --kill-node @1 --at phase:recover); poweroff=1 ;;
  toomany)       app=("${ckpt[@]}"); data=3 spares=1 scheme=xor
                 inject=(--kill-node @1 --at checkpoint:2 --poweroff-node @2 --at checkpoint:2); expect_rc=3 ;;
  toomany-persist) app=("${ckpt[@]}"); data=3 spares=1 scheme=xor
                 inject=(--kill-node @1 --at checkpoint:2 --poweroff-node @2 --at checkpoint:2)
                 extra=(--persist "$OUT/persist" --persist-every 1)
                 if [[ $MODE == hosts ]]; then expect_rc=3; fi ;;
  halt)          app=("$TBIN/ckpt_app" --iters 40 --kib 512 --sleep-ms 100 --write-pieces 8)
                 data=3 spares=1 scheme=xor; inject=(); extra=(--persist "$OUT/persist"); expect_rc=7 ;;
  sppm-poweroff) app=("${sppm[@]}"); data=4 spares=1 scheme=xor; inject=(--poweroff-node @2 --at checkpoint:2)
                 poweroff=1 hb_timeout=1.0 ;;
  sppm-rs)       app=("${sppm[@]}"); data=4 spares=2 scheme=rs
                 inject=(--kill-node @0 --at checkpoint:3 --poweroff-node @2 --at checkpoint:3) ;;
  spread)        app=("${ckpt[@]}"); data=4 spares=0 scheme=xor; inject=(--kill-node @1 --at checkpoint:2+0.02)
                 extra=(--parity spread) ;;
  *) echo "recovery_test.sh: unknown scenario '$SCENARIO'" >&2; exit 2 ;;
esac
readonly NODES=$((data + spares))
node_name() { if [[ $MODE == hosts ]]; then echo "$P-$1"; else echo "vn$1"; fi; }
inject=("${inject[@]//@/$(node_name '')}")   # @I -> P-I or vnI

# --- leftovers and cleanup ---------------------------------------------------------------------

# job_procs: processes of the job anywhere on the machine (the head's /proc shows the hosts'
# processes too): ranks and codec processes carry DLCKPT_JOB in their environment, the
# mpiexecs name it on their command line; plus launchers into this test's hosts.
job_procs() {
  local f pid
  for f in $(grep -lsaz -x "DLCKPT_JOB=$JOB" /proc/[0-9]*/environ); do
    pid=${f#/proc/}; pid=${pid%%/*}
    [[ $pid == "$$" ]] || echo "$pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-150)"
  done
  pgrep -af -- "DLCKPT_JOB $JOB " | cut -c1-150 || :
  if [[ $MODE == hosts ]]; then pgrep -af -- "ssh -x $P-[0-9]+ " | cut -c1-150 || :; fi
}

# store_objects: dlckpt shared memory of the job on the head and in every live host.
store_objects() {
  local f
  for f in /dev/shm/dlckpt."$JOB".*; do [[ -e $f ]] && echo "head: ${f#/dev/shm/}"; done
  if [[ $MODE == hosts ]] && ((CLUSTER_UP)); then
    local i
    for ((i = 0; i < NODES; i++)); do
      "$VH" exec "$P-$i" -- ls /dev/shm 2>/dev/null | grep "^dlckpt\.$JOB\." | sed "s/^/$P-$i: /"
    done
  fi
  return 0
}

cluster_leftovers() {  # prints what the cluster left behind; true if nothing
  local bad=0 f
  if [[ -e $VH_RUN/$P ]]; then echo "leftover state $VH_RUN/$P"; bad=1; fi
  if ip -o link show | grep -E "(dv-$P-[0-9]+|dvb-$P)[@:]"; then bad=1; fi
  if pgrep -af -- "__holder $P-|ssh -x $P-"; then bad=1; fi
  for f in /proc/[0-9]*/mountinfo; do
    if grep -qs "dlckpt-vhost-[a-z]*:$P-" "$f"; then echo "leftover mount in $f"; bad=1; fi
  done
  return "$bad"
}

cleanup() {
  local rc=$? pid _
  trap - EXIT
  for _ in 1 2 3; do
    for pid in $(job_procs | cut -d' ' -f1); do kill -KILL "$pid" 2>/dev/null; done
  done
  rm -f /dev/shm/dlckpt."$JOB".* /dev/shm/dlckpt."${JOB}ref".*
  if [[ $MODE == hosts ]]; then
    "$VH" down --name "$P" || rc=1
    if ! cluster_leftovers; then log "FAIL: cluster $P left the above behind"; rc=1; fi
  fi
  if ((rc == 0)); then rm -rf "$OUT"; else log "outputs kept in $OUT"; fi
  log "recovery $MODE $SCENARIO: $( ((rc == 0)) && echo passed || echo FAILED) in $((SECONDS - T0)) s"
  if ((rc == 0 && ${#METRICS[@]})); then printf "%s\n" "${METRICS[@]}"; fi
  exit "$rc"
}
trap cleanup EXIT
# Killed by a timeout (SIGTERM to the process group) or by hand: fail, after the cleanup.
trap 'log "killed by a signal"; exit 143' TERM INT HUP

# --- the failure-free answer ------------------------------------------------------------------

ref=$(DLCKPT_JOB="${JOB}ref" timeout -k 5 120 mpiexec-local -n "$data" "${app[@]}" 2>/dev/null </dev/null |
      sed -n 's/^checksum: //p')
rm -f /dev/shm/dlckpt."${JOB}ref".*
[[ -n $ref ]] || fail "the failure-free run printed no checksum"

# --- the cluster and dlckpt-run's arguments ----------------------------------------------------

layout=(--nodes "$data" --spares "$spares" --scheme "$scheme" --heartbeat-timeout "$hb_timeout")
if [[ $MODE == hosts ]]; then
  tmp_opt=()
  case "$BIN/ $TBIN/" in /tmp/*|*" /tmp/"*) tmp_opt=(--shared-tmp) ;; esac  # build tree in /tmp
  t=$SECONDS
  "$VH" up --name "$P" -n "$NODES" --owner $$ "${tmp_opt[@]}" || fail "dlckpt-vhost up failed"
  CLUSTER_UP=1
  # mpiexec across the hosts: the launcher into them, -iface (proxies reach mpiexec on the
  # head's bridge address), and the MPI_Finalize fix for UCX over TCP preloaded into the ranks
  # (codec and application; README.md "MPI_Finalize hangs over TCP").
  mapfile -t margs < <("$VH" mpiexec-args --name "$P")
  ((${#margs[@]})) || fail "dlckpt-vhost mpiexec-args printed nothing"
  layout+=(--hosts "$("$VH" hosts --name "$P")" --mpiexec-args "${margs[*]}"
           --heartbeat-address "$("$VH" head --name "$P")"
           --kill-command "$VH {how} {node}")
fi

# --- the run ----------------------------------------------------------------------------------

log "$MODE $SCENARIO: job $JOB, $data+$spares $scheme, ${inject[*]:-no failure}; reference checksum $ref"
t=$SECONDS
timeout -k 5 150 "$BIN/dlckpt-run" --job "$JOB" --run-dir "$RUN_DIR" --timeout 120 "${layout[@]}" \
  "${inject[@]}" "${extra[@]}" -- "${app[@]}" >"$OUT/run.log" 2>&1 </dev/null &
run_pid=$!
if [[ $SCENARIO == halt ]]; then
  # The halt once checkpoint 2 is protected: an event, not a time.
  for _ in $(seq 600); do
    grep -qs " app ckpt-end 2 0" "$RUN_DIR/events" && break
    kill -0 "$run_pid" 2>/dev/null || break
    sleep 0.05
  done
  grep -qs " app ckpt-end 2 0" "$RUN_DIR/events" || fail "checkpoint 2 was never protected"
  pkill -USR1 -f -- "^$BIN/dlckpt-run --job $JOB " || fail "no dlckpt-run to halt"
fi
wait "$run_pid"
rc=$?
log "dlckpt-run exited $rc after $((SECONDS - t)) s"
[[ $rc == "$expect_rc" ]] || fail "dlckpt-run exited $rc, expected $expect_rc"

if ((expect_rc == 0)); then
  # Every checksum printed (an application that ended before the loss was noticed prints one,
  # and its relaunch another) is the failure-free one.
  got=$(sed -n 's/^checksum: //p' "$OUT/run.log" | sort -u)
  [[ $got == "$ref" ]] || fail "checksum(s) '$got' differ from the failure-free run's '$ref'"
  if ((${#inject[@]})); then
    grep -q "^METRIC recovery_seconds" "$OUT/run.log" || fail "no recovery METRIC line"
    if [[ $SCENARIO == spread ]]; then
      grep -q "(oversubscribed)" "$OUT/run.log" || fail "no line saying the lost node's rank runs oversubscribed"
    fi
    if [[ ${app[0]} == */ckpt_app ]]; then
      grep -q "checkpoint verified" "$OUT/run.log" || fail "ckpt_app did not restart from a verified checkpoint"
    else
      grep -q "^dlckpt: restarted epoch" "$OUT/run.log" || fail "the application did not restart from dlckpt"
    fi
  else
    if ! grep -q "; 0 recovery(ies);" "$OUT/run.log" || grep -q "node killed\|declaring it lost" "$OUT/run.log"; then
      fail "a node loss or a recovery in a failure-free run"
    fi
  fi
elif [[ $SCENARIO == halt ]]; then
  grep -q "halted by SIGUSR1; epoch [0-9]* drained" "$OUT/run.log" || fail "the halt drained nothing"
  "$BIN/dlckpt-store" verify-drained "$OUT/persist" >>"$OUT/run.log" 2>&1 || fail "the drained epoch does not verify"
  log "halted; restarting from $OUT/persist"
  timeout -k 5 150 "$BIN/dlckpt-run" --job "$JOB" --run-dir "$RUN_DIR" --timeout 120 "${layout[@]}" \
    --restart-from "$OUT/persist" -- "${app[@]}" >"$OUT/restart.log" 2>&1 </dev/null ||
    fail "--restart-from after the halt exited $? (log: $OUT/restart.log)"
  got=$(sed -n 's/^checksum: //p' "$OUT/restart.log")
  [[ $got == "$ref" ]] || fail "after the halt and the restart: checksum '$got', failure-free '$ref'"
  grep -q "checkpoint verified" "$OUT/restart.log" || fail "ckpt_app did not restart from a verified checkpoint"
else
  grep -q "unrecoverable: group 0" "$OUT/run.log" || fail "no clear unrecoverable message naming the group"
fi
if [[ $SCENARIO == toomany-persist && $MODE == hosts ]]; then
  grep -q "1 host(s) missing to restart from .*--restart-from" "$OUT/run.log" ||
    fail "no clear error naming the missing hosts"
elif [[ $SCENARIO == toomany-persist ]]; then
  grep -q "restart from the persistent copy: drained epoch" "$OUT/run.log" || fail "no restart from the drained epoch"
fi
grep -qE "^dlckpt-run: +node killed: .*(power-off|--at)" "$OUT/run.log" || ((${#inject[@]} == 0)) ||
  fail "no node was killed"

# A power-off is seen by the heartbeats only (window: see the top).
if ((poweroff)); then
  line=$(grep -m1 "^METRIC heartbeat_detection_seconds" "$OUT/run.log") ||
    fail "the power-off was not detected by heartbeats (no METRIC heartbeat_detection_seconds)"
  d=$(awk '{print $3}' <<<"$line")
  read -r lo hi < <(awk -v t="$hb_timeout" -v p="$HB_PERIOD_S" -v target="$TARGET_DETECT_S" \
    'BEGIN { hi = t + 1.2; if (hi > target) hi = target; print t - 2 * p, hi }')
  awk -v d="$d" -v lo="$lo" 'BEGIN { exit !(d >= lo) }' ||
    fail "power-off detected after $d s with --heartbeat-timeout $hb_timeout: under $lo s (too early)"
  awk -v d="$d" -v hi="$hi" 'BEGIN { exit !(d >= hi) }' &&
    log "note: power-off detected after $d s, over $hi s (machine load: $(cut -d' ' -f1-3 /proc/loadavg))"
  log "power-off detected after $d s (--heartbeat-timeout $hb_timeout; window [$lo, $hi) s)"
  [[ $hb_timeout != 1.5 ]] || METRICS+=("$line")  # the METRIC's target is for the defaults
fi

# Nothing left running (a launcher into a powered-off host ends within a second of its mpiexec),
# no store in any /dev/shm, no run directory.
for _ in $(seq 30); do [[ -z $(job_procs) ]] && break; sleep 0.1; done
left=$(job_procs)
[[ -z $left ]] || fail "processes of the job are still running: $left"
left=$(store_objects)
[[ -z $left ]] || fail "stores left behind: $left"
[[ ! -e $RUN_DIR ]] || fail "run directory $RUN_DIR left behind"

grep -E "^dlckpt-run: +(node killed|recovery|detection)|^dlckpt-run: .*(unrecoverable|declaring)|^METRIC" "$OUT/run.log"
if line=$(grep -m1 "^METRIC recovery_seconds" "$OUT/run.log"); then METRICS+=("$line"); fi
log "recovery $MODE $SCENARIO: ok (checksum $ref)"
