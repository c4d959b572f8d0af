#!/usr/bin/python3
"""The checkpoint performance study of the thesis' §6.2 and §6.3, on this machine.

Runs, in one go (so that every ratio compares figures measured under the same
load):
  1. baselines: memcpy and raw ISA-L (dlckpt-bench-ckpt-baselines, 1 process,
     CPU time), MPI_Reduce(BXOR, UINT64) over each group size m+1 (the
     original design's reduction);
  2. the IOR table: dlckpt-ior on every target at one size (/dlckpt through the
     static wrappers, with and without --dlckpt.checkpoint under dlckpt-run, -C
     reads of another virtual node's store, the dlckpt-fuse mount if root,
     /dev/shm, the disk with -e);
  3. checkpoints: dlckpt-bench-ckpt under dlckpt-run for every configuration
     m:n (clients:spares per group) x groups and per-rank size: write, encode
     (the codec's events) and overhead; --rounds rounds over all of them, each
     run followed by dlckpt-ior writes with fsync (-e) of the same ranks and
     size into tmpfs (/dev/shm) and a disk file system (--disk-dir, default
     /var/tmp), and into GlusterFS with --glusterfs-dir, so that the ratios
     pair measurements taken under the same load;
  4. recoveries: the same with one data node killed after checkpoint 2;
     detection, survey, rebuild, relaunch (dlckpt-run's summary), reload;
and writes the raw results to OUT/raw.json; ckpt_model.py (run at the end)
aggregates them (medians over rounds), fits the thesis' chapter 7 model and
writes the CSVs, plots and README tables.

Usage: bench/ckpt_study.py [--bin build/bin] [--out bench/results] [--smoke] ...
(--help lists the options). Needs mpiexec; the FUSE row needs root and
/dev/fuse. Everything it starts runs under setsid + timeout, and every
process, shared memory object, mount and scratch file of the study is removed
at exit, also on Ctrl-C.
"""
import argparse
import atexit
import datetime
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# ------------------------------------------------------------------ cleanup --

_jobs = set()       # dlckpt job ids whose processes and shm objects we own
_paths = set()      # scratch directories and files
_mounts = set()     # FUSE mount points
_procs = set()      # process groups (setsid) started by us


def _pids_of_job(job):
    me = str(os.getpid())
    pids = []
    needle = ("DLCKPT_JOB=" + job + "\0").encode()
    for env in glob.glob("/proc/[0-9]*/environ"):
        pid = env.split("/")[2]
        if pid == me:
            continue
        try:
            with open(env, "rb") as f:
                if needle in f.read() + b"\0":
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def cleanup():
    for pg in list(_procs):
        try:
            os.killpg(pg, signal.SIGKILL)
        except OSError:
            pass
    _procs.clear()
    for mnt in list(_mounts):
        subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
        _mounts.discard(mnt)
    for job in list(_jobs):
        for pid in _pids_of_job(job):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for shm in glob.glob("/dev/shm/dlckpt." + job + ".*"):
            try:
                os.unlink(shm)
            except OSError:
                pass
        shutil.rmtree("/tmp/dlckpt-run." + job, ignore_errors=True)
    for p in list(_paths):
        if os.path.isdir(p):
            shutil.rmtree(p, ignore_errors=True)
        elif os.path.exists(p):
            os.unlink(p)
    _paths.clear()


def _on_signal(signum, _frame):
    cleanup()
    sys.exit(128 + signum)


atexit.register(cleanup)
signal.signal(signal.SIGINT, _on_signal)
signal.signal(signal.SIGTERM, _on_signal)

# ------------------------------------------------------------------ running --


def log(msg):
    print("ckpt-study: " + msg, file=sys.stderr, flush=True)


def run(cmd, timeout, env=None):
    """Runs cmd in its own session under `timeout -k 5`; returns (rc, out, err, seconds)."""
    full = ["timeout", "-k", "5", str(int(timeout))] + cmd
    t0 = time.monotonic()
    p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=env)
    _procs.add(p.pid)
    try:
        out, err = p.communicate()
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # anything the command left behind
        except OSError:
            pass
        _procs.discard(p.pid)
    return p.returncode, out, err, time.monotonic() - t0


def machine_info(disk_dir):
    info = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in lscpu.splitlines():
            k, _, v = line.partition(":")
            if k.strip() == "Model name":
                info["cpu"] = v.strip()
    except OSError:
        pass
    info["cores"] = os.cpu_count()
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                info["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
    info["kernel"] = os.uname().release
    info["host"] = os.uname().nodename
    fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE,SOURCE", "-T", disk_dir], capture_output=True,
                        text=True).stdout.split()
    info["disk_dir"] = disk_dir
    info["disk_fs"] = " ".join(fs) if fs else "unknown"
    info["mpi"] = " ".join(subprocess.run(["mpichversion"], capture_output=True, text=True).stdout.split("\n")[0]
                           .split()) if shutil.which("mpichversion") else "unknown"
    return info


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def parse_config(text):
    """'4:1' or '2x4:1' -> (m, n, groups)."""
    m = re.fullmatch(r"(?:(\d+)x)?(\d+):(\d+)", text)
    if not m:
        raise argparse.ArgumentTypeError("configuration '%s': want m:n or Gxm:n" % text)
    g = int(m.group(1) or 1)
    return int(m.group(2)), int(m.group(3)), g


def config_name(m, n, g):
    return ("%dx" % g if g > 1 else "") + "%d:%d" % (m, n)


# ----------------------------------------------------------------- steps --


class Study:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.abspath(a.bin)
        self.raw = {"machine": machine_info(a.disk_dir), "load": [], "baselines": [], "ior": [],
                    "ckpt": [], "recovery": [], "skipped": [], "options": vars(a).copy()}
        self.seq = 0
        self.paired = set()

    def job(self, tag):
        self.seq += 1
        j = "%s%s%d" % (self.a.job_prefix, re.sub(r"[^a-z0-9]", "", tag), self.seq)
        _jobs.add(j)
        return j

    def note_load(self, what):
        self.raw["load"].append({"when": what, "loadavg": loadavg()})

    def skip(self, what, why):
        log("skipping %s: %s" % (what, why))
        self.raw["skipped"].append({"what": what, "why": why})

    def mpiexec(self, n):
        return ["mpiexec", "-launcher", "fork", "-n", str(n)]

    # -- baselines
    def baselines(self):
        a = self.a
        groups = sorted({(m, n) for m, n, _ in a.configs})
        cmd = self.mpiexec(1) + [os.path.join(self.bin, "dlckpt-bench-ckpt-baselines"), "--mib",
                                 ",".join(map(str, a.sizes)), "--reps", str(a.reps), "--groups",
                                 ",".join("%d:%d" % g for g in groups)]
        self._baseline(cmd, "memcpy + ISA-L")
        for m in sorted({m for m, _, _ in a.configs}):
            need = (m + 1) * max(a.sizes) * 2**20 * 3
            if need > 0.8 * mem_available():
                self.skip("MPI_Reduce over %d ranks" % (m + 1), "needs about %.1f GiB" % (need / 2**30))
                continue
            cmd = self.mpiexec(m + 1) + [os.path.join(self.bin, "dlckpt-bench-ckpt-baselines"), "--mib",
                                         ",".join(map(str, a.sizes)), "--reps", str(a.reps)]
            self._baseline(cmd, "MPI_Reduce over %d ranks" % (m + 1))

    def _baseline(self, cmd, what):
        log("baseline: " + what)
        rc, out, err, _ = run(cmd, 900)
        if rc != 0:
            self.skip("baseline " + what, "exit %d: %s" % (rc, err.strip()[-500:]))
            return
        for line in out.splitlines():
            if not line.startswith("BASELINE "):
                continue
            parts = line.split()
            rec = {"kind": parts[1]}
            for kv in parts[2:]:
                k, _, v = kv.partition("=")
                rec[k] = float(v) if re.fullmatch(r"[-+0-9.e]+", v) else v
            self.raw["baselines"].append(rec)

    # -- dlckpt-ior
    def ior(self, target, ranks, mib, path, extra=(), under_run=None, label=None, reps=None, extra_rec=None):
        """One dlckpt-ior run (-F -w [-r] -e ...); returns the parsed JSON or None."""
        reps = reps or self.a.ior_reps
        args = [os.path.join(self.bin, "dlckpt-ior"), "-a", "POSIX", "-b", "%dm" % mib, "-t", "1m", "-F",
                "-i", str(reps), "-o", path, "-O", "summaryFormat=JSON"] + list(extra)
        if under_run is not None:
            job = self.job("ior")
            cmd = [os.path.join(self.bin, "dlckpt-run"), "--job", job, "--timeout", "600",
                   "--capacity", "%dM" % (2 * mib + 64)] + under_run + ["--"] + args
        else:
            cmd = self.mpiexec(ranks) + args
        rc, out, err, _ = run(cmd, 900)
        label = label or target
        if rc != 0:
            self.skip("dlckpt-ior " + label, "exit %d: %s" % (rc, err.strip()[-800:]))
            return None
        start = out.find("{")
        try:
            doc = json.loads(out[start:])
        except ValueError as e:
            self.skip("dlckpt-ior " + label, "output is not JSON (%s): %s" % (e, out[:300]))
            return None
        rec = {"target": label, "ranks": ranks, "mib": mib, "options": " ".join(extra),
               "command": " ".join(args)}
        rec.update(extra_rec or {})
        for s in doc.get("summary", []):
            rec[s["operation"] + "_mibs"] = s["bwMaxMIB"]
            rec[s["operation"] + "_mean_s"] = s["MeanTime"]
        best = {}
        for it in doc["tests"][0]["Results"]:
            for ph in it:
                if ph["access"] in ("write", "read"):
                    k = ph["access"]
                    if k not in best or ph["totalTime"] < best[k]["totalTime"]:
                        best[k] = ph
        for k, ph in best.items():
            rec[k + "_s"] = ph["totalTime"]
            rec[k + "_close_s"] = ph["closeTime"]
        self.raw["ior"].append(rec)
        return rec

    def paired_baselines(self, ranks, mib, rnd):
        """tmpfs and disk writes (+ fsync) of `ranks` x `mib` MiB, once per
        round, right after the checkpoints of the same size and rank count, so
        that both see the same load."""
        key = (ranks, mib, rnd)
        if key in self.paired:
            return
        self.paired.add(key)
        a = self.a
        if ranks * mib * 2**20 * 1.3 > mem_available():
            self.skip("tmpfs %d x %d MiB" % (ranks, mib), "not enough memory")
            return
        d = tempfile.mkdtemp(prefix="dlckpt-study.", dir="/dev/shm")
        _paths.add(d)
        self.ior("tmpfs", ranks, mib, d + "/ior", ["-w", "-e"], label="tmpfs -e", reps=1, extra_rec={"round": rnd})
        shutil.rmtree(d, ignore_errors=True)
        if not a.no_disk:
            d = tempfile.mkdtemp(prefix="dlckpt-study.", dir=a.disk_dir)
            _paths.add(d)
            self.ior("disk", ranks, mib, d + "/ior", ["-w", "-e"], label="disk -e", reps=1,
                     extra_rec={"round": rnd})
            shutil.rmtree(d, ignore_errors=True)
        if a.glusterfs_dir:
            d = tempfile.mkdtemp(prefix="dlckpt-study.", dir=a.glusterfs_dir)
            _paths.add(d)
            self.ior("glusterfs", ranks, mib, d + "/ior", ["-w", "-e"], label="glusterfs -e", reps=1,
                     extra_rec={"round": rnd})
            shutil.rmtree(d, ignore_errors=True)

    def ior_table(self):
        """Every dlckpt-ior target at one size, 4 ranks (the 4:1 layout)."""
        a = self.a
        mib, ranks = a.ior_size, a.ior_ranks
        layout = ["--nodes", str(ranks), "--spares", "1"]
        log("IOR table: %d ranks x %d MiB" % (ranks, mib))
        self.ior("/dlckpt", ranks, mib, "/dlckpt/ior", ["-w", "-r", "-e"], under_run=layout,
                 label="/dlckpt (static wrappers), -e")
        self.ior("/dlckpt", ranks, mib, "/dlckpt/ior", ["-w", "-r", "-C"], under_run=layout,
                 label="/dlckpt, -C (read another node's store)")
        self.ior("/dlckpt", ranks, mib, "/dlckpt/ior", ["-w", "--dlckpt.checkpoint"], under_run=layout,
                 label="/dlckpt, --dlckpt.checkpoint (write + encode, 4:1)")
        d = tempfile.mkdtemp(prefix="dlckpt-study.", dir="/dev/shm")
        _paths.add(d)
        self.ior("tmpfs", ranks, mib, d + "/ior", ["-w", "-r", "-e"], label="/dev/shm (tmpfs), -e")
        shutil.rmtree(d, ignore_errors=True)
        if not a.no_disk:
            d = tempfile.mkdtemp(prefix="dlckpt-study.", dir=a.disk_dir)
            _paths.add(d)
            self.ior("disk", ranks, mib, d + "/ior", ["-w", "-r", "-e"],
                     label="%s (%s), -e" % (a.disk_dir, self.raw["machine"]["disk_fs"].split()[0]))
            shutil.rmtree(d, ignore_errors=True)
        if a.glusterfs_dir:
            d = tempfile.mkdtemp(prefix="dlckpt-study.", dir=a.glusterfs_dir)
            _paths.add(d)
            self.ior("glusterfs", ranks, mib, d + "/ior", ["-w", "-r", "-e"],
                     label="GlusterFS (%s), -e" % a.glusterfs_dir)
            shutil.rmtree(d, ignore_errors=True)
        self.fuse_row(ranks, mib)

    def fuse_row(self, ranks, mib):
        fuse = os.path.join(self.bin, "dlckpt-fuse")
        if os.geteuid() != 0 or not os.path.exists("/dev/fuse") or not os.path.exists(fuse):
            self.skip("dlckpt-fuse row", "needs root, /dev/fuse and build/bin/dlckpt-fuse")
            return
        mnt = tempfile.mkdtemp(prefix="dlckpt-study-mnt.")
        _paths.add(mnt)
        job = self.job("fuse")
        store = "/dlckpt.%s.fuse.r0" % job
        cap = "%dM" % (ranks * mib * 2 + 128)
        rc, out, err, _ = run([fuse, mnt, "--store", store, "--capacity", cap], 60)
        if rc != 0:
            self.skip("dlckpt-fuse row", "dlckpt-fuse exit %d: %s" % (rc, err.strip()[-300:]))
            return
        _mounts.add(mnt)
        self.ior("fuse", ranks, mib, mnt + "/ior", ["-w", "-r", "-e"], label="dlckpt-fuse mount, -e")
        subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
        _mounts.discard(mnt)
        # The daemon exits after the unmount; its store stays for the next owner.
        for _ in range(50):
            if not os.path.exists("/dev/shm" + store) or not _pids_of_job(job):
                break
            time.sleep(0.1)
        try:
            os.unlink("/dev/shm" + store)
        except OSError:
            pass

    # -- checkpoints and recoveries under dlckpt-run
    def dlckpt_run(self, m, n, g, mib, driver_args, kill=None, timeout=900):
        job = self.job("ck")
        cmd = [os.path.join(self.bin, "dlckpt-run"), "--job", job, "--nodes", str(m * g), "--spares",
               str(n * g), "--group-size", str(m), "--spares-per-group", str(n), "--scheme",
               "xor" if n == 1 else "rs", "--capacity", "%dM" % (2 * mib + 64), "--timeout", str(timeout - 30)]
        if kill:
            cmd += ["--kill-node", kill[0], "--at", kill[1]]
        cmd += ["--", os.path.join(self.bin, "dlckpt-bench-ckpt"), "--mib", str(mib)] + driver_args
        return run(cmd, timeout)

    def fits(self, m, n, g, mib):
        ranks, spares = m * g, n * g
        need = ranks * (mib + 2 * mib + 64) * 2**20 + spares * 2 * mib * 2**20 + 2**30
        avail = mem_available()
        shm = shutil.disk_usage("/dev/shm").free
        if need > 0.85 * avail or ranks * (2 * mib + 64) * 2**20 + spares * 2 * mib * 2**20 > 0.9 * shm:
            return "needs about %.1f GiB (available %.1f GiB, /dev/shm free %.1f GiB)" % (
                need / 2**30, avail / 2**30, shm / 2**30)
        return None

    def checkpoints(self):
        """--rounds rounds over every configuration and size, so that a change
        of load spreads over all of them; each run is followed by the tmpfs
        and disk baselines of its rank count and size (once per round)."""
        a = self.a
        for rnd in range(a.rounds):
            for m, n, g in a.configs:
                for mib in a.sizes:
                    name = config_name(m, n, g)
                    why = self.fits(m, n, g, mib)
                    if why:
                        if rnd == 0:
                            self.skip("checkpoints %s x %d MiB" % (name, mib), why)
                        continue
                    log("round %d/%d: checkpoints %s, %d MiB per rank (load %.1f)" % (
                        rnd + 1, a.rounds, name, mib, loadavg()))
                    rc, out, err, secs = self.dlckpt_run(m, n, g, mib, ["--iters", str(a.iters), "--warmup", "1"])
                    res = re.search(r"^RESULT (.*)$", out, re.M)
                    if rc != 0 or not res:
                        self.skip("checkpoints %s x %d MiB, round %d" % (name, mib, rnd + 1),
                                  "exit %d: %s" % (rc, err.strip()[-800:]))
                        continue
                    rec = {"config": name, "m": m, "n": n, "groups": g, "mib": mib, "round": rnd, "wall_s": secs,
                           "loadavg": loadavg()}
                    for kv in res.group(1).split():
                        k, _, v = kv.partition("=")
                        rec[k] = float(v)
                    rec["iterations"] = [l for l in out.splitlines() if l.startswith("ITER ")]
                    # Cold: the run's first checkpoint (the warm-up, into blocks
                    # never written before); warm: the measured ones (RESULT).
                    cold = [l.split() for l in rec["iterations"] if l.endswith(" warmup")]
                    if cold:
                        f = cold[0]
                        rec["cold_write"] = float(f[f.index("write") + 1])
                        rec["cold_total"] = float(f[f.index("total") + 1])
                    self.raw["ckpt"].append(rec)
                    self.paired_baselines(m * g, mib, rnd)

    def recoveries(self):
        a = self.a
        for m, n, g in a.configs:
            for mib in a.recovery_sizes:
                name = config_name(m, n, g)
                why = self.fits(m, n, g, mib)
                if why:
                    self.skip("recovery %s x %d MiB" % (name, mib), why)
                    continue
                log("recovery: %s, %d MiB per rank, vn1 killed after checkpoint 2" % (name, mib))
                rc, out, err, secs = self.dlckpt_run(m, n, g, mib, ["--iters", "3", "--warmup", "1",
                                                                     "--after-restart", "1"],
                                                     kill=("vn1", "checkpoint:2"))
                ph = re.search(r"detection ([0-9.]+) s, (?:teardown ([0-9.]+) s, )?survey ([0-9.]+) s, "
                               r"rebuild ([0-9.]+) s, relaunch ([0-9.]+) s", err)
                reload_ = re.search(r"^RELOAD ([0-9.]+)", out, re.M)
                after = re.search(r"^RESULT .*total=([0-9.]+).*after-restart", out, re.M)
                if rc != 0 or not ph or not reload_:
                    self.skip("recovery %s x %d MiB" % (name, mib),
                              "exit %d, no recovery summary: %s" % (rc, err.strip()[-800:]))
                    continue
                rec = {"config": name, "m": m, "n": n, "groups": g, "mib": mib,
                       "detection": float(ph.group(1)), "teardown": float(ph.group(2) or 0),
                       "survey": float(ph.group(3)),
                       "rebuild": float(ph.group(4)), "relaunch": float(ph.group(5)),
                       "reload": float(reload_.group(1)),
                       "ckpt_after": float(after.group(1)) if after else None, "wall_s": secs,
                       "loadavg": loadavg()}
                rec["total"] = (rec["detection"] + rec["teardown"] + rec["survey"] + rec["rebuild"] +
                                rec["relaunch"])
                self.raw["recovery"].append(rec)



def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="build/bin of dlckpt")
    p.add_argument("--out", default=os.path.join(HERE, "results"), help="results directory")
    p.add_argument("--sizes", default="16,64,256", help="MiB per rank (default 16,64,256)")
    p.add_argument("--configs", default="4:1,8:1,8:2,12:3,2x4:1",
                   help="m:n or Gxm:n, comma-separated (default 4:1,8:1,8:2,12:3,2x4:1)")
    p.add_argument("--iters", type=int, default=3, help="measured checkpoints per run (after 1 warm-up)")
    p.add_argument("--rounds", type=int, default=2,
                   help="rounds over all configurations (default 2; figures: medians over all rounds)")
    p.add_argument("--reps", type=int, default=5, help="repetitions of each baseline")
    p.add_argument("--recovery-sizes", default="64", help="MiB per rank of the recovery runs ('' for none)")
    p.add_argument("--disk-dir", default="/var/tmp", help="directory on a disk file system")
    p.add_argument("--disk-reps", type=int, default=2, help="dlckpt-ior -i for the disk in the IOR table")
    p.add_argument("--ior-reps", type=int, default=3, help="dlckpt-ior -i (tmpfs, memfs)")
    p.add_argument("--ior-size", type=int, default=64, help="MiB per rank of the IOR table")
    p.add_argument("--ior-ranks", type=int, default=4, help="ranks of the IOR table")
    p.add_argument("--no-disk", action="store_true", help="skip the disk file system")
    p.add_argument("--glusterfs-dir", default=os.environ.get("GLUSTER_MNT", ""),
                   help="a directory on a mounted GlusterFS volume: IOR and paired rows there (default "
                        "$GLUSTER_MNT, set by bench/glusterfs/gluster_volume.sh run)")
    p.add_argument("--no-ior-table", action="store_true", help="skip the IOR table")
    p.add_argument("--job-prefix", default="st%d" % os.getpid(),
                   help="prefix of the dlckpt job ids (and so of their /dev/shm objects)")
    p.add_argument("--smoke", action="store_true",
                   help="tiny run for CI: 2:1 and 2x2:1, 4 MiB, 1 iteration (figures meaningless)")
    a = p.parse_args()
    # The MPI dlckpt was built with (build/mpi-bin, cmake/mpi.cmake), not `mpiexec` in PATH.
    os.environ["PATH"] = os.path.join(os.path.abspath(a.bin), "..", "mpi-bin") + os.pathsep + os.environ["PATH"]
    if not re.fullmatch(r"[A-Za-z0-9_-]+", a.job_prefix):
        sys.exit("ckpt-study: --job-prefix: use [A-Za-z0-9_-]")
    if a.smoke:
        a.sizes, a.configs, a.iters, a.reps, a.rounds = "4", "2:1,2x2:1", 1, 1, 1
        a.recovery_sizes, a.ior_size, a.ior_ranks, a.ior_reps, a.disk_reps = "4", 4, 2, 1, 1
    a.sizes = [int(x) for x in str(a.sizes).split(",") if x]
    a.recovery_sizes = [int(x) for x in str(a.recovery_sizes).split(",") if x]
    a.configs = [parse_config(c) for c in str(a.configs).split(",") if c]
    for tool in ("dlckpt-run", "dlckpt-codec", "dlckpt-bench-ckpt", "dlckpt-bench-ckpt-baselines", "dlckpt-ior"):
        if not os.path.exists(os.path.join(a.bin, tool)):
            sys.exit("ckpt-study: %s not found in %s (build first, or give --bin)" % (tool, a.bin))
    if not shutil.which("mpiexec"):
        sys.exit("ckpt-study: mpiexec not found")
    os.makedirs(a.out, exist_ok=True)
    s = Study(a)
    t0 = time.monotonic()
    s.note_load("start")
    log("machine: %(cpu)s, %(cores)s cores, %(memory_gib)s GiB, kernel %(kernel)s" % s.raw["machine"])
    s.baselines()
    s.note_load("after baselines")
    if not a.no_ior_table:
        s.ior_table()
    s.checkpoints()
    s.note_load("after checkpoints")
    s.recoveries()
    s.note_load("end")
    s.raw["seconds"] = time.monotonic() - t0
    raw_path = os.path.join(a.out, "raw.json")
    with open(raw_path, "w") as f:
        json.dump(s.raw, f, indent=1)
    log("raw results: %s (%.0f s)" % (raw_path, s.raw["seconds"]))
    cleanup()
    rc = subprocess.run([sys.executable, os.path.join(HERE, "ckpt_model.py"), raw_path, "--out", a.out]).returncode
    sys.exit(rc)


if __name__ == "__main__":
    main()
