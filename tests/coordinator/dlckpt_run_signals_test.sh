#!/usr/bin/env bash
# dlckpt-run as a batch system or a user stops it, and as a second user or a
# second run meets it: real processes, real signals.
#
#   term|int|hup  the signal while the application checkpoints: dlckpt-run exits
#                 128 + N, its summary says "terminated by SIG...", and no process,
#                 store or run directory of the job is left (polled up to 10 s)
#   launching     SIGTERM while dlckpt-run waits for the codec service's rendezvous
#   recovering    SIGTERM during a recovery's rebuild
#   second        an application that ignores SIGTERM, --term-grace 60: the first
#                 SIGTERM leaves dlckpt-run waiting, a second one ends everything
#   keep          SIGTERM with --keep: no process left, the stores and the run
#                 directory stay
#   busy          a second run with the same --job is refused (exit 6, naming the
#                 lock and the first run's pid) and the first ends normally
#   status        the summary's exit status is the process's: success, refused
#                 option (no summary), unrecoverable, a codec that keeps dying
#   limits        --nodes 5000 on this machine and --capacity 0 are refused with
#                 a message and nothing is started or created
#   rundir        a planted run directory (another owner, mode 0777, a symbolic
#                 link) is refused and left as it was; the default job id is
#                 unguessable
#   hostage       the supervisor held by a call that never returns (a
#                 --kill-command that hangs): two SIGTERMs end it within
#                 --term-grace (+ a margin), the hung command included, nothing left
#   fifo          --persist DIR whose epoch.1/MANIFEST is a FIFO: whatever the
#                 application's drains and the halt's drain block on, two SIGTERMs
#                 end dlckpt-run within --term-grace (+ a margin), nothing left
#   drainhang     the halt's drain (dlckpt-store drain on the nodes) hangs and
#                 ignores SIGTERM: a second SIGTERM ends dlckpt-run within
#                 --term-grace (+ a margin), exit 3 (nothing drained), nothing left
#   usr1          SIGUSR1 without --persist: nothing drained, exit 3 (not 7)
#   halt          dlckpt-run --halt JOB from another shell (SCR's scr_halt): a job
#                 that does not run, a left-over run directory and another user's
#                 are refused (exit 1, naming the path and the errno); a running
#                 --persist job is told (exit 0, saying it drains and exits 7),
#                 drains and exits 7; once it ended, --halt is refused again
#   maxfiles      --max-files 16 --preload: the ranks' stores hold 16 entries, the
#                 17th create fails ENOSPC and the rank's stderr names the full
#                 table and DLCKPT_MAX_FILES; the application's status is the run's
#   planted       a store of the job planted by another uid before the run: the
#                 EPERM is named, the run exits 5 (set-up; not the application's
#                 own status, 3 for the apps, nor "recovery impossible") and
#                 the planted store is left as it was
#   syncsummary   a sync run stopped while its last encode runs: the summary
#                 says "checkpoints: 3 committed, 2 protected", no "async encode"
#
# usage: dlckpt_run_signals_test.sh BIN_DIR TEST_BIN_DIR SCENARIO
set -uo pipefail
bin=$1 tbin=$2 scenario=$3
job="rs${scenario}$$"
out=$(mktemp) out2=$(mktemp) tmpd=$(mktemp -d)
app=("$tbin/ckpt_app" --iters 40 --kib 256 --sleep-ms 100 --write-pieces 2)
started=()  # dlckpt-run processes this test started

procs_of() {  # processes of job $1: its environment or its command line
  { grep -ls "DLCKPT_JOB=$1" /proc/[0-9]*/environ 2>/dev/null | grep -v "^/proc/$$/" | sed 's,^/proc/,,; s,/.*,,'
    pgrep -f -- "$1"; } | sort -u
}
shm_of() { ls /dev/shm 2>/dev/null | grep "^dlckpt\.$1\." ; }
cleanup() {
  for p in "${started[@]}"; do kill -9 "$p" 2>/dev/null; done
  for j in "$job" "${job}b" "${job}c" "${job}d"; do
    for p in $(procs_of "$j"); do kill -9 "$p" 2>/dev/null; done
    rm -f /dev/shm/dlckpt."$j".* 2>/dev/null
    rm -rf "/tmp/dlckpt-run.$j"
  done
  rm -rf "$out" "$out2" "$tmpd"
}
trap cleanup EXIT
fail() {
  echo "FAIL ($scenario): $*" >&2
  echo "---- output:" >&2; cat "$out" >&2
  [ -s "$out2" ] && { echo "---- second output:" >&2; cat "$out2" >&2; }
  exit 1
}

# Waits up to $2 s (default 60) for line $1 in $out.
wait_for() {
  local i
  for ((i = 0; i < ${2:-60} * 10; ++i)); do
    grep -q -- "$1" "$out" && return 0
    sleep 0.1
  done
  fail "no '$1' within ${2:-60} s"
}
# Waits up to $2 s for process $1 (a child) to end; sets rc and took (seconds, 0.1 steps).
wait_exit() {
  local i
  for ((i = 0; i < $2 * 10; ++i)); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  took=$((i / 10)).$((i % 10))
  kill -0 "$1" 2>/dev/null && fail "dlckpt-run (pid $1) still runs $2 s after the signal"
  wait "$1"
  rc=$?
}
# Polls up to 10 s until no process and (unless $2 = keep) no store or run directory of job $1 is left.
wait_gone() {
  local i p s d
  for ((i = 0; i < 100; ++i)); do
    p=$(procs_of "$1") s=$(shm_of "$1") d=
    [ -e "/tmp/dlckpt-run.$1" ] && d=yes
    [ "${2:-}" = keep ] && s= d=
    [ -z "$p$s$d" ] && { gone_after=$((i / 10)).$((i % 10)); return 0; }
    sleep 0.1
  done
  [ -n "$p" ] && fail "processes of job $1 still run 10 s later: $(ps -o pid,pgid,args -p "$(echo $p | tr ' ' ,)" 2>&1)"
  [ -n "$s" ] && fail "stores of job $1 left 10 s later: $s"
  fail "run directory /tmp/dlckpt-run.$1 left 10 s later"
}
start_run() {  # dlckpt-run ARGS... in the background, output to $out; sets pid
  "${run_bin:-$bin/dlckpt-run}" "$@" >"$out" 2>&1 &
  pid=$!
  started+=("$pid")
}
# Sends signal $2 to process $1 and waits (up to 10 s) until it is no longer
# pending: the handler took it, so that a next one counts as another signal.
# Each is sent by a new process (a subshell): dlckpt-run counts a repeat from
# the process that sent the first signal within 2 s as its echo.
send_signal() {
  local bit i
  bit=$((1 << ($(kill -l "$2") - 1)))
  (kill -s "$2" "$1")
  for ((i = 0; i < 100; ++i)); do
    local pnd
    pnd=$(sed -n 's/^ShdPnd:\s*//p' "/proc/$1/status" 2>/dev/null) || return 0
    [ -z "$pnd" ] && return 0
    (( (16#$pnd & bit) == 0 )) && return 0
    sleep 0.1
  done
  fail "SIG$2 stays pending in process $1"
}
# A second SIGTERM; dlckpt-run must then end within $1 s (its --term-grace)
# + 8 s, with the status its summary names, and leave nothing of job $job.
second_sigterm() {
  send_signal "$pid" TERM
  wait_exit "$pid" $(($1 + 8))
  grep -Eq "summary of job $job: exit $rc[ ;]" "$out" || fail "no summary naming exit $rc"
  wait_gone "$job"
}

case "$scenario" in
  term|int|hup)
    sig=${scenario^^}
    signo=$(kill -l "$sig")
    start_run --job "$job" --nodes 3 --spares 1 -- "${app[@]}"
    wait_for "ckpt_app: iteration 2 checkpointed"
    [ -n "$(shm_of "$job")" ] || fail "no stores while the job runs"
    kill -s "$sig" "$pid"
    wait_exit "$pid" 10
    wait_gone "$job"
    [ "$rc" = $((128 + signo)) ] || fail "dlckpt-run exited $rc after SIG$sig, expected $((128 + signo))"
    grep -q "summary of job $job: exit $rc (terminated by SIG$sig)" "$out" ||
      fail "no summary saying 'exit $rc (terminated by SIG$sig)'"
    echo "SIG$sig: dlckpt-run exited $rc after $took s, everything gone $gone_after s later"
    ;;

  launching)
    # A codec service that takes long to start: dlckpt-run waits for its rendezvous.
    printf '#!/bin/sh\nsleep 60\nexec "%s" "$@"\n' "$bin/dlckpt-codec" >"$tmpd/codec"
    chmod +x "$tmpd/codec"
    start_run --job "$job" --nodes 2 --spares 1 --codec "$tmpd/codec" -- "${app[@]}"
    for ((i = 0; i < 100; ++i)); do [ -n "$(procs_of "$job")" ] && break; sleep 0.1; done
    ((i < 100)) || fail "the codec job did not start"
    sleep 0.5
    kill -TERM "$pid"
    wait_exit "$pid" 10
    wait_gone "$job"
    [ "$rc" = 143 ] || fail "dlckpt-run exited $rc, expected 143"
    grep -q "summary of job $job: exit 143 (terminated by SIGTERM)" "$out" || fail "no 'terminated by SIGTERM' summary"
    echo "SIGTERM while the codec starts: dlckpt-run exited $rc after $took s"
    ;;

  recovering)
    # vn1 dies after checkpoint 2; the codec holds the rebuild 9 s (phase:recover+8).
    start_run --job "$job" --nodes 4 --spares 2 --group-size 2 -v --kill-node vn1 --at checkpoint:2 \
      --kill-node vn3 --at phase:recover+8 -- "${app[@]}"
    wait_for "codec rebuild-begin" 120
    kill -TERM "$pid"
    wait_exit "$pid" 10
    wait_gone "$job"
    [ "$rc" = 143 ] || fail "dlckpt-run exited $rc, expected 143"
    grep -q "summary of job $job: exit 143 (terminated by SIGTERM)" "$out" || fail "no 'terminated by SIGTERM' summary"
    grep -q "killing node vn3" "$out" && fail "the kill planned inside the rebuild happened: the rebuild was not interrupted"
    echo "SIGTERM during a rebuild: dlckpt-run exited $rc after $took s"
    ;;

  second)
    # The application ignores SIGTERM (trap '' is inherited by the exec'ed sleep).
    start_run --job "$job" --nodes 2 --spares 1 --term-grace 60 -v -- sh -c "trap '' TERM; exec sleep 120"
    wait_for "event: codec ready\|job $job: 2 data node"
    for ((i = 0; i < 100; ++i)); do
      for p in $(procs_of "$job"); do tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null; echo; done | grep '^sleep 120' >/dev/null && break
      sleep 0.1
    done
    ((i < 100)) || fail "the application did not start"
    kill -TERM "$pid"
    sleep 1.5
    kill -0 "$pid" 2>/dev/null || fail "dlckpt-run ended before the grace period although the application ignores SIGTERM"
    grep -q "terminated by SIGTERM: stopping" "$out" || fail "no message after the first SIGTERM"
    (kill -TERM "$pid")  # from another process: a user's second request
    wait_exit "$pid" 10
    [ "$rc" = 143 ] || fail "dlckpt-run exited $rc, expected 143"
    grep -q "second signal: killing the jobs now" "$out" || fail "the second signal was not acknowledged"
    grep -q "summary of job $job: exit 143 (terminated by SIGTERM)" "$out" || fail "no 'terminated by SIGTERM' summary"
    wait_gone "$job"
    echo "second SIGTERM: dlckpt-run exited $rc after $took s, everything gone $gone_after s later"
    ;;

  keep)
    start_run --job "$job" --nodes 2 --spares 1 --keep -- "${app[@]}"
    wait_for "ckpt_app: iteration 1 checkpointed"
    kill -TERM "$pid"
    wait_exit "$pid" 10
    [ "$rc" = 143 ] || fail "dlckpt-run exited $rc, expected 143"
    wait_gone "$job" keep
    [ -n "$(shm_of "$job" | grep '\.r[0-9]*$')" ] || fail "--keep: the stores were removed"
    [ -d "/tmp/dlckpt-run.$job" ] || fail "--keep: the run directory was removed"
    grep -q "keeping stores and /tmp/dlckpt-run.$job (--keep)" "$out" || fail "--keep: no message"
    echo "--keep: kept $(shm_of "$job" | wc -l) shared-memory objects"
    ;;

  busy)
    start_run --job "$job" --nodes 2 --spares 1 -- "$tbin/ckpt_app" --iters 12 --kib 256 --sleep-ms 150 --write-pieces 2
    first=$pid
    wait_for "ckpt_app: iteration 1 checkpointed"
    # The same job again, while the first runs: refused before it touches anything.
    timeout -k 5 60 "$bin/dlckpt-run" --job "$job" --nodes 2 --spares 1 -- "$tbin/ckpt_app" --iters 2 >"$out2" 2>&1
    rc2=$?
    [ "$rc2" = 6 ] || fail "the second run with --job $job exited $rc2, expected 6"
    grep -q "^dlckpt-run: job $job is already running (lock /tmp/dlckpt-run.$job/lock held by pid $first); choose another --job$" "$out2" ||
      fail "the second run's message does not name the job, the lock and pid $first"
    grep -q "summary" "$out2" && fail "the refused run printed a summary"
    kill -0 "$first" 2>/dev/null || fail "the first run ended when the second started"
    [ -n "$(shm_of "$job")" ] || fail "the first run's stores went away"
    wait_exit "$first" 120
    [ "$rc" = 0 ] || fail "the first run exited $rc after the second was refused"
    grep -q "ckpt_app: iteration 11 checkpointed" "$out" || fail "the first run did not complete its checkpoints"
    grep -q "summary of job $job: exit 0; 12 checkpoint(s)" "$out" || fail "the first run's summary is not 'exit 0; 12 checkpoint(s)'"
    grep -q "^checksum: " "$out" || fail "the first run printed no checksum"
    wait_gone "$job"
    echo "busy: second run refused ($(cat "$out2")); first run: $(grep 'summary of job' "$out")"
    ;;

  status)
    summary_rc() { sed -n "s/^dlckpt-run: summary of job [^:]*: exit \([0-9]*\).*/\1/p" "$1"; }
    # success
    timeout -k 5 120 "$bin/dlckpt-run" --job "$job" --nodes 2 --spares 1 -- "$tbin/ckpt_app" --iters 3 >"$out" 2>&1
    rc=$?
    [ "$rc" = 0 ] && [ "$(summary_rc "$out")" = 0 ] || fail "success: exit $rc, summary '$(summary_rc "$out")'"
    # a refused option: no summary at all
    timeout -k 5 60 "$bin/dlckpt-run" --job "$job" --capacity 0 -- "$tbin/ckpt_app" >"$out" 2>&1
    rc=$?
    [ "$rc" = 2 ] || fail "--capacity 0: exit $rc, expected 2"
    [ -z "$(summary_rc "$out")" ] || fail "--capacity 0: a summary"
    grep -q "^dlckpt-run: --capacity 0: a store's capacity must be between 1M and 1T$" "$out" || fail "--capacity 0: no clear message"
    # unrecoverable: two data nodes of one xor group
    timeout -k 5 120 "$bin/dlckpt-run" --job "${job}b" --nodes 3 --spares 1 --kill-node vn1,vn2 --at checkpoint:2 \
      -- "${app[@]}" >"$out" 2>&1
    rc=$?
    [ "$rc" = 3 ] && [ "$(summary_rc "$out")" = 3 ] || fail "unrecoverable: exit $rc, summary '$(summary_rc "$out")'"
    # A codec service that dies twice before the first checkpoint while the application
    # is still alive (its status then unknown): the summary's status is the exit status.
    cat >"$tmpd/codec" <<EOF
#!/bin/sh
"$bin/dlckpt-codec" "\$@" &
codec=\$!
sleep 2.5
kill -9 \$codec
exit 9
EOF
    chmod +x "$tmpd/codec"
    timeout -k 5 120 "$bin/dlckpt-run" --job "${job}c" --nodes 2 --spares 1 --codec "$tmpd/codec" \
      -- "$tbin/ckpt_app" --iters 3 --sleep-ms 20000 >"$out" 2>&1
    rc=$?
    s=$(summary_rc "$out")
    [ -n "$s" ] && [ "$s" = "$rc" ] || fail "a dying codec: exit $rc, summary '$s'"
    [ "$rc" != 0 ] || fail "a dying codec: exit 0"
    wait_gone "${job}c"
    echo "status: success 0, refused option 2 (no summary), unrecoverable 3, dying codec $rc: summaries agree"
    ;;

  limits)
    t0=$(date +%s%N)
    timeout -k 5 60 "$bin/dlckpt-run" --job "$job" --nodes 5000 --spares 1 -- "$tbin/ckpt_app" >"$out" 2>&1
    rc=$?
    [ "$rc" = 2 ] || fail "--nodes 5000: exit $rc, expected 2"
    grep -q "^dlckpt-run: --nodes 5000 x --ranks-per-node 1 application rank(s) + 5001 codec process(es) = 10001 processes on this machine, more than it can run (64 per online CPU x $(nproc) = $((64 * $(nproc))))" "$out" ||
      fail "--nodes 5000: no clear message"
    grep -q -- "--oversubscribe" "$out" || fail "--nodes 5000: the message does not name --oversubscribe"
    (( ($(date +%s%N) - t0) / 1000000 < 5000 )) || fail "--nodes 5000 took seconds to refuse"
    [ -z "$(procs_of "$job")$(shm_of "$job")" ] || fail "--nodes 5000 started something"
    [ ! -e "/tmp/dlckpt-run.$job" ] || fail "--nodes 5000 created its run directory"
    timeout -k 5 60 "$bin/dlckpt-run" --job "$job" --capacity 18446744073709551615 -- "$tbin/ckpt_app" >"$out" 2>&1
    rc=$?
    [ "$rc" = 2 ] || fail "--capacity 2^64-1: exit $rc, expected 2"
    grep -q "between 1M and 1T" "$out" || fail "--capacity 2^64-1: no clear message"
    [ ! -e "/tmp/dlckpt-run.$job" ] || fail "--capacity 2^64-1 created its run directory"
    echo "limits: $(head -1 "$out")"
    ;;

  rundir)
    rd=/tmp/dlckpt-run.$job
    refused() {  # $1: what, $2: expected text; the planted $rd must stay as it was
      local before after
      before=$(stat -c '%u %a %F' "$rd"; ls -A "$rd/" 2>/dev/null)
      timeout -k 5 60 "$bin/dlckpt-run" --job "$job" --nodes 2 --spares 1 -- /bin/true >"$out" 2>&1
      rc=$?
      [ "$rc" = 5 ] || fail "$1: exit $rc, expected 5"
      grep -q "^dlckpt-run: run directory $rd is unsafe: $2" "$out" || fail "$1: no message naming the path and why"
      after=$(stat -c '%u %a %F' "$rd"; ls -A "$rd/" 2>/dev/null)
      [ "$before" = "$after" ] || fail "$1: the planted directory changed: '$before' -> '$after'"
      [ -z "$(procs_of "$job")$(shm_of "$job")" ] || fail "$1: something was started"
    }
    if [ "$(id -u)" = 0 ]; then
      mkdir -m 0700 "$rd" && chown 65534 "$rd"
      refused "owned by uid 65534" "it is not owned by uid 0 (owner uid 65534, mode 0700); remove it"
      rm -rf "$rd"
    else
      echo "not root: the other-owner case is skipped"
    fi
    mkdir "$rd" && chmod 0777 "$rd"
    refused "mode 0777" "group or others have access to it (want mode 0700) (owner uid $(id -u), mode 0777)"
    rm -rf "$rd"
    mkdir -m 0700 "$tmpd/target"
    ln -s "$tmpd/target" "$rd"
    refused "a symbolic link" "it is a symbolic link (owner uid $(id -u), mode 0777)"
    [ -z "$(ls -A "$tmpd/target")" ] || fail "a symbolic link: files were created in its target"
    rm -f "$rd"
    : >"$rd" && chmod 0600 "$rd"
    refused "a regular file" "it is not a directory (owner uid $(id -u), mode 0600)"
    rm -f "$rd"
    # A directory of ours, mode 0700 (a run's leftover): used, and removed at the end.
    mkdir -m 0700 "$rd"
    timeout -k 5 60 "$bin/dlckpt-run" --job "$job" --nodes 2 --spares 1 -- /bin/true >"$out" 2>&1
    rc=$?
    [ "$rc" = 0 ] || fail "an existing run directory of ours: exit $rc"
    [ ! -e "$rd" ] || fail "an existing run directory of ours was left"
    # The default job id: dlckpt, the pid, 6 random hex digits.
    timeout -k 5 60 "$bin/dlckpt-run" --nodes 2 --spares 1 -- /bin/true >"$out" 2>&1
    rc=$?
    [ "$rc" = 0 ] || fail "default job id: exit $rc"
    def=$(sed -n 's/^dlckpt-run: summary of job \([^:]*\):.*/\1/p' "$out")
    [[ $def =~ ^dlckpt[0-9]+[0-9a-f]{6}$ ]] || fail "default job id '$def' is not dlckpt<pid><6 hex digits>"
    [ ! -e "/tmp/dlckpt-run.$def" ] || fail "the default run directory was left"
    echo "rundir: planted directories refused; default job id $def"
    ;;

  hostage)
    # The kill command hangs: the supervisor waits for it (system(3)) and
    # checks no signal meanwhile. Its command line names the job (procs_of).
    printf '#!/bin/sh\nwhile :; do sleep 1; done\n' >"$tmpd/hang-$job"
    chmod +x "$tmpd/hang-$job"
    start_run --job "$job" --nodes 2 --spares 1 --term-grace 2 --kill-command "$tmpd/hang-$job {node}" \
      --kill-node vn1 --at checkpoint:1 -- "${app[@]}"
    wait_for "killing node vn1 (--at checkpoint:1)"
    for ((i = 0; i < 100; ++i)); do pgrep -f -- "hang-$job" >/dev/null && break; sleep 0.1; done
    ((i < 100)) || fail "the kill command did not start"
    send_signal "$pid" TERM
    second_sigterm 2
    [ "$rc" = 143 ] || fail "dlckpt-run exited $rc, expected 143"
    grep -q "summary of job $job: exit 143 (terminated by SIGTERM)" "$out" || fail "no 'terminated by SIGTERM' summary"
    grep "second signal\|ending now\|summary" "$out"
    echo "hostage: dlckpt-run exited $rc $took s after the second SIGTERM, everything gone $gone_after s later"
    ;;

  fifo)
    # The issue's reproducer: a FIFO where the MANIFEST of epoch 1 belongs. The
    # ranks' drain of epoch 2 prunes (reads the epochs), the halt drains.
    pd=$tmpd/persist
    mkdir -p "$pd" && mkdir -m 0700 "$pd/$job" "$pd/$job/epoch.1" && mkfifo -m 0600 "$pd/$job/epoch.1/MANIFEST"
    # The application runs on about 2 s after its checkpoint 3, so that the
    # SIGTERM lands while it runs.
    start_run --job "$job" --nodes 2 --spares 1 --term-grace 2 --persist "$pd" --persist-every 2 -v \
      -- "$tbin/ckpt_app" --iters 12 --kib 64 --sleep-ms 250
    wait_for "ckpt_app: iteration 3 checkpointed" 120
    if kill -0 "$pid" 2>/dev/null; then
      send_signal "$pid" TERM
      # The halt: the ranks killed, then the nodes' drain job (or the end).
      for ((i = 0; i < 300; ++i)); do
        kill -0 "$pid" 2>/dev/null || break
        pgrep -f -- "dlckpt-store drain .* --job $job " >/dev/null && break
        sleep 0.1
      done
    fi
    if kill -0 "$pid" 2>/dev/null; then
      second_sigterm 2
      echo "fifo: dlckpt-run exited $rc $took s after the second SIGTERM, everything gone $gone_after s later"
    else
      # Nothing blocked (the persistent directory's reads refuse a FIFO): the run ended by itself.
      wait_exit "$pid" 10
      grep -Eq "summary of job $job: exit $rc[ ;]" "$out" || fail "no summary naming exit $rc"
      wait_gone "$job"
      echo "fifo: dlckpt-run ended by itself (exit $rc), nothing left"
    fi
    ;;

  drainhang)
    # The halt's drain never ends and ignores SIGTERM: a dlckpt-store beside a
    # copy of dlckpt-run (the halt runs the one beside it).
    mkdir "$tmpd/bin" && cp "$bin/dlckpt-run" "$tmpd/bin/" || fail "cannot copy dlckpt-run"
    printf '#!/bin/sh\ntrap "" TERM\necho "hung drain: $*"\nwhile :; do sleep 1; done\n' >"$tmpd/bin/dlckpt-store"
    chmod +x "$tmpd/bin/dlckpt-store"
    run_bin=$tmpd/bin/dlckpt-run start_run --job "$job" --nodes 2 --spares 1 --term-grace 2 \
      --codec "$bin/dlckpt-codec" --persist "$tmpd/persist" -- "${app[@]}"
    wait_for "ckpt_app: iteration 1 checkpointed"
    send_signal "$pid" TERM
    wait_for "hung drain: drain $tmpd/persist --job $job"
    second_sigterm 2
    [ "$rc" = 3 ] || fail "dlckpt-run exited $rc, expected 3 (halted, and no drained epoch to restart from)"
    grep -q "summary of job $job: exit 3 (halted by SIGTERM; the halt drain failed" "$out" ||
      fail "no summary saying the halt drain failed"
    echo "drainhang: dlckpt-run exited $rc $took s after the second SIGTERM, everything gone $gone_after s later"
    ;;

  usr1)
    start_run --job "$job" --nodes 2 --spares 1 -- "${app[@]}"
    wait_for "ckpt_app: iteration 1 checkpointed"
    kill -USR1 "$pid"
    wait_exit "$pid" 30
    wait_gone "$job"
    [ "$rc" = 3 ] || fail "SIGUSR1 without --persist: exit $rc, expected 3 (7 means a drained epoch to restart from)"
    grep -q "summary of job $job: exit 3 (halted by SIGUSR1 without --persist: nothing drained)" "$out" ||
      fail "no summary saying 'exit 3 (halted by SIGUSR1 without --persist: nothing drained)'"
    echo "usr1: exit $rc: $(grep "summary of job" "$out")"
    ;;

  halt)
    halt() { "$bin/dlckpt-run" --halt "$@" >"$out2" 2>&1; hrc=$?; }
    halt "${job}b"
    [ "$hrc" = 1 ] || fail "--halt of a job that never ran: exit $hrc, expected 1"
    grep -q "^dlckpt-run: --halt: job ${job}b is not running here: run directory /tmp/dlckpt-run.${job}b: .*\[ENOENT\]$" \
      "$out2" || fail "--halt of a job that never ran: $(cat "$out2")"
    mkdir -m 0700 "/tmp/dlckpt-run.${job}d" && echo 1 >"/tmp/dlckpt-run.${job}d/lock" || fail "cannot plant a run dir"
    halt "${job}d"
    [ "$hrc" = 1 ] || fail "--halt of a left-over run directory: exit $hrc, expected 1"
    grep -q "^dlckpt-run: --halt: job ${job}d is not running: no dlckpt-run holds /tmp/dlckpt-run.${job}d/lock .*\[ESRCH\]$" \
      "$out2" || fail "--halt of a left-over run directory: $(cat "$out2")"
    if [ "$(id -u)" = 0 ]; then
      mkdir -m 0700 "/tmp/dlckpt-run.${job}c" && chown 65534:65534 "/tmp/dlckpt-run.${job}c" || fail "cannot plant"
      halt "${job}c"
      [ "$hrc" = 1 ] || fail "--halt of another user's job: exit $hrc, expected 1"
      grep -q "^dlckpt-run: --halt: job ${job}c is not yours: its run directory /tmp/dlckpt-run.${job}c belongs to uid 65534, not to uid 0 \[EPERM\]$" \
        "$out2" || fail "--halt of another user's job: $(cat "$out2")"
    fi
    start_run --job "$job" --nodes 2 --spares 1 --persist "$tmpd/persist" -- "${app[@]}"
    wait_for "ckpt_app: iteration 1 checkpointed"
    halt "$job"
    [ "$hrc" = 0 ] || fail "--halt $job: exit $hrc: $(cat "$out2")"
    grep -qF "dlckpt-run: halt requested for job $job (SIGUSR1 to dlckpt-run, pid $pid): it drains the newest protected epoch to $tmpd/persist, stops the job and exits 7" \
      "$out2" || fail "--halt does not say what happens: $(cat "$out2")"
    said=$(cat "$out2")
    wait_exit "$pid" 60
    wait_gone "$job"
    [ "$rc" = 7 ] || fail "halted with --persist: exit $rc, expected 7"
    grep -q "summary of job $job: exit 7 (halted by SIGUSR1; epoch [0-9]* drained" "$out" ||
      fail "no summary saying 'exit 7 (halted by SIGUSR1; epoch N drained'"
    halt "$job"
    [ "$hrc" = 1 ] && grep -q "ENOENT" "$out2" || fail "--halt of an ended job: exit $hrc: $(cat "$out2")"
    echo "halt: $said; $(grep "summary of job" "$out")"
    ;;

  maxfiles)
    # Each rank creates 20 files under /dlckpt (an application that never calls
    # dlckpt_init: only the preload's store matters here).
    timeout -k 5 120 "$bin/dlckpt-run" --job "$job" --nodes 2 --spares 1 --preload --capacity 32M --max-files 16 -- \
      sh -c 'echo "max files: $DLCKPT_MAX_FILES"; i=0; while [ $i -lt 20 ]; do true >/dlckpt/f$i || exit 9; i=$((i + 1)); done' \
      >"$out" 2>&1
    rc=$?
    [ "$rc" = 9 ] || fail "20 files in stores of 16 entries: exit $rc, expected the application's 9"
    grep -q "^max files: 16$" "$out" || fail "the ranks do not get DLCKPT_MAX_FILES=16"
    grep -q "f16: file table full: 16 files and directories (max_files 16); create the store with more: DLCKPT_MAX_FILES" \
      "$out" || fail "no message naming the full table and DLCKPT_MAX_FILES"
    grep -q "No space left on device" "$out" || fail "not ENOSPC"
    wait_gone "$job"
    echo "maxfiles: exit $rc: $(grep -m1 "file table full" "$out")"
    ;;

  planted)
    [ "$(id -u)" = 0 ] || { echo "not root: skipped"; echo "dlckpt_run_signals_test $scenario: ok"; exit 0; }
    store=/dev/shm/dlckpt.$job.vn0.r0
    setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "umask 077; head -c 65536 /dev/zero >'$store'" ||
      fail "cannot plant $store as uid 65534"
    [ "$(stat -c %u "$store")" = 65534 ] || fail "the planted store is not uid 65534's"
    timeout -k 5 120 "$bin/dlckpt-run" --job "$job" --nodes 2 --spares 1 -- "${app[@]}" >"$out" 2>&1
    rc=$?
    [ "$rc" = 5 ] || fail "a planted store: exit $rc, expected 5 (set-up failure)"
    grep -q "store $store is owned by uid 65534, not by uid 0 .*EPERM" "$out" || fail "the EPERM is not named"
    grep -q "recovery [0-9]*:" "$out" && fail "a planted store was taken for a node loss"
    [ "$(stat -c %u "$store" 2>/dev/null)" = 65534 ] || fail "the planted store was removed or replaced"
    rm -f "$store"
    wait_gone "$job"
    echo "planted: exit $rc: $(grep -m1 "owned by uid 65534" "$out")"
    ;;

  syncsummary)
    # The codec holds the encode of epoch 3 for 61 s (a kill planned 60 s into it).
    start_run --job "$job" --nodes 2 --spares 1 -v --kill-node vn1 --at phase:encode:3+60 -- "${app[@]}"
    wait_for "event: codec encode-begin 3" 120
    kill -TERM "$pid"
    wait_exit "$pid" 30
    wait_gone "$job"
    [ "$rc" = 143 ] || fail "dlckpt-run exited $rc, expected 143"
    summary=$(grep "summary of job $job" "$out")
    grep -q "async encode" <<<"$summary" && fail "a sync run's summary speaks of async encode: $summary"
    grep -q "; 2 checkpoint(s) (last epoch 2); checkpoints: 3 committed, 2 protected; 1 encode was cut short or failed;" \
      <<<"$summary" || fail "the summary does not say 3 committed, 2 protected: $summary"
    echo "syncsummary: $summary"
    ;;

  *) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac
echo "dlckpt_run_signals_test $scenario: ok"
