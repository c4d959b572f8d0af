#!/usr/bin/env bash
# An app under dlckpt-run loses node(s) at a seeded random time (XOR: one data
# node; RS with 2 parities: two data nodes at once) and must finish with the
# checksum of a failure-free run of the same binary. With COMPRESS lz4 the
# stores compress their data (dlckpt-run --compress lz4) and the node(s) die
# right after checkpoint 3 instead: parity is computed over compressed images
# and the lost stores are rebuilt from them (the run must say so); at the end
# every store must be an lz4 store that verifies, and for heat2d (mostly
# zeros after 16 iterations) they must hold fewer bytes of blocks than their
# files hold.
#
# usage: app_node_kill_test.sh BIN_DIR APP xor|rs SEED [none|lz4]
set -uo pipefail
bin=$1 app=$2 scheme=$3 seed=$4 compress=${5:-none}
job="ak${app//[^a-z0-9]/}${scheme}${seed}${compress}x$$"
out=$(mktemp)
cleanup() {
  for j in "$job" "${job}ref"; do
    for p in $(grep -ls "DLCKPT_JOB=$j" /proc/[0-9]*/environ 2>/dev/null); do
      p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
    done
    rm -f /dev/shm/dlckpt."$j".*; rm -rf "/tmp/dlckpt-run.$j"
  done
  rm -f "$out"
}
trap cleanup EXIT
fail() { echo "FAIL ($app $scheme seed $seed): $*" >&2; cat "$out" >&2; exit 1; }

args=(--iters 16 --sleep-ms 80 --ckpt-every 1)
RANDOM=$seed
epoch=$(( 2 + RANDOM % 10 ))      # after this checkpoint ...
delay=$(( RANDOM % 150 ))          # ... plus this many ms, somewhere in the next iteration
n1=$(( RANDOM % 4 )); n2=$(( (n1 + 1 + RANDOM % 3) % 4 ))
if [ "$scheme" = xor ]; then
  layout=(--nodes 4 --spares 1 --scheme xor); victims="vn$n1"
else
  layout=(--nodes 4 --spares 2 --scheme rs); victims="vn$n1,vn$n2"
fi
at="checkpoint:$epoch+0.$(printf %03d $delay)"
if [ "$compress" != none ]; then
  at=checkpoint:3
  [ "$app" = heat2d ] && args+=(--ckpt-every 2)  # its default, 20, is past --iters
fi

ref=$(DLCKPT_JOB="${job}ref" timeout -k 5 120 mpiexec-local -n 4 "$bin/$app-dlckpt" "${args[@]}" 2>/dev/null \
      | sed -n 's/^checksum: //p')
rm -f /dev/shm/dlckpt."${job}ref".*
[ -n "$ref" ] || fail "the failure-free run printed no checksum"
echo "killing $victims at $at"
keep=()
[ "$compress" = none ] || keep=(--keep --compress "$compress")
timeout -k 5 240 "$bin/dlckpt-run" --job "$job" "${layout[@]}" --kill-node "$victims" --at "$at" \
  "${keep[@]}" -- "$bin/$app-dlckpt" "${args[@]}" >"$out" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "dlckpt-run exited $rc"
got=$(sed -n 's/^checksum: //p' "$out")
[ "$got" = "$ref" ] || fail "checksum '$got' differs from the failure-free run's '$ref'"
grep -q "killing node" "$out" || fail "no node was killed (the run ended before $at)"
grep -q "restarted from iteration" "$out" || fail "the application did not restart from a checkpoint"
if [ "$compress" != none ]; then
  grep -q "recovery 1: restore epoch 3; lost node(s).*; rebuild group" "$out" || fail "no rebuild of epoch 3"
  bytes=0 blocks=0 stores=0
  for s in /dev/shm/dlckpt."$job".*.r*; do
    [ -e "$s" ] || continue
    name=/${s#/dev/shm/}
    st=$("$bin/dlckpt-store" stat "$name") || fail "dlckpt-store stat $name"
    grep -q "^compression: $compress" <<<"$st" || fail "$name is not a $compress store"
    "$bin/dlckpt-store" verify "$name" >/dev/null || fail "$name does not verify"
    bs=$(sed -n 's/^block_size: //p' <<<"$st")
    fb=$(sed -n 's/^epoch_file_bytes: //p' <<<"$st") eb=$(sed -n 's/^epoch_blocks: //p' <<<"$st")
    [ -n "$fb" ] && [ -n "$eb" ] || fail "$name holds no committed epoch"
    bytes=$(( bytes + fb )) blocks=$(( blocks + eb * bs ))
    stores=$(( stores + 1 ))
  done
  [ "$stores" = 4 ] || fail "$stores stores at the end, not 4"
  echo "stores hold $blocks bytes of blocks for $bytes bytes of files"
  if [ "$app" = heat2d ] && [ "$blocks" -ge "$bytes" ]; then fail "nothing was compressed"; fi
  rm -f /dev/shm/dlckpt."$job".*
fi
if ls /dev/shm | grep -q "^dlckpt\.$job\."; then fail "shared memory objects left behind"; fi
grep -E "^dlckpt-run: +(recovery|node killed)|^METRIC" "$out"
echo "app_node_kill_test $app $scheme seed $seed: ok (checksum $ref)"
