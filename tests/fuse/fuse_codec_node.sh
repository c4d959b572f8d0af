#!/usr/bin/env bash
# One process of an unmodified "application" for the FUSE + codec tests, run
# by `dlckpt-ctl run` with DLCKPT_MOUNT, DLCKPT_RANK, DLCKPT_NODE and
# DLCKPT_RESTARTED_EPOCH set. It links nothing of dlckpt: plain cp, dd, shell
# redirections and appends write its checkpoint files into the mount, and
# `dlckpt-ctl checkpoint $DLCKPT_MOUNT` asks for a job-wide checkpoint after
# every step.
#
# Every write also goes to a mirror outside memfs; before each checkpoint the
# mirror is copied aside as ASIDE/rRANK/stepN, and the mount records N in the
# file "step". When restarted from a checkpoint, the process reads the step
# from its mount and compares the whole mount with the copy of that step,
# byte for byte (same file list, cmp of every file), then continues. After
# its last step it checks the mount once more.
#
# usage: fuse_codec_node.sh CTL ASIDE STEPS [PAUSE_SECONDS]
set -euo pipefail
ctl=$1 aside=$2 steps=$3 pause=${4:-0.3}
r=$DLCKPT_RANK m=$DLCKPT_MOUNT
mine="$aside/r$r"
work="$mine/work"
mkdir -p "$mine"

say() { echo "node rank $r on $DLCKPT_NODE: $*"; }
die() { say "FAIL: $*" >&2; exit 1; }

# compare_with DIR: the mount holds exactly DIR's files, byte for byte.
compare_with() {
  local ref=$1 f n=0
  diff <(cd "$ref" && find . -type f | sort) <(cd "$m" && find . -type f | sort) >&2 ||
    die "the files in $m differ from $ref"
  while read -r f; do
    cmp "$ref/$f" "$m/$f" || die "$m/$f differs from the copy kept aside"
    n=$((n + 1))
  done < <(cd "$ref" && find . -type f | sort)
  echo "$n"
}

step=0
if [ "$DLCKPT_RESTARTED_EPOCH" -gt 0 ]; then
  [ -f "$m/step" ] || die "restarted from epoch $DLCKPT_RESTARTED_EPOCH but $m/step is missing"
  step=$(cat "$m/step")
  [ -d "$mine/step$step" ] || die "no copy aside of step $step"
  n=$(compare_with "$mine/step$step")
  say "restarted from epoch $DLCKPT_RESTARTED_EPOCH: verified step $step, $n files byte for byte"
  rm -rf "$work"
  cp -a "$mine/step$step" "$work"
else
  rm -rf "$work"
  mkdir -p "$work"
  [ -z "$(ls -A "$m")" ] || die "a fresh mount is not empty: $(ls -A "$m")"
fi

while [ "$step" -lt "$steps" ]; do
  step=$((step + 1))
  # Rewritten every step with cp (a write-only open that truncates).
  head -c $((200000 + r * 7000 + step * 13)) /dev/urandom > "$work/state.bin"
  cp "$work/state.bin" "$m/state.bin"
  # A new file per step in a subdirectory, with dd and 64 KiB records.
  mkdir -p "$work/steps" "$m/steps"
  dd if=/dev/urandom of="$work/steps/s$step.dat" bs=4k count=$((10 + step)) status=none
  dd if="$work/steps/s$step.dat" of="$m/steps/s$step.dat" bs=64k status=none
  # Patched in place (the cached read-write path).
  if [ "$step" -gt 1 ]; then
    head -c 3000 /dev/urandom > "$mine/patch"
    for d in "$work" "$m"; do
      dd if="$mine/patch" of="$d/steps/s1.dat" bs=1000 seek=7 conv=notrunc status=none
    done
  fi
  # Appended with a shell redirection; the step number in a small file.
  for d in "$work" "$m"; do
    echo "rank $r step $step" >> "$d/log.txt"
    echo "$step" > "$d/step"
  done
  # Removed: what a checkpoint no longer holds.
  if [ "$step" -gt 2 ]; then rm "$work/steps/s2.dat" "$m/steps/s2.dat" 2>/dev/null || true; fi
  rm -rf "$mine/step$step"
  cp -a "$work" "$mine/step$step"
  epoch=$("$ctl" checkpoint "$m") || die "checkpoint of step $step failed"
  say "step $step is epoch $epoch"
  sleep "$pause"
done
n=$(compare_with "$mine/step$step")
say "done: step $step, $n files byte for byte"
