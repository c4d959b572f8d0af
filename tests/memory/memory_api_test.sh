#!/usr/bin/env bash
# memory_api_test.sh BIN: runs the memory interface's contract test (BIN,
# memory_api_test.c) on 2 ranks under plain mpiexec, with its own job name,
# and removes its stores whatever happened (dlckpt_finalize removes them when
# the test gets there).
set -uo pipefail
job="memapi$$"
trap 'rm -f /dev/shm/dlckpt.$job.*' EXIT
DLCKPT_JOB=$job timeout -k 5 50 mpiexec -launcher fork -n 2 "$1"
