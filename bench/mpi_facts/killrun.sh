#!/usr/bin/env bash
# killrun.sh LAUNCHER ARGS... PROGRAM: runs the launcher (4 ranks of loop.c),
# SIGKILLs rank 2 a second after it started, and prints the launcher's exit
# status, how long after the kill it exited, and when the last rank was gone
# (not a zombie). docs/design.md, "MPICH and Open MPI". E.g.
#   mpicc.openmpi -o loop loop.c && ./killrun.sh mpirun.openmpi --oversubscribe -np 4 ./loop
#   mpicc.mpich -o loop_mpich loop.c && ./killrun.sh mpiexec.mpich -launcher fork -n 4 ./loop_mpich
# (as root, Open MPI wants OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.)
set -u
out=$(mktemp)
trap 'rm -f "$out"' EXIT
setsid timeout -k 2 60 "$@" >"$out" 2>&1 &
launcher=$!
for _ in $(seq 100); do grep -q "rank 3$" "$out" && break; sleep 0.1; done
sleep 1
pids=$(awk '/^pid/ {print $2}' "$out")
victim=$(awk '/rank 2$/ {print $2}' "$out")
[ -n "$victim" ] || { cat "$out"; echo "no rank 2"; exit 1; }
alive() { local n=0 p st; for p in $pids; do st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null); [ -n "$st" ] && [ "$st" != Z ] && n=$((n + 1)); done; echo $n; }
t0=$(date +%s.%N)
kill -9 "$victim"
wait "$launcher"
rc=$?
t1=$(date +%s.%N)
t2=$t1
while [ "$(alive)" != 0 ]; do sleep 0.01; t2=$(date +%s.%N); done
printf 'launcher exit %d after %.3f s; every rank gone after %.3f s\n' "$rc" "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t0" | bc)"
