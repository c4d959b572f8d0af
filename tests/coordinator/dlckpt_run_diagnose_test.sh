#!/usr/bin/env bash
# What dlckpt-run tells a new user (issue 21, items 6-9):
#   notlinked  a binary without dlckpt and without --preload: a warning that it
#              never called dlckpt_init, and the summary says so; under
#              --preload the warning says an unmodified program takes no checkpoint;
#   noprogram  a program that does not exist: refused before any launch (exit
#              5), never treated as a node failure;
#   appfails   an application that fails before dlckpt_init: its own status,
#              no recovery;
#   notdone    --at checkpoint:99 on a shorter run: the summary names the kill
#              that never happened; a planned kill explains Hydra's banner.
#   usage      an unknown option gets the closest known one and
#              exit 2; --help (exit 0) documents the options.
#   othermpi   (issue 33) a program linked with the other MPI than dlckpt's
#              (mpicc.openmpi for an MPICH build, mpicc.mpich for an Open MPI
#              one) is refused before anything starts (exit 5), naming its
#              MPI library, dlckpt's MPI and the fix; the same program built
#              with dlckpt's MPI runs as one job of 2 ranks;
#   progress   (item 12) commits, encodes and a rebuild report their progress
#              (DLCKPT_PROGRESS_AFTER=0 instead of 2 s, so that short ones do):
#              one line per step, ending with the whole length.
#
# usage: dlckpt_run_diagnose_test.sh BIN_DIR TEST_BIN_DIR SCENARIO
set -uo pipefail
bin=$1 tbin=$2 scenario=$3
job="dg${scenario//[^a-z0-9]/}$$"
out=$(mktemp)
cleanup() {
  rm -f /dev/shm/dlckpt."$job".* 2>/dev/null
  rm -rf "/tmp/dlckpt-run.$job" "$out"
}
trap cleanup EXIT
fail() { echo "FAIL ($scenario): $*" >&2; echo "---- output:" >&2; cat "$out" >&2; exit 1; }
run() { timeout -k 5 120 "$bin/dlckpt-run" --job "$job" "$@" >"$out" 2>&1; }

case "$scenario" in
notlinked)
  # heat2d without dlckpt: /dlckpt does not exist for it, so it fails at once.
  run --nodes 2 --spares 1 -- "$bin/heat2d" --nx 32 --ny 32 --iters 4 --ckpt-every 2
  rc=$?
  [ $rc = 2 ] || fail "exit $rc, expected heat2d's 2"
  grep -q "failed before dlckpt_init.*link it with dlckpt or run it with --preload" "$out" ||
    fail "no hint to link the application or to use --preload"
  grep -q "recovery 1" "$out" && fail "an unlinked binary's failure was treated as a node failure"
  # A program that ends well without ever calling dlckpt_init.
  run --nodes 2 --spares 1 -- true
  rc=$?
  [ $rc = 0 ] || fail "true: exit $rc"
  grep -q "warning: the application never called dlckpt_init.*--preload" "$out" || fail "no warning about dlckpt_init"
  grep -q "summary of job $job: exit 0 (the application never called dlckpt_init); 0 checkpoint(s)" "$out" ||
    fail "the summary does not say the application never called dlckpt_init"
  # Under --preload the hint to use --preload would be wrong: say what is true.
  run --preload --nodes 2 --spares 1 -- true
  rc=$?
  [ $rc = 0 ] || fail "true under --preload: exit $rc"
  grep -q "warning: the application never called dlckpt_init.*under --preload.*takes no checkpoint.*dlckpt-ctl checkpoint" "$out" ||
    fail "under --preload, no warning that an unmodified program takes no checkpoint"
  grep -q "or run it with --preload" "$out" && fail "under --preload, the warning still suggests --preload"
  ;;
noprogram)
  run --nodes 2 --spares 1 -- ./no-such-program-$$ --x
  rc=$?
  [ $rc = 5 ] || fail "exit $rc, expected 5"
  grep -q "program ./no-such-program-$$ .*No such file or directory" "$out" || fail "no message naming the program"
  grep -q "recovery" "$out" && fail "a missing program was treated as a failure to recover from"
  run --nodes 2 --spares 1 -- no-such-program-$$
  [ $? = 5 ] || fail "a program not in PATH: exit $?, expected 5"
  grep -q "'no-such-program-$$' is not in PATH" "$out" || fail "no message about PATH"
  ;;
othermpi)
  # The help whole first: grep -q would end the pipe early (SIGPIPE under pipefail).
  help=$("$bin/dlckpt-run" --help)
  if [[ $help == *mpiexec.mpich* ]]; then own="MPICH" other=openmpi other_name="Open MPI"
  else own="Open MPI" other=mpich other_name="MPICH"; fi
  command -v "mpicc.$other" >/dev/null || { echo "mpicc.$other is not installed: skipped"; exit 77; }
  src=$(mktemp -d)
  trap 'cleanup; rm -rf "$src"' EXIT
  cat >"$src/hello.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
  int r, s;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  printf("hello: rank %d of %d\n", r, s);
  MPI_Finalize();
  return 0;
}
EOF
  "mpicc.$other" "$src/hello.c" -o "$src/hello_other" || fail "mpicc.$other failed"
  own_cc="$bin/../mpi-bin/mpicc"  # dlckpt's MPI's wrapper (cmake/mpi.cmake), whatever PATH says
  [ -x "$own_cc" ] || own_cc=mpicc
  "$own_cc" "$src/hello.c" -o "$src/hello_own" || fail "$own_cc (dlckpt's MPI) failed"
  run --nodes 2 --spares 1 -- "$src/hello_other"
  rc=$?
  [ $rc = 5 ] || fail "a program of $other_name under a $own dlckpt: exit $rc, expected 5"
  grep -q "$src/hello_other is linked with $other_name (.*), and dlckpt is built with $own: .*each rank 0 of 1.*-DDLCKPT_MPI=" \
    "$out" || fail "no message naming the program's MPI, dlckpt's and the fix"
  grep -q "^hello:" "$out" && fail "the program was started"
  run --nodes 2 --spares 1 -- "$src/hello_own"
  rc=$?
  [ $rc = 0 ] || fail "the program built with $own: exit $rc"
  grep -q "^hello: rank 1 of 2" "$out" || fail "the program built with $own did not run as one job of 2 ranks"
  echo "othermpi: $(grep -m1 "is linked with" "$out" || true)"
  ;;
appfails)
  run --nodes 2 --spares 1 -- sh -c 'exit 7'
  rc=$?
  [ $rc = 7 ] || fail "exit $rc, expected the application's 7"
  grep -q "failed before dlckpt_init.*not a node failure" "$out" || fail "no message"
  grep -q "recovery 1" "$out" && fail "a failure before dlckpt_init was treated as a node failure"
  ;;
notdone)
  run --nodes 3 --spares 1 --kill-node vn1 --at checkpoint:2 --kill-node vn2 --at checkpoint:99 -- \
    "$tbin/ckpt_app" --iters 4 --kib 64 --sleep-ms 20
  rc=$?
  [ $rc = 0 ] || fail "exit $rc"
  grep -q "not done: --kill-node vn2 --at checkpoint:99 (the run ended before that happened)" "$out" ||
    fail "the summary does not name the kill that never happened"
  grep -q "not done: --kill-node vn1" "$out" && fail "the kill that happened is listed as not done"
  grep -q 'BAD TERMINATION" report of mpiexec above is about the ranks of the node killed on purpose' "$out" ||
    fail "no line explaining Hydra's banner after the planned kill"
  ;;
config)
  # A configuration file, the environment over it, the command line over both.
  conf=$(mktemp)
  printf '# test\nnodes = 2\nspares 1\nencode = async\nkill-node vn1\nat checkpoint:2\n' >"$conf"
  DLCKPT_NODES=3 DLCKPT_CONFIG=$conf run --ranks-per-node 1 -- "$tbin/ckpt_app" --iters 4 --kib 64 --sleep-ms 10
  rc=$?
  rm -f "$conf"
  [ $rc = 0 ] || fail "exit $rc"
  grep -q "job $job: 3 data node(s)" "$out" || fail "DLCKPT_NODES=3 did not override the file's nodes = 2"
  grep -q "async encode:" "$out" || fail "the file's encode = async was not used"
  grep -q "killing node vn1 (--at checkpoint:2)" "$out" || fail "the file's kill was not done"
  printf 'nodes 2\nbogus 1\n' >"$conf"
  run --config "$conf" -- true
  rc=$?
  rm -f "$conf"
  [ $rc = 2 ] || fail "an unknown option in the file: exit $rc, expected 2"
  grep -q "configuration file $conf:2: unknown option --bogus" "$out" || fail "the error does not name the file and line"
  ;;
usage)
  run --node 4 -- true
  rc=$?
  [ $rc = 2 ] || fail "--node: exit $rc, expected 2"
  grep -q "unknown option --node; did you mean --nodes?" "$out" || fail "no suggestion for --node"
  conf=$(mktemp)
  printf 'nodes 2\nspraes 1\n' >"$conf"
  run --config "$conf" -- true
  rc=$?
  rm -f "$conf"
  [ $rc = 2 ] || fail "a typo in the file: exit $rc, expected 2"
  grep -q "configuration file $conf:2: unknown option --spraes; did you mean --spares?" "$out" ||
    fail "no suggestion with FILE:LINE for the file's typo"
  "$bin/dlckpt-run" --help >"$out" 2>&1
  rc=$?
  [ $rc = 0 ] || fail "--help: exit $rc"
  for o in "--nodes N" "--kill-node N1\[,N2\] --at WHEN" "--mpiexec-args \"ARGS\"" "--halt JOB" "-v,--verbose"; do
    grep -q -- "^  $o" "$out" || fail "--help does not document $o"
  done
  grep -q "DLCKPT_STORE_CAPACITY" "$out" || fail "--help does not name the variables"
  ;;
progress)
  DLCKPT_PROGRESS_AFTER=0 run --nodes 4 --spares 2 --group-size 2 --kill-node vn1 --at checkpoint:2 -- \
    "$bin/heat2d-dlckpt" --nx 512 --ny 512 --iters 20 --ckpt-every 5 || fail "exit $?"
  grep -qE "^dlckpt-run: encode of epoch 1: [0-9.]+ MiB of [0-9.]+ MiB" "$out" || fail "no progress of encode 1"
  grep -qE "^dlckpt-run: encode of epoch 1: ([0-9.]+) MiB of \1 MiB, .*done in" "$out" || fail "encode 1 does not end whole"
  grep -qE "^dlckpt-run: commit of epoch 1: done in [0-9.]+ s" "$out" || fail "no progress of commit 1"
  grep -qE "^dlckpt-run: rebuild of epoch 2 on vn[45]: ([0-9.]+) MiB of \1 MiB, .*done in" "$out" ||
    fail "no progress of the rebuild"
  ;;
*) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac
[ ! -e "/tmp/dlckpt-run.$job" ] || fail "run directory left behind"
ls /dev/shm | grep -q "^dlckpt\.$job\." && fail "shared memory objects left"
grep -E "^dlckpt-run:" "$out"
echo "dlckpt_run_diagnose_test $scenario: ok"
