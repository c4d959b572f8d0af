#!/usr/bin/env bash
# run_two_ranks.sh BIN ARGS...: runs a self-checking test program on 2 ranks
# under plain mpiexec (no dlckpt-run, no codec: checkpoints are committed
# locally) with a job name of its own, and removes the job's stores and VeloC
# staging directories whatever happened (the program's finalize removes them
# when it gets there).
set -uo pipefail
job="memapi$$"
trap 'rm -f /dev/shm/dlckpt.$job.*; rm -rf /dev/shm/dlckpt-veloc.$job.*' EXIT
DLCKPT_JOB=$job timeout -k 5 50 mpiexec -launcher fork -n 2 "$@"
