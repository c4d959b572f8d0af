#!/usr/bin/env bash
# The dlckpt demo: sppm-mini (3-D gas dynamics, checkpointing through C++
# streams into /dlckpt) runs under dlckpt-run on 4 virtual nodes plus a spare,
# once without failures and once with node vn2 killed in the middle of the run.
# Its checkpoint is rebuilt on the spare from XOR parity, the application is
# relaunched there and finishes with the same checksum.
#
#   bash apps/demo.sh [BUILD_DIR]      (default: build)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
run="$build/bin/dlckpt-run"
app="$build/bin/sppm-mini-dlckpt"
for f in "$run" "$app"; do
  [ -x "$f" ] || { echo "demo: $f is missing; build first (see README.md)" >&2; exit 1; }
done
args=(--n 32 --iters 24 --sleep-ms 100)
layout=(--nodes 4 --ranks-per-node 1 --spares 1 --scheme xor)

echo "== 1. failure-free run: sppm-mini on 4 virtual nodes (vn0-vn3), spare vn4"
quiet() { grep --line-buffered -v -E '^(checkpoint: iteration|step )' | tee /dev/stderr; }
ref=$(timeout -k 5 120 "$run" "${layout[@]}" -- "$app" "${args[@]}" 2>&1 | quiet | sed -n 's/^checksum: //p')

echo
echo "== 2. the same run, node vn2 killed 1.5 s after the start (its processes and memory)"
got=$(timeout -k 5 120 "$run" "${layout[@]}" --kill-node vn2 --at time:1.5 -- "$app" "${args[@]}" 2>&1 \
      | quiet | sed -n 's/^checksum: //p')

echo
echo "failure-free checksum:    $ref"
echo "with node vn2 killed:     $got"
if [ -n "$ref" ] && [ "$ref" = "$got" ]; then
  echo "demo: OK — the run survived the node loss with the same answer"
else
  echo "demo: FAILED — the checksums differ" >&2
  exit 1
fi
