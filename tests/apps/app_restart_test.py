#!/usr/bin/env python3
"""Restart tests of the proxy applications (heat2d, sppm-mini, sweep3d-mini)
on a disk checkpoint directory, without dlckpt.

Scenarios (one per CTest test):
  basic     two failure-free runs agree on the checksum (determinism), a run
            without checkpoints agrees too, the checkpoint files have the size
            the app announces, and (--same-as) another decomposition of the
            same global problem gives the same checksum.
  kill      a run is interrupted twice at seeded random points after some
            checkpoints exist — first mpiexec's process group gets SIGKILL,
            then one rank gets SIGKILL — and the final rerun, restarting from
            the newest checkpoint, ends with the failure-free checksum.
  damage    truncated, corrupted and missing checkpoint files are detected
            with a message naming the file; the job resumes from the newest
            iteration intact on every rank (or from scratch) and still ends
            with the failure-free checksum.
  mismatch  checkpoints written by another process count or size are
            refused with a clear error and a non-zero exit.
  hooks     with a probe that defines the dlckpt API, preloaded or linked as
            a static archive, the app calls dlckpt_init, dlckpt_checkpoint
            once per checkpoint and dlckpt_finalize; it reports the epoch
            dlckpt restored, refuses a restored epoch without intact files,
            and a failing dlckpt_checkpoint ends the job with the probe's
            message.

Every mpiexec runs in its own session; on any exit (including SIGTERM from
`timeout`) the script kills the process groups it started. The temporary
checkpoint directories are removed.
"""
import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CHECKSUM_RE = re.compile(r"^checksum: ([0-9a-f]{16})$")
RESTARTED_RE = re.compile(r"^restarted from iteration (\d+) ")
CKPT_DONE_RE = re.compile(r"^checkpoint: iteration (\d+) complete")
BYTES_RE = re.compile(r"^checkpoint bytes per rank: (\d+)$")

LIVE_GROUPS = set()


def cleanup_groups():
    for pgid in list(LIVE_GROUPS):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        LIVE_GROUPS.discard(pgid)


def on_signal(signum, _frame):
    cleanup_groups()
    sys.stderr.write(f"app_restart_test: stopped by signal {signum}\n")
    sys.exit(128 + signum)


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


class Runner:
    def __init__(self, opts, workdir):
        self.opts = opts
        self.workdir = workdir
        self.count = 0

    def start(self, ranks, args, env=None, binary=None):
        """Starts mpiexec in a new session; stdout is a pipe, stderr a file."""
        self.count += 1
        err_path = os.path.join(self.workdir, f"stderr.{self.count}")
        err = open(err_path, "w+")
        cmd = ["mpiexec", "-n", str(ranks), binary or self.opts.bin] + list(args)
        print("+ " + " ".join(cmd), flush=True)
        full_env = dict(os.environ)
        # Single-host runs: UCX's shared-memory transports only. With every
        # transport, UCX's MPI_Init scans all network devices and fails with
        # ENODEV when another job (e.g. virtual hosts) removes one meanwhile.
        full_env.setdefault("UCX_TLS", "self,sm")
        if env:
            full_env.update(env)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                                start_new_session=True, env=full_env)
        LIVE_GROUPS.add(proc.pid)
        return proc, err

    def finish(self, proc, err, timeout):
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            LIVE_GROUPS.discard(proc.pid)
            raise Failure(f"run did not finish within {timeout} s")
        LIVE_GROUPS.discard(proc.pid)
        err.seek(0)
        errtext = err.read()
        err.close()
        return proc.returncode, out, errtext

    def run(self, ranks, args, timeout=None, env=None, binary=None):
        """Runs to completion; returns (returncode, stdout, stderr, seconds).
        A launch that fails inside MPI_Init before the app printed anything
        (an environment fault, not the app's) is retried once."""
        for attempt in (1, 2):
            t0 = time.monotonic()
            proc, err = self.start(ranks, args, env, binary)
            rc, out, errtext = self.finish(proc, err, timeout or self.opts.run_timeout)
            dt = time.monotonic() - t0
            for line in out.splitlines():
                print("  | " + line)
            for line in errtext.splitlines():
                print("  ! " + line)
            print(f"  -> exit {rc} in {dt:.2f} s", flush=True)
            init_failed = rc != 0 and not out.strip() and re.search(r"MPI_Init\(.*failed", errtext)
            if not init_failed or attempt == 2:
                return rc, out, errtext, dt
            print("  MPI_Init failed before the app started; retrying once", flush=True)


def last_checksum(out):
    lines = [l for l in out.splitlines() if l.strip()]
    check(lines, "no output")
    m = CHECKSUM_RE.match(lines[-1])
    check(m is not None, f"last line is not 'checksum: <16 hex>': {lines[-1]!r}")
    return m.group(1)


def restarted_from(out):
    for line in out.splitlines():
        m = RESTARTED_RE.match(line)
        if m:
            return int(m.group(1))
    return None


def ckpt_args(opts, directory, extra=()):
    return (opts.app_args + ["--iters", str(opts.iters), "--ckpt-every", str(opts.ckpt_every),
                             "--ckpt-dir", directory] + list(extra))


def reference(runner, opts, directory):
    rc, out, err, _ = runner.run(opts.ranks, ckpt_args(opts, directory))
    check(rc == 0, f"failure-free run exited with {rc}")
    return last_checksum(out), out


def app_files(directory, app, rank):
    return [os.path.join(directory, f"{app}.{rank}.{slot}.ckpt") for slot in (0, 1)]


def newest_file(directory, app, rank):
    files = [f for f in app_files(directory, app, rank) if os.path.exists(f)]
    check(files, f"no checkpoint file of rank {rank} in {directory}")
    return max(files, key=lambda f: os.stat(f).st_mtime_ns)


def no_processes_left(marker, seconds=10.0):
    """True once no live process has `marker` in its command line."""
    deadline = time.monotonic() + seconds
    while True:
        alive = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker in cmdline and state != "Z" and int(pid) != os.getpid():
                alive.append(pid)
        if not alive:
            return True
        if time.monotonic() > deadline:
            print(f"  processes still running: {alive}")
            return False
        time.sleep(0.1)


def rank_pids(marker):
    """Pids of app processes (not mpiexec or the proxy) whose command line has marker."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0].decode(errors="replace")) == os.path.basename(
                runner_bin()) and marker.encode() in b" ".join(argv):
            pids.append(int(pid))
    return sorted(pids)


_BIN = [None]


def runner_bin():
    return _BIN[0]


# ---- scenarios ---------------------------------------------------------------


def scenario_basic(runner, opts, tmp):
    d1, d2 = os.path.join(tmp, "a"), os.path.join(tmp, "b")
    sum1, out1 = reference(runner, opts, d1)
    m = [BYTES_RE.match(l) for l in out1.splitlines()]
    sizes = [int(x.group(1)) for x in m if x]
    check(len(sizes) == 1, "no 'checkpoint bytes per rank' line")
    for rank in range(opts.ranks):
        for f in app_files(d1, opts.app, rank):
            check(os.path.exists(f), f"missing checkpoint file {f}")
            check(os.path.getsize(f) == sizes[0],
                  f"{f} has {os.path.getsize(f)} bytes, the app announced {sizes[0]}")
    print(f"checkpoint files: {2 * opts.ranks} of {sizes[0]} bytes each, as announced")
    sum2, _ = reference(runner, opts, d2)
    check(sum1 == sum2, f"two failure-free runs disagree: {sum1} vs {sum2}")
    rc, out, _, _ = runner.run(opts.ranks, opts.app_args + ["--iters", str(opts.iters),
                                                            "--ckpt-every", "0"])
    check(rc == 0, f"run without checkpoints exited with {rc}")
    sum3 = last_checksum(out)
    check(sum3 == sum1, f"run without checkpoints disagrees: {sum3} vs {sum1}")
    for spec in opts.same_as:
        ranks, _, args = spec.partition(":")
        rc, out, _, _ = runner.run(int(ranks), args.split() + ["--iters", str(opts.iters),
                                                               "--ckpt-every", "0"])
        check(rc == 0, f"run on {ranks} ranks exited with {rc}")
        s = last_checksum(out)
        check(s == sum1, f"decomposition '{spec}' gives {s}, not {sum1}")
        print(f"decomposition '{spec}' gives the same checksum")
    print(f"checksum {sum1}: deterministic")


def interrupt(runner, opts, directory, rng, how):
    """Starts a padded run and kills it after it has completed at least one
    more checkpoint. Returns the newest iteration known complete."""
    args = ckpt_args(opts, directory, ["--sleep-ms", str(opts.sleep_ms)])
    proc, err = runner.start(opts.ranks, args)
    first = proc.stdout.readline()
    if not first:  # retry once a launch that failed inside MPI_Init (see Runner.run)
        proc.wait()
        LIVE_GROUPS.discard(proc.pid)
        err.seek(0)
        errtext = err.read()
        err.close()
        check(re.search(r"MPI_Init\(.*failed", errtext), f"the run printed nothing: {errtext}")
        print("  MPI_Init failed before the app started; retrying once", flush=True)
        proc, err = runner.start(opts.ranks, args)
        first = proc.stdout.readline()
    wanted = rng.randint(1, 2)  # checkpoints to see before killing
    seen, newest, lines = 0, None, []
    deadline = time.monotonic() + opts.run_timeout
    pending = [first]
    while True:
        line = pending.pop() if pending else proc.stdout.readline()
        if not line:
            break
        line = line.rstrip("\n")
        lines.append(line)
        print("  | " + line, flush=True)
        check(not CHECKSUM_RE.match(line), "the run finished before it could be killed; "
              "raise --iters or --sleep-ms")
        m = CKPT_DONE_RE.match(line)
        if m:
            newest = int(m.group(1))
            seen += 1
            if seen >= wanted:
                break
        check(time.monotonic() < deadline, "no checkpoint completed in time")
    check(newest is not None, "the run ended without completing a checkpoint")
    # A random point inside the next checkpoint interval, often mid-write.
    delay = rng.uniform(0, opts.ckpt_every * opts.sleep_ms / 1000.0)
    time.sleep(delay)
    if how == "group":
        print(f"  kill -KILL -{proc.pid} (mpiexec's process group) {delay:.3f} s after "
              f"checkpoint {newest}", flush=True)
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        pids = rank_pids(directory)
        check(pids, "no rank process found to kill")
        victim = rng.choice(pids)
        print(f"  kill -KILL {victim} (one of the ranks {pids}) {delay:.3f} s after "
              f"checkpoint {newest}", flush=True)
        os.kill(victim, signal.SIGKILL)
    rest, _ = proc.communicate(timeout=opts.run_timeout)
    LIVE_GROUPS.discard(proc.pid)
    for line in rest.splitlines():
        print("  | " + line)
        m = CKPT_DONE_RE.match(line)
        if m:
            newest = int(m.group(1))
        check(not CHECKSUM_RE.match(line), "the run finished before it was killed")
    err.close()
    check(proc.returncode != 0, "mpiexec exited 0 after a kill")
    print(f"  -> mpiexec exit {proc.returncode}")
    check(no_processes_left(directory), "processes of the killed job are still running")
    return newest


def scenario_kill(runner, opts, tmp):
    rng = random.Random(opts.seed)
    print(f"seed {opts.seed}")
    ref, _ = reference(runner, opts, os.path.join(tmp, "ref"))
    d = os.path.join(tmp, "run")
    newest = interrupt(runner, opts, d, rng, "group")
    newest = interrupt(runner, opts, d, rng, "rank")
    rc, out, err, _ = runner.run(opts.ranks, ckpt_args(opts, d))
    check(rc == 0, f"rerun after the kills exited with {rc}")
    x = restarted_from(out)
    check(x is not None, "the rerun did not say 'restarted from iteration X'")
    check(x >= newest, f"restarted from iteration {x}, but checkpoint {newest} was complete")
    got = last_checksum(out)
    check(got == ref, f"checksum after restart {got} differs from the failure-free {ref}")
    print(f"restarted from iteration {x}; checksum {got} equals the failure-free run")


def scenario_damage(runner, opts, tmp):
    check(opts.iters % opts.ckpt_every == 0 and opts.iters // opts.ckpt_every >= 2,
          "damage needs --iters a multiple of --ckpt-every with at least two checkpoints")
    last, previous = opts.iters, opts.iters - opts.ckpt_every
    d = os.path.join(tmp, "run")
    ref, _ = reference(runner, opts, d)

    def rerun(expect_from, expect_messages):
        rc, out, err, _ = runner.run(opts.ranks, ckpt_args(opts, d))
        check(rc == 0, f"rerun exited with {rc}")
        for text in expect_messages:
            check(text in err or text in out, f"expected message containing {text!r}")
        x = restarted_from(out)
        if expect_from is None:
            check(x is None and "starting from scratch" in out,
                  "expected 'starting from scratch'")
        else:
            check(x == expect_from, f"restarted from {x}, expected {expect_from}")
        got = last_checksum(out)
        check(got == ref, f"checksum {got} differs from the failure-free {ref}")

    victim = 1 if opts.ranks > 1 else 0
    f = newest_file(d, opts.app, victim)
    size = os.path.getsize(f)
    os.truncate(f, size // 2)
    print(f"truncated {f} from {size} to {size // 2} bytes")
    rerun(previous, [f"rank {victim}: checkpoint {f}", "damaged",
                     f"iteration {last} is not intact on 1 rank(s) (first: rank {victim})"])

    f = newest_file(d, opts.app, 0)
    with open(f, "r+b") as fh:
        pos = os.path.getsize(f) // 2
        fh.seek(pos)
        b = fh.read(1)
        fh.seek(pos)
        fh.write(bytes([b[0] ^ 0x10]))
    print(f"flipped one bit at byte {pos} of {f}")
    rerun(previous, [f"rank 0: checkpoint {f}", "content hash does not match"])

    for f in app_files(d, opts.app, victim):
        os.unlink(f)
    print(f"removed both checkpoint files of rank {victim}")
    rerun(None, ["no iteration is checkpointed intact on every rank"])
    print("damaged and missing checkpoints detected; checksum unchanged")


def scenario_mismatch(runner, opts, tmp):
    d = os.path.join(tmp, "run")
    reference(runner, opts, d)
    other = opts.ranks - 1 if opts.ranks > 1 else 2
    rc, out, err, _ = runner.run(other, ckpt_args(opts, d))
    check(rc != 0, f"a run on {other} ranks over checkpoints of {opts.ranks} exited 0")
    check(f"of {opts.ranks}" in err and f"of {other}" in err and "Rerun with the same" in err,
          "no clear message about the process count")
    check(not any(CHECKSUM_RE.match(l) for l in out.splitlines()), "mismatched run printed a checksum")
    rc, out, err, _ = runner.run(opts.ranks, ckpt_args(opts, d, opts.other_size))
    check(rc != 0, "a run with another size over existing checkpoints exited 0")
    check("Rerun with the same" in err, "no clear message about the size")
    print("checkpoints of another configuration refused with a clear error")


def check_probe_calls(opts, log):
    with open(log) as fh:
        calls = fh.read().split()
    per_rank = {}
    for c in calls:
        rank, name = c.split(":")
        per_rank.setdefault(int(rank), []).append(name)
    n_ckpt = opts.iters // opts.ckpt_every
    for rank in range(opts.ranks):
        seq = per_rank.get(rank, [])
        want = ["init"] + ["checkpoint"] * n_ckpt + ["finalize"]
        check(seq == want, f"rank {rank} called {seq}, expected {want}")
    os.unlink(log)
    print(f"every rank called init, checkpoint x{n_ckpt}, finalize")


def scenario_hooks(runner, opts, tmp):
    check(opts.probe and opts.probe_bin, "--probe and --probe-bin are required")
    log = os.path.join(tmp, "probe.log")

    # 1. The plain app with the probe preloaded, as with a shared libdlckpt.
    d = os.path.join(tmp, "run")
    env = {"LD_PRELOAD": opts.probe, "DLCKPT_PROBE_LOG": log}
    rc, out, err, _ = runner.run(opts.ranks, ckpt_args(opts, d), env=env)
    check(rc == 0, f"run with the probe exited with {rc}")
    check("dlckpt linked" in out, "the app did not notice the preloaded dlckpt API")
    check("1 slot(s) per rank" in out, "with dlckpt linked the app should keep one slot")
    ref = last_checksum(out)
    check_probe_calls(opts, log)

    # 2. The variant linked with the probe as a static archive.
    d2 = os.path.join(tmp, "static")
    rc, out, err, _ = runner.run(opts.ranks, ckpt_args(opts, d2), env={"DLCKPT_PROBE_LOG": log},
                                 binary=opts.probe_bin)
    check(rc == 0, f"statically linked probe variant exited with {rc}")
    check("dlckpt linked" in out, "the static variant did not find the dlckpt API")
    check(last_checksum(out) == ref, "the static variant computed another checksum")
    check_probe_calls(opts, log)

    # 3. dlckpt says it restored an epoch: the app resumes and reports it...
    env["DLCKPT_PROBE_EPOCH"] = "7"
    rc, out, err, _ = runner.run(opts.ranks, ckpt_args(opts, d), env=env)
    check(rc == 0, f"restart with a restored epoch exited with {rc}")
    check(restarted_from(out) == opts.iters, "did not restart from the last checkpoint")
    check("dlckpt: restarted epoch 7" in out, "the restored epoch was not reported")
    check(last_checksum(out) == ref, "restart with the probe changed the checksum")
    # ...but a restored epoch without intact checkpoint files is an error.
    rc, out, err, _ = runner.run(opts.ranks, ckpt_args(opts, os.path.join(tmp, "empty")), env=env)
    check(rc != 0, "a restored epoch without checkpoint files did not fail")
    check("dlckpt restored epoch 7 but no checkpoint" in err, "no clear message for a lost epoch")
    del env["DLCKPT_PROBE_EPOCH"]

    # 4. A failing dlckpt_checkpoint ends the job with dlckpt's message.
    env["DLCKPT_PROBE_FAIL_AT"] = "2"
    rc, out, err, _ = runner.run(opts.ranks, ckpt_args(opts, os.path.join(tmp, "fail")), env=env)
    check(rc != 0, "a failing dlckpt_checkpoint did not end the job")
    check("dlckpt_checkpoint: probe: refusing checkpoint 2" in err,
          "the probe's error message was not reported")
    check(not any(CHECKSUM_RE.match(l) for l in out.splitlines()), "failed run printed a checksum")
    print("a failing dlckpt_checkpoint ends the job with its message")


SCENARIOS = {"basic": scenario_basic, "kill": scenario_kill, "damage": scenario_damage,
             "mismatch": scenario_mismatch, "hooks": scenario_hooks}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    p.add_argument("--app", required=True, help="app name (prefix of its checkpoint files)")
    p.add_argument("--bin", required=True, help="path of the app executable")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--iters", type=int, required=True)
    p.add_argument("--ckpt-every", type=int, required=True)
    p.add_argument("--sleep-ms", type=int, default=100, help="padding for the kill scenario")
    p.add_argument("--seed", type=int, default=int(os.environ.get("APP_TEST_SEED", "1")))
    p.add_argument("--same-as", action="append", default=[],
                   help="'RANKS:ARGS' of another decomposition of the same global problem")
    p.add_argument("--other-size", default="", help="size arguments that differ (mismatch)")
    p.add_argument("--probe", help="the dlckpt API probe library, to preload (hooks)")
    p.add_argument("--probe-bin", help="the app linked with the static probe (hooks)")
    p.add_argument("--run-timeout", type=float, default=60.0)
    p.add_argument("app_args", nargs=argparse.REMAINDER, help="-- then size arguments")
    opts = p.parse_args()
    opts.app_args = [a for a in opts.app_args if a != "--"]
    opts.other_size = opts.other_size.split()
    opts.bin = os.path.abspath(opts.bin)
    _BIN[0] = opts.bin
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tmp = tempfile.mkdtemp(prefix=f"apptest-{opts.app}-{opts.scenario}-")
    t0 = time.monotonic()
    try:
        SCENARIOS[opts.scenario](Runner(opts, tmp), opts, tmp)
    except Failure as e:
        print(f"FAIL: {opts.app} {opts.scenario}: {e}", flush=True)
        return 1
    finally:
        cleanup_groups()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"PASS: {opts.app} {opts.scenario} in {time.monotonic() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
