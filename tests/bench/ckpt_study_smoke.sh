#!/usr/bin/env bash
# Smoke run of the checkpoint study (bench/ckpt_study.py --smoke): tiny
# configurations, every step runs (baselines, IOR table, checkpoints,
# recoveries, model), the CSVs exist, dlckpt-plan reads the bench file, the
# METRIC lines appear, and nothing is left behind. The figures mean nothing.
#
# usage: ckpt_study_smoke.sh SOURCE_DIR BIN_DIR
set -uo pipefail
src=$1 bin=$2
out=$(mktemp -d)
log=$(mktemp)
py=/usr/bin/python3; [ -x "$py" ] || py=python3
prefix="smoke$$"
trap 'rm -rf "$out" "$log"' EXIT
fail() { echo "FAIL: $*" >&2; echo "---- output:" >&2; cat "$log" >&2; exit 1; }

"$py" "$src/bench/ckpt_study.py" --smoke --bin "$bin" --out "$out" --job-prefix "$prefix" >"$log" 2>&1 \
  || fail "the study failed"
for f in raw.json ckpt_study.csv recovery.csv baselines.csv ior.csv model.csv plan_bench.csv summary.md; do
  [ -s "$out/$f" ] || fail "no $f"
done
grep -q "^# machine: .* cores" "$out/ckpt_study.csv" || fail "ckpt_study.csv does not name the machine"
[ "$(grep -vc '^#' "$out/ckpt_study.csv")" = 3 ] || fail "ckpt_study.csv: expected a header and 2 rows"
[ "$(grep -vc '^#' "$out/recovery.csv")" = 3 ] || fail "recovery.csv: expected a header and 2 rows"
grep -q "^METRIC model_prediction_error_max [0-9.]* % target <= 20" "$log" || fail "no model METRIC"
grep -q "^METRIC ckpt_throughput_more_groups_vs_1 " "$log" || fail "no scaling METRIC"
grep -q "^METRIC ckpt_encode_speedup_vs_mpi_reduce " "$log" || fail "no MPI_Reduce METRIC"
"$bin/dlckpt-plan" --nodes 40 --spares 4 --mttf-hours 43800 --phases 100 --runs 0 \
  --bench "$out/plan_bench.csv" >>"$log" 2>&1 || fail "dlckpt-plan does not read plan_bench.csv"
sleep 0.2
ls /dev/shm | grep -q "^dlckpt\.$prefix" && fail "shared memory left: $(ls /dev/shm | grep "^dlckpt.$prefix")"
[ -z "$(grep -ls "DLCKPT_JOB=$prefix" /proc/[0-9]*/environ 2>/dev/null | grep -v "/proc/$$/")" ] \
  || fail "processes of the study still running"
ls -d /tmp/dlckpt-run."$prefix"* 2>/dev/null && fail "run directories left"
grep -E "^METRIC|^\| " "$log" | head -40
echo "ckpt_study_smoke: ok"
