#!/usr/bin/env bash
# run_app.sh RUN_DIR APP xor|rs -- APP_ARGS...
# (DLCKPT_RUN_EXTRA: more dlckpt-run options, e.g. --preload, where @TMP@
# stands for a fresh directory removed at the end (--persist @TMP@);
# DLCKPT_RUN_AT: when to kill instead of checkpoint:3, e.g. phase:write:3.)
# Runs APP once failure-free (plain mpiexec-local, 4 ranks) and once under
# RUN_DIR/dlckpt-run on 4 virtual nodes with node vn2 killed right after
# checkpoint 3 (XOR: 1 spare; RS: 2 spares, vn1 and vn2 killed), and checks
# that the recovered run restarted from a checkpoint and printed the
# failure-free run's checksum. Cleans up its processes, stores
# (/dev/shm/dlckpt.<job>.*), SCR and VeloC staging directories and run
# directory.
set -uo pipefail
run_dir=$1 app=$2 scheme=$3
shift 3
[ "${1:-}" = -- ] && shift
job="ia$(basename "$app" | tr -cd 'a-z0-9')${scheme}x$$"
out=$(mktemp)
tmpd=$(mktemp -d)
cleanup() {
  for j in "$job" "${job}ref"; do
    for p in $(grep -ls "DLCKPT_JOB=$j" /proc/[0-9]*/environ 2>/dev/null); do
      p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
    done
    rm -f /dev/shm/dlckpt."$j".*; rm -rf /dev/shm/dlckpt-scr."$j".* "/tmp/dlckpt-run.$j"
    rm -rf /dev/shm/dlckpt-veloc."$j".*
  done
  rm -f "$out"
  rm -rf "$tmpd"
}
trap cleanup EXIT
fail() { echo "FAIL ($(basename "$app") $scheme): $*" >&2; cat "$out" >&2; exit 1; }

ref=$(DLCKPT_JOB="${job}ref" timeout -k 5 60 mpiexec-local -n 4 "$app" "$@" 2>"$out" \
      | sed -n 's/^checksum: //p')
[ -n "$ref" ] || fail "the failure-free run printed no checksum"
rm -f /dev/shm/dlckpt."${job}ref".*
if [ "$scheme" = xor ]; then
  layout=(--nodes 4 --spares 1 --scheme xor); victims=vn2
else
  layout=(--nodes 4 --spares 2 --scheme rs); victims=vn1,vn2
fi
read -r -a extra <<<"${DLCKPT_RUN_EXTRA:-}"
extra=("${extra[@]/@TMP@/$tmpd}")
timeout -k 5 90 "$run_dir/dlckpt-run" --job "$job" "${layout[@]}" "${extra[@]}" --kill-node "$victims" \
  --at "${DLCKPT_RUN_AT:-checkpoint:3}" -- "$app" "$@" >"$out" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "dlckpt-run exited $rc"
got=$(sed -n 's/^checksum: //p' "$out")
[ "$got" = "$ref" ] || fail "checksum '$got' differs from the failure-free run's '$ref'"
grep -q "killing node" "$out" || fail "no node was killed"
grep -q "restarted from iteration" "$out" || fail "the application did not restart from a checkpoint"
ls /dev/shm | grep "^dlckpt\.$job\." >/dev/null && fail "shared memory objects left behind"
grep -E "^dlckpt-run: +(recovery|node killed)" "$out"
echo "run_app $(basename "$app") $scheme: ok (checksum $ref)"
