#!/usr/bin/env bash
# dlckpt-run --launcher srun --hosts slurm across a Slurm cluster of virtual
# hosts (tests/vhost): slurmctld on the head, one slurmd in each host s-0..s-4,
# the test inside `salloc -N 5 --no-kill`. The codec service and sppm-mini run
# as job steps placed host by host (--distribution=arbitrary); host s-1 is
# crashed after checkpoint 3 (every process and its memory gone); the lost store
# is rebuilt on the spare host and the application, relaunched there through
# srun, must end with the checksum of a failure-free run. The crash takes a
# moment to land, and checkpoints go on meanwhile: the epoch restored must be
# the newest one whose encode completed before the recovery began, as the
# job's events (dlckpt-run -v) record, and at least 3.
#
# Scenario "spread" (issue 32): no spare host, parity spread over the five
# members (--spares 0 --parity spread); s-1's rank is relaunched through srun
# on a surviving host, oversubscribed, with the same checksum.
#
# usage: slurm_vhost_test.sh BIN_DIR [spares|spread]
set -uo pipefail
bin=$1 scenario=${2:-spares}
case "$scenario" in
  spares) layout=(--nodes 4 --spares 1); ranks=4 ;;
  spread) layout=(--nodes 5 --spares 0 --parity spread); ranks=5 ;;
  *) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
VH=$here/../vhost/dlckpt-vhost
"$here/slurm_cluster.sh" check || exit $?
if ! msg=$("$VH" check 2>&1); then echo "SKIP: $msg"; exit 77; fi
"$VH" gc
P=sv$(( $$ % 1000 ))
job="slurmvh${scenario:0:2}$$"
# Shared with the hosts (their /tmp is private), like an NFS home.
cluster=$(mktemp -d /var/tmp/dlckpt-slurmvh.XXXXXX)
out=$cluster/run.log
cleanup() {
  local rc=$?
  trap - EXIT
  [ "$rc" = 0 ] || { echo "---- dlckpt-run output:"; cat "$out" 2>/dev/null; tail -20 "$cluster"/slurm*.log 2>/dev/null; }
  "$here/slurm_cluster.sh" stop "$cluster/slurm"
  "$VH" down --name "$P" >/dev/null
  for p in $(grep -ls "DLCKPT_JOB=$job" /proc/[0-9]*/environ 2>/dev/null); do
    p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
  done
  rm -f /dev/shm/dlckpt."$job".* /dev/shm/dlckpt."${job}ref".*
  rm -rf "$cluster"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "killed by a signal"; exit 143' TERM INT HUP
fail() { echo "FAIL: $*" >&2; exit 1; }

app=("$bin/sppm-mini-dlckpt" --iters 12 --sleep-ms 80 --ckpt-every 1)
ref=$(DLCKPT_JOB="${job}ref" UCX_TLS=self,sm timeout -k 5 120 mpiexec -launcher fork -n "$ranks" "${app[@]}" \
      2>/dev/null | sed -n 's/^checksum: //p')
rm -f /dev/shm/dlckpt."${job}ref".*
[ -n "$ref" ] || fail "the failure-free run printed no checksum"

tmp_opt=()
case "$(cd "$bin" && pwd)/" in /tmp/*) tmp_opt=(--shared-tmp) ;; esac  # a build tree in /tmp
"$VH" up --name "$P" -n 5 --owner $$ "${tmp_opt[@]}" >/dev/null || fail "dlckpt-vhost up failed"
head=$("$VH" head --name "$P")
net=${head%.*}
nodes=()
for i in 0 1 2 3 4; do nodes+=("$P-$i=$net.$((10 + i))"); done
# Steps reach back to srun on the head through the bridge.
conf=$(DLCKPT_SLURMCTLD_ADDR=$head DLCKPT_SLURMD_EXEC="$VH exec {node} --" \
       "$here/slurm_cluster.sh" start "$cluster/slurm" "${nodes[@]}") || { echo "$conf"; fail "Slurm did not start"; }
export "${conf?}"
echo "Slurm over virtual hosts: $(sinfo -h -o '%P %D %T %N')"

# The MPI_Finalize fix for MPICH + UCX over TCP (tests/vhost/README.md) goes to every
# rank through srun's environment.
fix=${DLCKPT_VHOST_UCX_FIX:-$bin/../lib/libdlckpt_vhost_ucxfix.so}
[ -f "$fix" ] || fail "$fix not built"
t=$SECONDS
timeout -k 5 240 salloc --quiet -N 5 --no-kill \
  "$bin/dlckpt-run" --job "$job" --run-dir "$cluster/run" --timeout 180 --launcher srun --hosts slurm \
  "${layout[@]}" --heartbeat-address "$head" --kill-command "$VH {how} {node}" \
  --srun-args "--export=ALL,LD_PRELOAD=$fix" --kill-node "$P-1" --at checkpoint:3 -v -- "${app[@]}" \
  >"$out" 2>&1 </dev/null
rc=$?
echo "dlckpt-run exited $rc after $((SECONDS - t)) s"
[ "$rc" = 0 ] || fail "dlckpt-run exited $rc"
got=$(sed -n 's/^checksum: //p' "$out")
[ "$got" = "$ref" ] || fail "checksum '$got' differs from the failure-free run's '$ref'"
grep -q "hosts of the Slurm allocation: $P-0,$P-1,$P-2,$P-3,$P-4" "$out" || fail "not the allocation's hosts"
protected=$(sed -n '/event: codec recover-begin/q; s/^dlckpt-run: event: codec encode-end \([0-9]*\) 0$/\1/p' "$out" | tail -1)
[ -n "$protected" ] && [ "$protected" -ge 3 ] || fail "no encode of checkpoint 3 or later completed before the recovery"
if [ "$scenario" = spares ]; then
  grep -q "recovery 1: restore epoch $protected; lost node(s) $P-1; rebuild group 0 member $P-1 on $P-4" "$out" ||
    fail "no rebuild of $P-1 on $P-4 restoring epoch $protected, the newest protected at the crash"
else
  grep -Eq "recovery 1: restore epoch $protected; lost node\(s\) $P-1; rebuild group 0 member $P-1 on $P-[0234]; no spare node left: $P-[0234] now runs ranks [0-9,]+ \(oversubscribed\)" "$out" ||
    fail "no rebuild of $P-1 on a survivor (oversubscribed) restoring epoch $protected, the newest protected at the crash"
fi
grep -q "restarted from iteration" "$out" || fail "the application did not restart from a checkpoint"
[ -n "${DLCKPT_TEST_VERBOSE:-}" ] && grep -v "event:" "$out"
echo "restored epoch $protected, the newest protected when $P-1 crashed"
grep -E "^dlckpt-run: (killing|recovery|  )|^METRIC" "$out"
echo "slurm_vhost_test $scenario: ok"
