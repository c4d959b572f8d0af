#!/usr/bin/env bash
# dlckpt-run --launcher srun on a private one-node Slurm cluster (slurm_cluster.sh):
# the codec service and sppm-mini run as Slurm job steps (srun --mpi=pmi2),
# virtual nodes on this host. Each scenario must end with the checksum of a
# failure-free run: XOR with one node killed after checkpoint 3, RS (2 parities)
# with two nodes killed at once, and a rank crash (no node lost). --hosts slurm
# inside an allocation too small for the layout must fail with a clear message.
#
# usage: slurm_run_test.sh BIN_DIR
set -uo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
"$here/slurm_cluster.sh" check || exit $?
cluster=$(mktemp -d /tmp/dlckpt-slurm.XXXXXX)
job="slurm$$"
out=$(mktemp)
cleanup() {
  "$here/slurm_cluster.sh" stop "$cluster"
  for j in "$job"x "$job"r "$job"c "$job"h "${job}ref"; do
    for p in $(grep -ls "DLCKPT_JOB=$j" /proc/[0-9]*/environ 2>/dev/null); do
      p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
    done
    rm -f /dev/shm/dlckpt."$j".*; rm -rf "/tmp/dlckpt-run.$j"
  done
  rm -f "$out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$out" >&2; exit 1; }

conf=$("$here/slurm_cluster.sh" start "$cluster") || { echo "$conf"; fail "the Slurm cluster did not start"; }
export "${conf?}"
echo "private Slurm cluster up: $SLURM_CONF ($(sinfo -h -o '%P %D %T'))"

app="$bin/sppm-mini-dlckpt"
args=(--iters 12 --sleep-ms 60 --ckpt-every 1)
ref=$(DLCKPT_JOB="${job}ref" UCX_TLS=self,sm timeout -k 5 120 mpiexec -launcher fork -n 4 "$app" "${args[@]}" \
      2>/dev/null | sed -n 's/^checksum: //p')
rm -f /dev/shm/dlckpt."${job}ref".*
[ -n "$ref" ] || fail "the failure-free run printed no checksum"

run() {  # NAME JOB EXPECT... -- dlckpt-run options
  local name=$1 j=$2; shift 2
  echo "== $name"
  timeout -k 5 240 "$bin/dlckpt-run" --launcher srun --job "$j" -v "$@" -- "$app" "${args[@]}" >"$out" 2>&1
  local rc=$?
  [ "$rc" = 0 ] || fail "$name: dlckpt-run exited $rc"
  grep -q -- "--mpi=pmi2" "$out" || fail "$name: the jobs were not launched with srun"
  local got
  got=$(sed -n 's/^checksum: //p' "$out")
  [ "$got" = "$ref" ] || fail "$name: checksum '$got' differs from the failure-free run's '$ref'"
  grep -q "restarted from iteration" "$out" || fail "$name: the application did not restart from a checkpoint"
  if ls /dev/shm | grep -q "^dlckpt\.$j\."; then fail "$name: shared memory objects left behind"; fi
  if squeue -h | grep -q .; then fail "$name: Slurm jobs left behind: $(squeue -h)"; fi
  grep -E "recovery 1|^dlckpt-run: (killing|crashing)" "$out" | head -3
}

run "xor: vn1 killed after checkpoint 3" "$job"x --nodes 4 --spares 1 --kill-node vn1 --at checkpoint:3
grep -q "recovery 1: restore epoch 3; lost node(s) vn1" "$out" || fail "xor: no rebuild of vn1 at epoch 3"
run "rs: vn0 and vn2 killed at once" "$job"r --nodes 4 --spares 2 --scheme rs --kill-node vn0,vn2 \
  --at checkpoint:4
grep -q "recovery 1: restore epoch 4; lost node(s) vn0 vn2; rebuild group 0 member vn0 on vn4" "$out" || fail "rs: no rebuild of vn0 and vn2"
run "rank 2 crashes (no node lost)" "$job"c --nodes 4 --spares 1 --crash-rank 2 --at checkpoint:2
grep -q "crashing application rank 2 (--at checkpoint:2)$" "$out" || fail "crash: rank 2 was not found (PMI_RANK)"

echo "== --hosts slurm in a one-host allocation"
timeout -k 5 60 salloc --quiet -N 1 "$bin/dlckpt-run" --job "$job"h --launcher srun --hosts slurm --nodes 2 --spares 1 \
  -- /bin/true >"$out" 2>&1
rc=$?
[ "$rc" = 5 ] || fail "--hosts slurm in an allocation of one host for 3 nodes: exit $rc, not 5"
grep -q "the allocation has 1 host(s) ($(hostname -s)) but --nodes + --spares is 3" "$out" ||
  fail "--hosts slurm: no clear message"
cat "$out"
[ -e "/tmp/dlckpt-run.${job}h" ] && fail "a failed setup left its run directory behind"
echo "slurm_run_test: ok"
