#!/usr/bin/env bash
# Error paths of job-wide checkpoints of dlckpt-fuse mounts, against a codec
# the test launches on the virtual nodes vn0..vn2 and the spare vn3 (one
# namespace, DLCKPT_NODE per process, a coordinated mount per node at
# $TMP/mnt/<node>). Every failure must be a clear error (exit status 1, or 2
# for bad usage, and a message naming the mount, rank or node and the cause)
# that leaves every store at its previous acknowledged epoch with nothing
# pending:
#  - no codec: none configured, a rendezvous file that never appears, a codec
#    that is gone (its rendezvous file stale), a codec that refuses the
#    layout (a node without a codec process);
#  - mismatched epochs: one store acknowledged an epoch the others lack
#    (refused; --allow-mismatch proceeds); an interrupted checkpoint left
#    pending on some mounts (dropped) or on all (completed);
#  - a mount missing; a mount that checkpoints locally;
#  - dlckpt-ctl run: a mount point that is busy; an encode that times out
#    after every mount committed (the codec stopped with SIGSTOP): the epoch
#    stays pending (the codec may still finish it), every store keeps its
#    acknowledged epoch, and the next checkpoint completes it first; a command that ends while
#    the others ask for a checkpoint; a daemon that dies.
#
# usage: fuse_codec_errors_test.sh BIN_DIR
set -euo pipefail
BIN_DIR="$1"
source "$(dirname "$0")/lib.sh"
J=$TEST_JOB
CTL="$BIN_DIR/dlckpt-ctl"
export TMPDIR="$TMP"
CODEC_PID=""
out="$TMP/out"

cleanup_hook() {
  if [ -n "$CODEC_PID" ]; then kill -KILL -- "-$CODEC_PID" 2>/dev/null; fi
  for p in $(grep -ls "DLCKPT_JOB=$J" /proc/[0-9]*/environ 2>/dev/null | grep -v "^/proc/$$/" |
             sed 's|^/proc/||; s|/environ$||'); do
    kill -9 "$p" 2>/dev/null
  done
  rm -f /dev/shm/dlckpt."$J".*
}

# start_mount NODE RANK [dlckpt-fuse options]: a mount of store (J, NODE, RANK).
start_mount() {
  local node=$1 rank=$2
  shift 2
  local m="$TMP/mnt/$node" store="/dlckpt.$J.$node.r$rank"
  mkdir -p "$m"
  MOUNTS+=("$m")
  STORES+=("$store")
  mount_fs "$m" "$store" --job "$J" --node "$node" --rank "$rank" --capacity 16M "$@"
}

start_codec() {
  local args=() n
  rm -f "$TMP/rv"
  for n in vn0 vn1 vn2 vn3; do
    [ ${#args[@]} -eq 0 ] || args+=(:)
    args+=(-n 1 -env DLCKPT_NODE "$n" "$BIN_DIR/dlckpt-codec" --job "$J" --rendezvous "$TMP/rv")
  done
  setsid mpiexec -launcher fork -genv DLCKPT_JOB "$J" "${args[@]}" >>"$TMP/codec.log" 2>&1 &
  CODEC_PID=$!
  for _ in $(seq 300); do [ -e "$TMP/rv" ] && return 0; sleep 0.1; done
  fail "the codec did not start: $(cat "$TMP/codec.log")"
}

stop_codec() {
  kill -TERM -- "-$CODEC_PID" 2>/dev/null || true
  wait "$CODEC_PID" 2>/dev/null || true
  CODEC_PID=""
}

# mpi NODES -- ARGS...: runs dlckpt-ctl ARGS on each node (one process each);
# output in $out, status in $rc.
mpi() {
  local nodes=() args=() n
  while [ "$1" != "--" ]; do nodes+=("$1"); shift; done
  shift
  for n in "${nodes[@]}"; do
    [ ${#args[@]} -eq 0 ] || args+=(:)
    args+=(-n 1 -env DLCKPT_NODE "$n" "$CTL" "$@")
  done
  rc=0
  timeout -k 5 90 mpiexec -launcher fork -genv DLCKPT_JOB "$J" "${args[@]}" >"$out" 2>&1 || rc=$?
  ! grep -q "AddressSanitizer\|LeakSanitizer\|runtime error" "$out" || fail "sanitizer report: $(cat "$out")"
}
ckall() { mpi vn0 vn1 vn2 -- checkpoint-all --mount "$TMP/mnt/{node}" "$@"; }

# expect RC PATTERN WHAT: the last command exited RC and printed PATTERN.
expect() {
  [ "$rc" = "$1" ] || fail "$3: exit status $rc, expected $1: $(cat "$out")"
  grep -q -- "$2" "$out" || fail "$3: no '$2' in: $(cat "$out")"
  echo "ok: $3: $(grep -m1 -- "$2" "$out")"
}

# The epochs "acknowledged/pending" of the given nodes' mounts.
epochs() {
  local n s=""
  for n in "$@"; do
    s+=$(awk '/^acknowledged_epoch:/ { a = $2 } /^pending_epoch:/ { p = $2 } END { print a "/" p }' \
         "$TMP/mnt/$n/.dlckpt/status")" "
  done
  echo "${s% }"
}
expect_epochs() {  # WANT NODES...
  local want=$1 got
  shift
  got=$(epochs "$@")
  [ "$got" = "$want" ] || fail "epochs of $* are '$got', expected '$want'"
}

for r in 0 1 2; do
  start_mount "vn$r" "$r" --checkpoint coordinated
  head -c $((100000 + r * 999)) /dev/urandom > "$TMP/mnt/vn$r/state.bin"
done
start_codec

# A job-wide checkpoint that works.
ckall --rendezvous "$TMP/rv"
expect 0 "^1$" "first checkpoint"
expect_epochs "1/0 1/0 1/0" vn0 vn1 vn2
[ -e "/dev/shm/dlckpt.$J.vn3.parity0" ] || fail "no parity on the spare vn3"
# A coordinated mount's own trigger, without dlckpt-ctl run: refused.
rc=0
"$CTL" checkpoint "$TMP/mnt/vn0" >"$out" 2>&1 || rc=$?
expect 1 "checkpoints are coordinated" "a local trigger on a coordinated mount"

# No codec.
ckall
expect 2 "no codec service" "no rendezvous"
ckall --rendezvous "$TMP/missing" --rendezvous-timeout 1
expect 1 "$TMP/missing" "a rendezvous file that never appears"
expect_epochs "1/0 1/0 1/0" vn0 vn1 vn2

# Mismatched epochs: vn1's store acknowledged epoch 7 on its own.
for cmd in "commit 7" "ack 7"; do echo "$cmd" > "$TMP/mnt/vn1/.dlckpt/epoch"; done
ckall --rendezvous "$TMP/rv"
expect 1 "different checkpoints" "mismatched epochs"
grep -q "mount $TMP/mnt/vn1 (rank 1, node vn1) epoch 7" "$out" || fail "the mismatch does not name vn1: $(cat "$out")"
expect_epochs "1/0 7/0 1/0" vn0 vn1 vn2
ckall --rendezvous "$TMP/rv" --allow-mismatch
expect 0 "^8$" "--allow-mismatch"
expect_epochs "8/0 8/0 8/0" vn0 vn1 vn2

# An interrupted checkpoint: pending on two mounts only (dropped), then on all
# three (completed: encoded again and acknowledged before the new epoch).
for n in vn0 vn2; do echo "commit 9" > "$TMP/mnt/$n/.dlckpt/epoch"; done
expect_epochs "8/9 8/0 8/9" vn0 vn1 vn2
ckall --rendezvous "$TMP/rv"
expect 0 "^10$" "pending epochs on some mounts"
grep -q "dropping pending epochs" "$out" || fail "no note about the dropped epochs: $(cat "$out")"
for n in vn0 vn1 vn2; do echo "commit 11" > "$TMP/mnt/$n/.dlckpt/epoch"; done
ckall --rendezvous "$TMP/rv"
expect 0 "^12$" "pending epochs on every mount"
grep -q "completing epoch 11" "$out" || fail "no note about completing epoch 11: $(cat "$out")"
expect_epochs "12/0 12/0 12/0" vn0 vn1 vn2

# A mount missing, then a mount that checkpoints locally.
unmount_fs "$TMP/mnt/vn2"
ckall --rendezvous "$TMP/rv"
expect 1 "rank 2 on node vn2: mount $TMP/mnt/vn2 is not a dlckpt-fuse mount" "a missing mount"
expect_epochs "12/0 12/0" vn0 vn1
start_mount vn2 2
ckall --rendezvous "$TMP/rv"
expect 1 "mount $TMP/mnt/vn2 (rank 2, node vn2) checkpoints locally" "a local mount"
expect_epochs "12/0 12/0 12/0" vn0 vn1 vn2
unmount_fs "$TMP/mnt/vn2"
start_mount vn2 2 --checkpoint coordinated

# A node the codec does not run on: the codec refuses the layout.
start_mount vn7 3 --checkpoint coordinated
mpi vn0 vn1 vn2 vn7 -- checkpoint-all --mount "$TMP/mnt/{node}" --rendezvous "$TMP/rv" --allow-mismatch
expect 1 "runs on node vn7, where no codec process runs" "a node without a codec process"
expect_epochs "12/0 12/0 12/0 0/0" vn0 vn1 vn2 vn7
unmount_fs "$TMP/mnt/vn7"

# The codec gone: its rendezvous file is stale.
cp "$TMP/rv" "$TMP/rv.stale"
stop_codec
ckall --rendezvous "$TMP/rv.stale"
expect 1 "Connection refused" "a codec that is gone"
expect_epochs "12/0 12/0 12/0" vn0 vn1 vn2

# dlckpt-ctl run: a busy mount point stops every process, leaving nothing mounted.
start_codec
unmount_fs "$TMP/mnt/vn1"
unmount_fs "$TMP/mnt/vn2"
cat > "$TMP/true.sh" <<'EOF'
#!/bin/sh
exit 0
EOF
chmod +x "$TMP/true.sh"
mpi vn0 vn1 vn2 -- run --mount "$TMP/mnt/{node}" --rendezvous "$TMP/rv" -- "$TMP/true.sh"
expect 1 "starting the mounts: rank 0 on node vn0: mount point $TMP/mnt/vn0: already a mount point" "a busy mount point"
for n in vn1 vn2; do ! is_mounted "$TMP/mnt/$n" || fail "$n stayed mounted after the failed start"; done
unmount_fs "$TMP/mnt/vn0"

# dlckpt-ctl run: an encode that times out after every mount committed.
cat > "$TMP/stall.sh" <<'EOF'
#!/usr/bin/env bash
# Checkpoints; then rank 0 stops the codec and all ask again (must fail with
# every store still at the first epoch); then rank 0 resumes it and all ask again.
set -u
ctl=$1 job=$2 log=$3
m=$DLCKPT_MOUNT r=$DLCKPT_RANK
state() { awk '/^acknowledged_epoch:/ { a = $2 } /^pending_epoch:/ { p = $2 } END { print a "/" p }' "$m/.dlckpt/status"; }
# Signals the job's codec processes (each in a session of its own under Hydra).
codec() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = dlckpt-codec ] || continue
    tr '\0' '\n' < "$p/environ" 2>/dev/null | grep -qx "DLCKPT_JOB=$job" && kill "$1" "${p#/proc/}"
  done
}
e1=$("$ctl" checkpoint "$m") || { echo "rank $r: first checkpoint failed" >> "$log"; exit 1; }
[ "$r" = 0 ] && codec -STOP
if "$ctl" checkpoint "$m" 2> "$log.r$r"; then echo "rank $r: checkpoint with a stopped codec worked" >> "$log"; exit 1; fi
after=$(state)
[ "$r" = 0 ] && codec -CONT
e3=$("$ctl" checkpoint "$m") || { echo "rank $r: checkpoint after the codec resumed failed" >> "$log"; exit 1; }
echo "rank $r: first $e1, after the failure $after, then $e3" >> "$log"
EOF
chmod +x "$TMP/stall.sh"
: > "$TMP/stall.log"
mpi vn0 vn1 vn2 -- run --mount "$TMP/mnt/{node}" --rendezvous "$TMP/rv" --encode-timeout 2 -- \
    "$TMP/stall.sh" "$CTL" "$J" "$TMP/stall.log"
[ "$rc" = 0 ] || fail "dlckpt-ctl run with a stalled encode: exit $rc: $(cat "$out" "$TMP/stall.log")"
for r in 0 1 2; do
  grep -q "^rank $r: first 13, after the failure 13/14, then 15$" "$TMP/stall.log" ||
    fail "rank $r: $(cat "$TMP/stall.log")"
  grep -q "encode of epoch 14.*ETIMEDOUT" "$TMP/stall.log.r$r" ||
    fail "rank $r: the failed checkpoint does not name the encode timeout: $(cat "$TMP/stall.log.r$r")"
done
for n in vn0 vn1 vn2; do ! is_mounted "$TMP/mnt/$n" || fail "$n stayed mounted after dlckpt-ctl run"; done
grep -q "completing epoch 14, left pending by an interrupted checkpoint (encoding it again)" "$out" ||
  fail "epoch 14 was not completed by the next checkpoint: $(cat "$out")"
echo "ok: a stalled encode: $(head -c 600 "$TMP/stall.log.r0")"

# dlckpt-ctl run: one command ends while the others ask for a checkpoint.
cat > "$TMP/early.sh" <<'EOF'
#!/usr/bin/env bash
set -u
[ "$DLCKPT_RANK" = 1 ] && exit 0
if "$1" checkpoint "$DLCKPT_MOUNT" 2> "$2.r$DLCKPT_RANK"; then exit 1; fi
grep -q "the command of another process ended" "$2.r$DLCKPT_RANK"
EOF
chmod +x "$TMP/early.sh"
mpi vn0 vn1 vn2 -- run --mount "$TMP/mnt/{node}" --rendezvous "$TMP/rv" -- "$TMP/early.sh" "$CTL" "$TMP/early"
[ "$rc" = 0 ] || fail "a command that ended early: exit $rc: $(cat "$out" "$TMP"/early.r*)"

# dlckpt-ctl run: a daemon dies (rank 2 kills its own): its command is stopped,
# and the others' checkpoint requests fail; every process exits 1.
cat > "$TMP/lost.sh" <<'EOF'
#!/usr/bin/env bash
set -u
if [ "$DLCKPT_RANK" = 2 ]; then
  kill -9 "$(awk '/^pid:/ { print $2 }' "$DLCKPT_MOUNT/.dlckpt/status")"
  sleep 60
  exit 0
fi
if "$1" checkpoint "$DLCKPT_MOUNT" 2> "$2.r$DLCKPT_RANK"; then exit 0; fi
exit 5
EOF
chmod +x "$TMP/lost.sh"
SECONDS=0
mpi vn0 vn1 vn2 -- run --mount "$TMP/mnt/{node}" --rendezvous "$TMP/rv" -- "$TMP/lost.sh" "$CTL" "$TMP/lost"
expect 1 "mount lost: rank 2 on node vn2: the dlckpt-fuse daemon of $TMP/mnt/vn2 ended (signal Killed)" "a daemon that dies"
[ "$SECONDS" -lt 30 ] || fail "the command of the lost mount was not stopped"
for r in 0 1; do
  grep -q "mount lost: rank 2 on node vn2" "$TMP/lost.r$r" || fail "rank $r: $(cat "$TMP/lost.r$r")"
done
for n in vn0 vn1 vn2; do ! is_mounted "$TMP/mnt/$n" || fail "$n stayed mounted"; done
stop_codec
echo "fuse_codec_errors_test: ok"
