#!/usr/bin/python3
"""Asynchronous against synchronous encode, in one run (issue "async encode").

  bench/async_bench.py [--bin build/bin] [--configs 4:1,8:2] [--mib 64,256]
                       [--iters 6] [--warmup 3] [--apps] [--out FILE] [--smoke]

1. The checkpoint the application sees (write + dlckpt_checkpoint returning),
   per configuration m:k (m data nodes, k spares, one group; RS for k > 1) and
   size per rank, measured with dlckpt-bench-ckpt:
     commit  no codec service (mpiexec alone): write and local commit only,
             the floor an asynchronous encode can reach;
     sync    dlckpt-run --encode sync;
     async   dlckpt-run --encode async, with a compute phase after every
             checkpoint of --compute-factor x the sync encode time, twice:
             "idle" (the ranks sleep: a compute phase on other cores, as on a
             node with spare cores) and "cpu" (the ranks spin on these cores,
             so the encode competes for them: this 2-core machine's case).
   METRIC async_ckpt_vs_commit_<m>to<k>_<mib>mib_idle <async/commit> x target <= 1.3
   (and the same _cpu line, reported with the same target).
2. With --apps: wall time of heat2d and sppm-mini under dlckpt-run checkpointing
   every step: no checkpoints, sync, async (codec at nice 10 and at nice 0),
   and the overhead of each against no checkpoints.
3. The model (bench/ckpt_model.py, fitted in bench/results/model.csv) for a
   node with spare cores: an async checkpoint costs write + overhead +
   max(0, encode - compute) instead of write + encode + overhead.

Every run is under setsid + timeout; stores and run directories are removed.
"""
import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(cmd, env=None, timeout=900):
    """Runs cmd (a list) in its own session; returns (rc, output, seconds)."""
    e = dict(os.environ)
    e.update(env or {})
    e.setdefault("UCX_TLS", "self,sm")
    t0 = time.monotonic()
    p = subprocess.run(["setsid", "timeout", "-k", "5", str(timeout)] + cmd, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout, time.monotonic() - t0


def cleanup(job):
    for n in os.listdir("/dev/shm"):
        if n.startswith("dlckpt." + job + "."):
            try:
                os.unlink(os.path.join("/dev/shm", n))
            except OSError:
                pass
    shutil.rmtree("/tmp/dlckpt-run." + job, ignore_errors=True)


def result(out):
    m = re.findall(r"^RESULT .*$", out, re.M)
    if not m:
        return None
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", m[-1])}


def layout(m, k):
    args = ["--nodes", str(m), "--spares", str(k)]
    if k > 1:
        args += ["--scheme", "rs"]
    return args


def run_ckpt(a, mode, m, k, mib, compute):
    """One dlckpt-bench-ckpt run; returns its RESULT (write, encode, overhead, total)."""
    job = "ab%d%s%d" % (os.getpid(), mode[:2], int(time.monotonic() * 1000) % 100000)
    cap = "%dM" % (mib * 3 + 64)
    bench = [os.path.join(a.bin, "dlckpt-bench-ckpt"), "--mib", str(mib), "--iters", str(a.iters),
             "--warmup", str(a.warmup)]
    if compute:
        bench += ["--%s-ms" % compute[0], str(compute[1])]
    if mode == "commit":
        cmd = ["mpiexec", "-launcher", "fork", "-n", str(m)] + bench
        env = {"DLCKPT_JOB": job, "DLCKPT_STORE_CAPACITY": str((mib * 3 + 64) << 20)}
    else:
        cmd = [os.path.join(a.bin, "dlckpt-run"), "--job", job, "--capacity", cap, "--encode",
               mode] + layout(m, k) + ["--"] + bench
        env = {}
    try:
        rc, out, _ = sh(cmd, env)
    finally:
        cleanup(job)
    r = result(out)
    if rc != 0 or r is None:
        sys.exit("async_bench: %s %d:%d %d MiB failed (rc %d):\n%s" % (mode, m, k, mib, rc, out[-3000:]))
    return r


def run_app(a, app, args, mode, nice=None):
    job = "aa%d%d" % (os.getpid(), int(time.monotonic() * 1000) % 100000)
    cmd = [os.path.join(a.bin, "dlckpt-run"), "--job", job, "--nodes", "4", "--spares", "1"]
    if mode != "none":
        cmd += ["--encode", mode]
    if nice is not None:
        cmd += ["--codec-nice", str(nice)]
    cmd += ["--", os.path.join(a.bin, app)] + args
    if mode == "none":
        cmd += ["--ckpt-every", "0"]
    try:
        rc, out, secs = sh(cmd)
    finally:
        cleanup(job)
    if rc != 0:
        sys.exit("async_bench: %s %s failed (rc %d):\n%s" % (app, mode, rc, out[-3000:]))
    cs = re.findall(r"^checksum: (\S+)", out, re.M)
    return secs, cs[-1] if cs else None


def run_recovery(a, mode):
    """dlckpt-bench-ckpt 4:1 at 64 MiB, vn1 killed after checkpoint 3: dlckpt-run's
    recovery_seconds (detection to the application running again)."""
    job = "ar%d%s%d" % (os.getpid(), mode[:2], int(time.monotonic() * 1000) % 100000)
    cmd = [os.path.join(a.bin, "dlckpt-run"), "--job", job, "--capacity", "256M", "--encode", mode,
           "--kill-node", "vn1", "--at", "checkpoint:3"] + layout(4, 1) + [
           "--", os.path.join(a.bin, "dlckpt-bench-ckpt"), "--mib", "64", "--iters", "4", "--warmup", "0",
           "--idle-ms", "300"]
    try:
        rc, out, _ = sh(cmd)
    finally:
        cleanup(job)
    m = re.search(r"^METRIC recovery_seconds ([0-9.]+)", out, re.M)
    if rc != 0 or not m:
        sys.exit("async_bench: recovery run (%s) failed (rc %d):\n%s" % (mode, rc, out[-3000:]))
    return float(m.group(1))


def model_prediction(m, k, mib, compute_s):
    """write + encode + overhead (sync) and write + overhead + max(0, encode -
    compute) (async) from the fitted model, with every process on its own core."""
    path = os.path.join(HERE, "results", "model.csv")
    if not os.path.exists(path):
        return None
    sys.path.insert(0, HERE)
    import ckpt_model  # noqa: E402
    params = {}
    with open(path) as f:
        rows = [r for r in csv.reader(line for line in f if not line.startswith("#"))]
    for r in rows[1:]:
        if len(r) >= 3 and r[0] == "fused passes, with CPU share":
            try:
                params[r[1]] = float(r[2])
            except ValueError:
                pass
    if not params:
        return None
    model = ckpt_model.Model(cores=10 ** 6, share=True, form="fused")
    model.p = params
    parts = model.predict_parts({"mib": mib, "n": k, "m": m, "groups": 1})
    sync = parts["write"] + parts["encode"] + parts["overhead"]
    asyn = parts["write"] + parts["overhead"] + max(0.0, parts["encode"] - compute_s)
    return sync, asyn, parts



def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--configs", default="4:1,8:2")
    ap.add_argument("--mib", default="64,256")
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=3,
                    help="checkpoints before the measured ones (default 3): the first ones touch the "
                         "stores' and the parity slots' fresh pages and are far slower (issue 21, item 5)")
    ap.add_argument("--compute-factor", type=float, default=2.0,
                    help="compute phase = this x the sync encode time (default 2)")
    ap.add_argument("--apps", action="store_true", help="also the heat2d and sppm-mini runs")
    ap.add_argument("--recovery", type=int, default=0, metavar="N",
                    help="also N recoveries per mode (4:1, 64 MiB, a node killed after checkpoint 3)")
    ap.add_argument("--out", default=None, help="also write the report here")
    ap.add_argument("--smoke", action="store_true", help="4:1 at 8 MiB, 2 iterations, small apps")
    a = ap.parse_args()
    # The MPI dlckpt was built with (build/mpi-bin, cmake/mpi.cmake), not `mpiexec` in PATH.
    os.environ["PATH"] = os.path.join(os.path.abspath(a.bin), "..", "mpi-bin") + os.pathsep + os.environ["PATH"]
    if a.smoke:
        a.configs, a.mib, a.iters, a.warmup = "4:1", "8", 2, 1
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    say("# async_bench: %s, %d CPU(s), load %s; medians of %d checkpoints after %d warm-up ones" % (
        time.strftime("%Y-%m-%d %H:%M"), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg()),
        a.iters, a.warmup))
    say("| config | MiB/rank | commit only | sync | async idle | async cpu | compute | "
        "async idle / commit | async cpu / commit | sync / commit | model sync | model async |")
    say("|---|---|---|---|---|---|---|---|---|---|---|---|")
    metrics = []
    for cfg in [c for c in a.configs.split(",") if c]:
        m, k = (int(x) for x in cfg.split(":"))
        for mib in (int(x) for x in a.mib.split(",")):
            commit = run_ckpt(a, "commit", m, k, mib, None)
            sync = run_ckpt(a, "sync", m, k, mib, None)
            compute_ms = max(1, int(a.compute_factor * sync["encode"] * 1000))
            idle = run_ckpt(a, "async", m, k, mib, ("idle", compute_ms))
            cpu = run_ckpt(a, "async", m, k, mib, ("compute", compute_ms))
            base = commit["total"]
            pred = model_prediction(m, k, mib, compute_ms / 1000.0)
            say("| %d:%d | %d | %.3f | %.3f | %.3f | %.3f | %d ms | %.2f | %.2f | %.2f | %s | %s |" % (
                m, k, mib, base, sync["total"], idle["total"], cpu["total"], compute_ms,
                idle["total"] / base, cpu["total"] / base, sync["total"] / base,
                "%.3f" % pred[0] if pred else "-", "%.3f" % pred[1] if pred else "-"))
            name = "async_ckpt_vs_commit_%dto%d_%dmib" % (m, k, mib)
            metrics.append("METRIC %s_idle %.2f x target <= 1.3" % (name, idle["total"] / base))
            metrics.append("METRIC %s_cpu %.2f x target <= 1.3" % (name, cpu["total"] / base))
            metrics.append("METRIC sync_ckpt_vs_commit_%dto%d_%dmib %.2f x" % (m, k, mib, sync["total"] / base))
    if a.apps:
        say()
        say("| app | no checkpoints | sync | async (nice 10) | async (nice 0) | overhead sync | "
            "overhead async n10 | overhead async n0 |")
        say("|---|---|---|---|---|---|---|---|")
        apps = [("heat2d-dlckpt", ["--nx", "2048", "--ny", "2048", "--iters", "40" if not a.smoke else "10",
                                   "--ckpt-every", "1"]),
                ("sppm-mini-dlckpt", ["--iters", "20" if not a.smoke else "5", "--ckpt-every", "1"])]
        for app, args in apps:
            none, c0 = run_app(a, app, args[:-2], "none")
            s, c1 = run_app(a, app, args, "sync")
            n10, c2 = run_app(a, app, args, "async")
            n0, c3 = run_app(a, app, args, "async", nice=0)
            if len({c0, c1, c2, c3}) != 1:
                sys.exit("async_bench: %s: checksums differ: %s" % (app, [c0, c1, c2, c3]))
            say("| %s | %.2f s | %.2f s | %.2f s | %.2f s | %+.0f %% | %+.0f %% | %+.0f %% |" % (
                app, none, s, n10, n0, 100 * (s / none - 1), 100 * (n10 / none - 1), 100 * (n0 / none - 1)))
            metrics.append("METRIC async_app_overhead_%s %.1f %% (sync %.1f %%)" % (
                app.replace("-dlckpt", "").replace("-", "_"), 100 * (n10 / none - 1), 100 * (s / none - 1)))
    if a.recovery > 0:
        rec = {"sync": [], "async": []}
        for _ in range(a.recovery):
            for mode in ("sync", "async"):
                rec[mode].append(run_recovery(a, mode))
        med = {mode: sorted(v)[len(v) // 2] for mode, v in rec.items()}
        say()
        say("| recovery (4:1, 64 MiB) | runs | median | all |")
        say("|---|---|---|---|")
        for mode in ("sync", "async"):
            say("| %s | %d | %.3f s | %s |" % (mode, len(rec[mode]), med[mode],
                                              " ".join("%.3f" % x for x in rec[mode])))
        metrics.append("METRIC async_recovery_vs_sync %.2f x (medians of %d)" % (
            med["async"] / med["sync"], a.recovery))
    say()
    for mline in metrics:
        say(mline)
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
