# bench_lib.sh — helpers sourced by the bench scripts that run dlckpt-run jobs
# (spread_bench.sh, spread_delta_bench.sh). Not a program.

# The median of the numbers on stdin, one per line (the lower middle one of
# an even count); nothing for no input.
median() { sort -n | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}'; }

# bench_cleanup_on_exit JOB DIR: when the script ends (or gets INT or TERM),
# kill every `dlckpt-run --job JOB...` left and remove DIR, the jobs' run
# directories /tmp/dlckpt-run.JOB* and their shared memory /dev/shm/dlckpt.JOB*.
bench_cleanup_on_exit() {
  _bench_job=$1 _bench_dir=$2
  trap 'pkill -KILL -f "dlckpt-run --job $_bench_job" 2>/dev/null
        rm -rf "$_bench_dir" /tmp/dlckpt-run."$_bench_job"*
        rm -f /dev/shm/dlckpt."$_bench_job"* 2>/dev/null' EXIT
  trap 'exit 143' INT TERM
}
