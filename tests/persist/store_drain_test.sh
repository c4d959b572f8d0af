#!/usr/bin/env bash
# dlckpt-store drain: each node drains its own stores of a stopped job (what
# dlckpt-run's halt runs on every virtual node or host). Two "nodes" n0 and
# n1 with two ranks each, made with dlckpt-store create/put/commit:
#   - n0 alone leaves the epoch incomplete; n1 then publishes the MANIFEST,
#     and verify-drained reads every file back against it;
#   - a second call finds the epoch drained and leaves it;
#   - errors: no --ranks (usage, exit 2), no store of the job on the node,
#     stores at different acknowledged epochs (EPROTO, the stores and
#     --epoch named), a store whose rank is beyond --ranks, an --epoch one
#     store no longer holds; nothing is published then.
# usage: store_drain_test.sh BIN_DIR
set -uo pipefail
bin=$1
st=$bin/dlckpt-store
job="sd$$"
dir=$(mktemp -d -p /var/tmp dlckpt-store-drain.XXXXXX)
out=$(mktemp)
cleanup() { rm -f /dev/shm/dlckpt."$job"* /dev/shm/dlckpt."$job"x* 2>/dev/null; rm -rf "$dir" "$out"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "---- output:" >&2; cat "$out" >&2; exit 1; }

make_store() {  # job node rank epochs...
  local j=$1 n=$2 r=$3 name="/dlckpt.$1.$2.r$3"; shift 3
  "$st" create "$name" --capacity 4M --job "$j" --node "$n" --rank "$r" || fail "create $name"
  for e in "$@"; do
    head -c $((100000 + r * 1000 + e)) /dev/urandom >"$dir/src.$r"
    "$st" put "$name" /ckpt/state.bin "$dir/src.$r" || fail "put $name"
    echo "rank $r epoch $e" | "$st" put "$name" /ckpt/meta.txt || fail "put meta $name"
    "$st" commit "$name" >/dev/null || fail "commit $name"
  done
}
make_store "$job" n0 0 1 2
make_store "$job" n0 1 1 2
make_store "$job" n1 2 1 2
make_store "$job" n1 3 1 2

"$st" drain "$dir/p" --job "$job" --ranks 4 --node n0 >"$out" 2>&1 || fail "drain n0: exit $?"
grep -q "node n0: epoch 2 of 2 rank(s) drained, 4 file(s)" "$out" || fail "drain n0 does not say what it drained"
grep -q "MANIFEST published" "$out" && fail "n0 alone published the MANIFEST"
"$st" drained "$dir/p" >"$out" 2>&1 || fail "drained: exit $?"
grep -qE "^2 +incomplete" "$out" || fail "epoch 2 is not incomplete after n0 alone"
"$st" drain "$dir/p" --job "$job" --ranks 4 --node n1 >"$out" 2>&1 || fail "drain n1: exit $?"
grep -q "MANIFEST published" "$out" || fail "n1 did not publish the MANIFEST"
"$st" verify-drained "$dir/p" >"$out" 2>&1 || fail "verify-drained: exit $?"
grep -q "drained epoch 2 .*4 rank(s), 8 file(s).*every CRC32C matches" "$out" || fail "verify-drained: not the whole epoch"
"$st" drain "$dir/p" --job "$job" --ranks 4 --node n0 >"$out" 2>&1 || fail "second drain: exit $?"
grep -q "epoch 2 of job $job is already drained" "$out" || fail "a second drain does not say the epoch is there"
# The files are the ones the stores hold.
"$st" cat "/dlckpt.$job.n1.r3" /ckpt/state.bin | cmp - "$dir/p/$job/epoch.2/r3/ckpt/state.bin" ||
  fail "the drained file differs from the store's"

# Errors.
"$st" drain "$dir/q" --job "$job" --node n0 >"$out" 2>&1
[ $? = 2 ] || fail "no --ranks: not a usage error"
grep -q "drain needs --ranks" "$out" || fail "no --ranks: not named"
"$st" drain "$dir/q" --job "$job" --ranks 4 --node n7 >"$out" 2>&1 && fail "no store: exit 0"
grep -q "no store of job $job on node n7" "$out" || fail "no store: not named"
make_store "${job}x" n0 0 1 2
make_store "${job}x" n0 1 1
"$st" drain "$dir/q" --job "${job}x" --ranks 2 --node n0 >"$out" 2>&1 && fail "different epochs: exit 0"
grep -q "job ${job}x on node n0: the stores hold different checkpoints (acknowledged epochs 1 to 2: /dlckpt.${job}x.n0.r1 epoch 1, /dlckpt.${job}x.n0.r0 epoch 2): use --epoch \[EPROTO\]" "$out" ||
  fail "different epochs: not said"
"$st" drain "$dir/q" --job "${job}x" --ranks 1 --node n0 --epoch 1 >"$out" 2>&1 && fail "rank beyond --ranks: exit 0"
grep -q "is rank 1 of a job of 1 rank(s)" "$out" || fail "rank beyond --ranks: not said"
"$st" drain "$dir/q" --job "${job}x" --ranks 2 --node n0 --epoch 1 >"$out" 2>&1 && fail "--epoch 1: exit 0"
grep -q "epoch 1 is not committed here" "$out" || fail "--epoch 1 that one store no longer holds: not said"
"$st" drained "$dir/q" 2>/dev/null | grep -q complete && fail "a failed drain published an epoch"
echo "store_drain_test: ok"
