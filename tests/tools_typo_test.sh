#!/usr/bin/env bash
# A mistyped option of a dlckpt tool is a usage error (exit 2) whose message
# names the closest option: "unknown option --capacty; did you mean --capacity?".
# Each line below is a tool, a command line with one typo, and the suggestion;
# a tool not built in BIN_DIR is skipped.
# Usage: tools_typo_test.sh BIN_DIR
set -uo pipefail
bin_dir="$1"
failures=0
count=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

while IFS='|' read -r tool args want; do
  [ -x "$bin_dir/$tool" ] || continue
  count=$((count + 1))
  # shellcheck disable=SC2086  # the arguments are words
  err=$(timeout -k 2 10 "$bin_dir/$tool" $args </dev/null 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 2 ]; then
    fail "$tool $args exited $rc, expected 2 ($err)"
  elif ! grep -qF -- "did you mean $want?" <<< "$err"; then
    fail "$tool $args: '$err' does not suggest $want"
  fi
done <<'TABLE'
dlckpt-fuse|/nonexistent-mount --store /dlckpt.typo.n.r0 --capacty 1G|--capacity
dlckpt-fuse|/nonexistent-mount --max_file 4|--max_files
dlckpt-ctl|checkpoint-all --no-codec --mout /mnt/ckpt|--mount
dlckpt-ctl|run --no-codec --mount /m --fuse-opt -f -- true|--fuse-option
dlckpt-store|ls /dlckpt.typo.n.r0 --epoc 1|--epoch
dlckpt-store|--blocksize 4K create /dlckpt.typo.n.r0|--block-size
dlckpt-codec|--rendezvous /tmp/r --group-sise 4|--group-size
dlckpt-heartbeat|bench --node 10|--nodes
dlckpt-heartbeat|monitor --job j --nodes a --timeout 100|--timeout-ms
TABLE

[ "$count" -gt 0 ] || fail "none of the tools is in $bin_dir"
[ "$failures" -eq 0 ] || exit 1
echo "ok: $count mistyped command lines got a suggestion"
