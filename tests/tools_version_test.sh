#!/usr/bin/env bash
# Every dlckpt-* executable in BIN_DIR answers `--version` with one line
# "<tool> VERSION" and `--help` with usage on stdout, both exiting 0 without
# doing anything else (a tool that starts working instead times out and fails).
# Usage: tools_version_test.sh BIN_DIR VERSION
set -uo pipefail
bin_dir="$1"
version="$2"
failures=0
count=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

for tool in "$bin_dir"/dlckpt-*; do
  [ -f "$tool" ] && [ -x "$tool" ] || continue
  name=$(basename "$tool")
  count=$((count + 1))
  out=$(timeout -k 2 10 "$tool" --version </dev/null 2>/dev/null)
  rc=$?
  if [ "$rc" -ne 0 ]; then
    fail "$name --version exited $rc"
  elif ! printf '%s\n' "$out" | head -n 1 | grep -qF "$name $version"; then
    fail "$name --version printed '$out', expected '$name $version'"
  fi
  out=$(timeout -k 2 10 "$tool" --help </dev/null 2>/dev/null)
  rc=$?
  if [ "$rc" -ne 0 ]; then
    fail "$name --help exited $rc"
  elif [ -z "$out" ]; then
    fail "$name --help printed nothing on stdout"
  fi
done

[ "$count" -gt 0 ] || fail "no dlckpt-* executables in $bin_dir"
[ "$failures" -eq 0 ] || exit 1
echo "ok: $count tools answer --version and --help"
