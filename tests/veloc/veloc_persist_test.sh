#!/usr/bin/env bash
# dlckpt-run --veloc-config (issue 34): veloc_app under dlckpt-run with a
# VeloC configuration file whose persistent directory is a fresh one.
#   1. persistent_interval = 0 and max_versions = 2: checkpoints are drained
#      to DIR/<job>/epoch.<E>/ (--persist DIR --persist-every 1
#      --persist-keep 2), at most two complete epochs are kept, the run ends
#      with the failure-free checksum, and the keys without a dlckpt meaning
#      (ec_interval = -1, failure_domain) are reported once each, by
#      dlckpt-run (not again by VELOC_Init on rank 0);
#   2. --persist-every 4 on the command line wins over the file: only epochs
#      4 and 8 are drained.
# usage: veloc_persist_test.sh BIN_DIR APP
set -uo pipefail
bin=$1 app=$2
job="vpersist$$"
dir=$(mktemp -d -p /var/tmp dlckpt-veloc-persist.XXXXXX)
out=$(mktemp)
cleanup() {
  # Processes of this test's jobs ($job, ${job}r, ${job}b) only: environ entries are NUL-separated.
  for p in $(grep -lzx "DLCKPT_JOB=${job}[rb]\?" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    [ "$p" = $$ ] || kill -9 "$p" 2>/dev/null
  done
  for j in "$job" "${job}r" "${job}b"; do
    rm -f /dev/shm/dlckpt."$j".* /dev/shm/dlckpt-parity."$j".* 2>/dev/null
    rm -rf /dev/shm/dlckpt-veloc."$j".* /dev/shm/dlckpt-ompi."$j" "/tmp/dlckpt-run.$j"
  done
  rm -rf "$dir" "$out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "---- output:" >&2; cat "$out" >&2; exit 1; }
checksum() { sed -n 's/^checksum: //p' "$out" | tail -1; }
# The epoch numbers drained under DIR/JOB, in order.
epochs() { ls "$1" 2>/dev/null | sed -n 's/^epoch\.\([0-9]*\)$/\1/p' | sort -n | tr '\n' ' '; }

cat >"$dir/veloc.cfg" <<CFG
# VeloC's keys (its user guide)
scratch = /dev/shm
persistent = $dir/pfs
persistent_interval = 0
max_versions = 2
mode = sync
ec_interval = -1
failure_domain = rack1
CFG
A=("$app" "$dir/veloc.cfg" --iters 8 --sleep-ms 50)
run() {  # run JOB OPTIONS... : dlckpt-run on 2 virtual nodes and a spare
  local j=$1
  shift
  timeout -k 5 100 "$bin/dlckpt-run" --job "$j" --nodes 2 --spares 1 --veloc-config "$dir/veloc.cfg" "$@" \
    -- "${A[@]}" >"$out" 2>&1
}

# The failure-free checksum, without the second level.
timeout -k 5 100 "$bin/dlckpt-run" --job "${job}r" --nodes 2 --spares 1 -- "${A[@]}" >"$out" 2>&1 ||
  fail "the run without --veloc-config exited $?"
ref=$(checksum)
[ -n "$ref" ] || fail "no checksum"
[ ! -e "$dir/pfs" ] || fail "without --veloc-config something was drained to $dir/pfs"

# 1. The file's persistent directory, every checkpoint, two kept.
run "$job" || fail "--veloc-config: exit $?"
[ "$(checksum)" = "$ref" ] || fail "checksum $(checksum), failure-free $ref"
grep -q "drained to $dir/pfs: epoch(s) [0-9]" "$out" || fail "the summary lists no epoch drained to $dir/pfs"
jd=$dir/pfs/$job
got=$(epochs "$jd")
[ -n "$got" ] || fail "no epoch directory in $jd"
for e in $got; do
  [ -f "$jd/epoch.$e/MANIFEST" ] || fail "epoch $e has no MANIFEST"
done
n=$("$bin/dlckpt-store" drained "$dir/pfs" | grep -c ' complete ')
[ "$n" -ge 1 ] && [ "$n" -le 2 ] || fail "$n complete drained epochs, expected 1 or 2 (max_versions = 2)"
# Epoch 8, the last, is drained unless the previous drain still ran (then skipped, reported).
for key in "ec_interval = -1" "failure_domain = rack1"; do
  c=$(grep -c "^dlckpt-run: VeloC configuration file $dir/veloc.cfg:[0-9]*: $key is ignored by dlckpt: " "$out")
  [ "$c" = 1 ] || fail "'$key' reported $c times, expected once"
done
! grep -q "is not used by VELOC_Init" "$out" || fail "VELOC_Init reported the keys dlckpt-run read"
! grep "is ignored" "$out" | grep -q -e "scratch =" -e "persistent =" -e "persistent_interval =" \
    -e "max_versions =" -e "mode =" || fail "a mapped key was reported as ignored"

# 2. The command line wins over the file: epochs 4 and 8 only.
run "${job}b" --persist-every 4 || fail "--veloc-config --persist-every 4: exit $?"
[ "$(checksum)" = "$ref" ] || fail "--persist-every 4: checksum $(checksum), failure-free $ref"
got=$(epochs "$dir/pfs/${job}b")
[ -n "$got" ] || fail "--persist-every 4: nothing drained"
for e in $got; do
  [ $((e % 4)) = 0 ] || fail "--persist-every 4 on the command line: epoch $e drained ($got)"
done
echo "veloc_persist: ok (drained epochs $(epochs "$jd")and $got; checksum $ref)"
