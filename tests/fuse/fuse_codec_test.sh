#!/usr/bin/env bash
# dlckpt-fuse with the codec under dlckpt-run, end to end (issue 7). An
# unmodified job (fuse_codec_node.sh: cp, dd, shell redirections) runs on the
# virtual nodes vn0..vn2 of one namespace, one dlckpt-fuse mount per node at
# $TMP/mnt/<node>, under `dlckpt-run -- dlckpt-ctl run`; after every step it
# asks for a checkpoint, which dlckpt-ctl run takes job-wide and the codec
# encodes onto a spare (vn3; vn4 is the other spare). dlckpt-run kills vn1
# after checkpoint 2 (its processes, its dlckpt-fuse daemon, its shared
# memory), restores the survivors to epoch 2, rebuilds vn1's store on a spare
# and relaunches. Every node's mount, the spare's serving the rebuilt store,
# must show the files of checkpoint 2 byte for byte (cmp against copies kept
# aside), and the job goes on to take two more checkpoints, encoded with
# parity again. Then the kept stores, mounted again, must hold the last step
# byte for byte, and nothing may be left running or mounted.
#
# SCENARIO "checkpoint" (default) kills vn1 right after checkpoint 2;
# "encode" kills it while the codec encodes checkpoint 3, which is then lost:
# the job restarts from checkpoint 2 as well.
#
# usage: fuse_codec_test.sh BIN_DIR [SCENARIO]
set -euo pipefail
BIN_DIR="$1"
case "${2:-checkpoint}" in
  checkpoint) at=checkpoint:2 ;;
  encode) at=phase:encode:3 ;;
  *) echo "unknown scenario $2" >&2; exit 2 ;;
esac
source "$(dirname "$0")/lib.sh"
NODE_SH="$(cd "$(dirname "$0")" && pwd)/fuse_codec_node.sh"
aside="$TMP/aside"
out="$TMP/run.log"
for n in vn0 vn1 vn2 vn3 vn4; do MOUNTS+=("$TMP/mnt/$n"); done

# Processes of the job, by their environment (as dlckpt-run finds them).
leftovers() {
  grep -ls "DLCKPT_JOB=$TEST_JOB" /proc/[0-9]*/environ 2>/dev/null | grep -v "^/proc/$$/" |
    sed 's|^/proc/||; s|/environ$||' || true
}
cleanup_hook() {
  for p in $(leftovers); do kill -9 "$p" 2>/dev/null; done
  rm -f /dev/shm/dlckpt."$TEST_JOB".*
  rm -rf "/tmp/dlckpt-run.$TEST_JOB"
}
show() { echo "---- dlckpt-run output:" >&2; cat "$out" >&2; }

# The coordinators' sockets go below $TMP (removed at exit even if killed).
export TMPDIR="$TMP"
rc=0
setsid timeout -k 5 240 "$BIN_DIR/dlckpt-run" --job "$TEST_JOB" --nodes 3 --spares 2 --capacity 16M \
  --keep --kill-node vn1 --at "$at" -- \
  "$BIN_DIR/dlckpt-ctl" run --mount "$TMP/mnt/{node}" -- "$NODE_SH" "$BIN_DIR/dlckpt-ctl" "$aside" 4 \
  >"$out" 2>&1 || rc=$?
[ "$rc" = 0 ] || { show; fail "dlckpt-run exited $rc"; }
! grep -q "AddressSanitizer\|LeakSanitizer\|runtime error" "$out" || { show; fail "sanitizer report"; }

# The node was lost and recovered once.
grep -q "node killed: vn1 (--at $at)" "$out" || { show; fail "vn1 was not killed"; }
grep -q "recovery 1: " "$out" || { show; fail "no recovery"; }
grep -q "^METRIC recovery_seconds" "$out" || { show; fail "no recovery METRIC line"; }
spare=$(sed -n 's/^dlckpt-run: recovery 1: .*rebuild group 0 member vn1 on \(vn[34]\)$/\1/p' "$out")
[ -n "$spare" ] || { show; fail "vn1 was not rebuilt on a spare"; }
# Each mount showed checkpoint 2 byte for byte after the recovery: the
# survivors restored in place, vn1's store rebuilt on the spare.
for who in "rank 0 on vn0" "rank 1 on $spare" "rank 2 on vn2"; do
  grep -q "node $who: restarted from epoch 2: verified step 2, [0-9]* files byte for byte" "$out" ||
    { show; fail "$who did not restart from checkpoint 2 byte for byte"; }
  grep -q "node $who: done: step 4" "$out" || { show; fail "$who did not finish step 4"; }
done
# Two more checkpoints after the recovery.
e3=$(sed -n "s/^node rank 1 on $spare: step 3 is epoch //p" "$out")
e4=$(sed -n "s/^node rank 1 on $spare: step 4 is epoch //p" "$out")
[ -n "$e3" ] && [ -n "$e4" ] && [ "$e4" -gt "$e3" ] && [ "$e3" -gt 2 ] ||
  { show; fail "no checkpoints after the recovery (epochs '$e3', '$e4')"; }
for r in 0 2; do
  grep -q "node rank $r on vn$r: step 4 is epoch $e4\$" "$out" || { show; fail "rank $r has another epoch"; }
done
run_dir="/tmp/dlckpt-run.$TEST_JOB"
grep -q "rebuilt" "$run_dir/codec.log" || { show; fail "the codec log shows no rebuild"; }
# ... and the other spare holds their parity.
for e in 1 2 "$e3" "$e4"; do
  grep -q "codec encode-end $e 0\$" "$run_dir/events" || { show; fail "epoch $e was not encoded"; }
done
! grep -q "protection" "$out" || { show; fail "the job ran without full protection after the recovery"; }

# Nothing left running; every mount unmounted: the live ones by their daemons,
# vn1's (whose daemon died with its node) by dlckpt-run, not left dead.
sleep 0.2
[ -z "$(leftovers)" ] || fail "processes of the job are still running: $(leftovers)"
grep -q "unmounted $TMP/mnt/vn1, the dlckpt-fuse mount of node vn1" "$out" ||
  { show; fail "dlckpt-run did not unmount the killed node's mount"; }
for n in vn0 vn1 vn2 "$spare"; do
  ! is_mounted "$TMP/mnt/$n" || fail "$TMP/mnt/$n is still mounted"
done
[ ! -e /dev/shm/dlckpt."$TEST_JOB".vn1.r1 ] || fail "the killed node's store survived"

# The kept stores, mounted again: the last step, byte for byte.
declare -A node_of=([0]=vn0 [1]=$spare [2]=vn2)
acks=()
for r in 0 1 2; do
  store="/dlckpt.$TEST_JOB.${node_of[$r]}.r$r"
  [ -e "/dev/shm${store}" ] || fail "store $store is missing"
  new_mountpoint check
  mount_fs "$check" "$store"
  diff -r "$aside/r$r/step4" "$check" || fail "store $store differs from the last step kept aside"
  acks+=("$(awk '/^acknowledged_epoch:/ { print $2 }' "$check/.dlckpt/status")")
  unmount_fs "$check"
done
[ "${acks[*]}" = "$e4 $e4 $e4" ] || fail "the stores hold epochs ${acks[*]}, not $e4"

grep -E "^dlckpt-run:|^METRIC|restarted from|done:" "$out"
echo "fuse_codec_test: ok (vn1 rebuilt on $spare from epoch 2; epochs $e3 and $e4 after the recovery)"
