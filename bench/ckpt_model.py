#!/usr/bin/python3
"""Analysis of the checkpoint study: tables, ratios, the thesis' ch. 7 model.

  bench/ckpt_model.py bench/results/raw.json [--out bench/results]
  bench/ckpt_model.py --incremental OUTPUT   (the incremental encode case, below)

Reads the raw results of ckpt_study.py and writes, into --out:
  ckpt_study.csv   one row per configuration and size: write, encode,
                   overhead, total, throughput, ratios to the baselines and the
                   model's prediction and error
  recovery.csv     dlckpt-run's recovery phases (detection, teardown, survey,
                   rebuild, relaunch) and the application's reload per configuration
  baselines.csv    memcpy, ISA-L, MPI_Reduce, tmpfs and disk figures
  ior.csv          the dlckpt-ior rows
  model.csv        the fitted parameters
  plan_bench.csv   spares_per_group,ckpt_seconds,restart_seconds for
                   `dlckpt-plan --bench` (measured times at the recovery size)
  summary.md       the tables of bench/README.md
  *.png            plots (python3-matplotlib; skipped with a note without it)
and prints the tables and the METRIC lines. Every CSV starts with '#' lines
naming the machine and the load.

The model (thesis §7.1): a checkpoint of d bytes per rank, k spares per group
of n = m + k nodes, G groups,
  C_k = MemCopyTime(d) + k (RSEncodingTime(d) + ReductionTime(d, n))
        + MultiGroupOverhead(G) + overhead
with RSEncodingTime only for k > 1 (XOR needs no scaling),
ReductionTime(d, n) = a (n-1)/n d + b (Rabenseifner's form: the codec's ring
reduce-scatter moves (n-1)/n of the data per node), MultiGroupOverhead =
s E[max of G standard normals] (§7.5) and an overhead linear in d (commit
CRCs, acknowledgement). The thesis gives every node its own processor; here
all virtual nodes share the machine's cores, so every per-node term is
multiplied by its CPU share: max(1, busy processes / cores), the m G writers
for MemCopyTime and the (m + k) G codec processes for the encode terms. The
parameters are fitted by least squares, term by term, to the measured write,
encode and overhead times (non-negative: a negative coefficient drops its
term), and the prediction error of the sum is reported in-sample and
leave-one-out. The same model without the CPU share is fitted too, to show
what the share accounts for.
"""
import argparse
import csv
import json
import math
import os
import sys

GB = 1e9
MIB = 2**20

# E[max of G i.i.d. standard normals] (thesis Table 7.1 for larger G).
_EMAX = {1: 0.0, 2: 0.5642, 3: 0.8463, 4: 1.0294, 5: 1.1630, 10: 1.5388, 50: 2.2491, 100: 2.5076}


def emax(g):
    if g in _EMAX:
        return _EMAX[g]
    # E[max] = integral of x g f(x) F(x)^(g-1): numerically.
    total, step = 0.0, 0.001
    x = -8.0
    while x < 8.0:
        f = math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1 + math.erf(x / math.sqrt(2)))
        total += x * g * f * cdf ** (g - 1) * step
        x += step
    return total


# ------------------------------------------------------------ least squares --


def solve(a, b):
    """Solves the square system a x = b (Gaussian elimination, partial pivoting)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[p][c]) < 1e-300:
            raise ValueError("singular")
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                for k in range(c, n + 1):
                    m[r][k] -= f * m[c][k]
    return [m[i][n] / m[i][i] for i in range(n)]


def lstsq(rows, ys):
    """Least squares with the columns scaled to unit norm; returns coefficients."""
    k = len(rows[0])
    norms = [math.sqrt(sum(r[j] ** 2 for r in rows)) or 1.0 for j in range(k)]
    xs = [[r[j] / norms[j] for j in range(k)] for r in rows]
    ata = [[sum(x[i] * x[j] for x in xs) for j in range(k)] for i in range(k)]
    aty = [sum(x[i] * y for x, y in zip(xs, ys)) for i in range(k)]
    for i in range(k):
        ata[i][i] += 1e-12
    coef = solve(ata, aty)
    return [c / n for c, n in zip(coef, norms)]


def nnls(rows, ys, names):
    """Least squares keeping coefficients >= 0: a term whose coefficient comes
    out negative is dropped (set to 0) and the rest refitted."""
    active = list(range(len(names)))
    while True:
        if not active:
            return {n: 0.0 for n in names}
        coef = lstsq([[r[j] for j in active] for r in rows], ys)
        neg = [(c, j) for c, j in zip(coef, active) if c < 0]
        if not neg:
            out = {n: 0.0 for n in names}
            for c, j in zip(coef, active):
                out[names[j]] = c
            return out
        active.remove(min(neg)[1])


# ------------------------------------------------------------------ model --


class Model:
    """The chapter 7 model, term by term.

    form "thesis": k passes, each an RS scaling (k > 1) and a reduction:
        encode = k (RSEncodingTime(d) + ReductionTime(d, n))
    form "fused": what dlckpt's codec does, one pipelined ring pass that
        carries all k parities, each extra parity adding its scaling and its
        share of the traffic:
        encode = ReductionTime(d, n) + (k - 1) ExtraParityTime(d)
    share False: the thesis' per-node times as they are (no CPU share)."""

    def __init__(self, cores, share=True, form="thesis"):
        self.cores = cores
        self.share = share
        self.form = form
        self.p = {}
        self.names = {"write": ["memcpy_s_per_gb", "write_const_s"],
                      "encode": (["rs_s_per_gb", "reduce_a_s_per_gb", "reduce_b_s"] if form == "thesis"
                                 else ["reduce_a_s_per_gb", "extra_parity_s_per_gb", "reduce_b_s"]),
                      "overhead": ["overhead_const_s", "overhead_s_per_gb", "multigroup_sigma_s"]}

    def shares(self, r):
        if not self.share:
            return 1.0, 1.0
        P, S = r["m"] * r["groups"], r["n"] * r["groups"]
        return max(1.0, P / self.cores), max(1.0, (P + S) / self.cores)

    def features(self, r):
        d = r["mib"] * MIB / GB
        k, m, g = r["n"], r["m"], r["groups"]
        nn = m + k
        sw, se = self.shares(r)
        if self.form == "thesis":
            enc = [(k if k > 1 else 0) * d * se, k * (nn - 1) / nn * d * se, k * se]
        else:
            enc = [(nn - 1) / nn * d * se, (k - 1) * d * se, se]
        return {"write": [d * sw, 1.0], "encode": enc, "overhead": [1.0, d * sw, emax(g)]}

    def fit(self, rows):
        for part, names in self.names.items():
            self.p.update(nnls([self.features(r)[part] for r in rows], [r[part] for r in rows], names))
        return self

    def predict_parts(self, r):
        f = self.features(r)
        return {part: sum(self.p[n] * x for n, x in zip(names, f[part])) for part, names in self.names.items()}

    def predict(self, r):
        return sum(self.predict_parts(r).values())


def errors(model_factory, rows):
    """In-sample and leave-one-out relative errors of the total (fractions)."""
    m = model_factory().fit(rows)
    ins = [abs(m.predict(r) - r["total"]) / r["total"] for r in rows]
    loo = []
    for i, r in enumerate(rows):
        rest = rows[:i] + rows[i + 1:]
        if len(rest) < 4:
            break
        mi = model_factory().fit(rest)
        loo.append(abs(mi.predict(r) - r["total"]) / r["total"])
    return m, ins, loo


# --------------------------------------------------------------- helpers --


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def aggregate(runs):
    """One row per (configuration, size): medians over the measured iterations
    of every round, and the spread (max - min) / median of the total."""
    groups = {}
    for run in runs:
        groups.setdefault((run["config"], run["mib"]), []).append(run)
    rows = []
    for (config, mib), rs in groups.items():
        its, cold = [], []
        for run in rs:
            for line in run.get("iterations", []):
                f = line.split()
                if "warmup" in f and f[1] == "0":
                    # The run's first checkpoint: into blocks never written before.
                    cold.append(float(dict(zip(f[2::2], f[3::2]))["total"]))
                if "warmup" in f or "after-restart" in f:
                    continue
                v = dict(zip(f[2::2], f[3::2]))
                its.append({k: float(v[k]) for k in ("write", "ckpt", "encode", "total")})
        if not its:
            continue
        r = {k: rs[0][k] for k in ("config", "m", "n", "groups", "mib")}
        r["rounds"] = len(rs)
        r["iters"] = len(its)
        r["write"] = median([i["write"] for i in its])
        r["encode"] = median([i["encode"] for i in its])
        r["overhead"] = median([max(0.0, i["ckpt"] - i["encode"]) for i in its])
        r["total"] = median([i["total"] for i in its])
        r["spread_pct"] = 100 * (max(i["total"] for i in its) - min(i["total"] for i in its)) / r["total"]
        # Cold (a run's first checkpoint) apart from warm (the measured ones).
        r["cold_total"] = median(cold) if cold else float("nan")
        r["cold_over_warm"] = r["cold_total"] / r["total"] if cold else float("nan")
        r["throughput_gbs"] = r["m"] * r["groups"] * mib * MIB / r["total"] / GB
        r["loadavg"] = sum(x["loadavg"] for x in rs) / len(rs)
        rows.append(r)
    return rows


def aggregate_ior(recs):
    """dlckpt-ior rows of the same target, ranks and size: medians of the times
    (and of IOR's max bandwidths) over the rounds."""
    groups = {}
    for r in recs:
        groups.setdefault((r["target"], r["ranks"], r["mib"]), []).append(r)
    out = []
    for _, rs in groups.items():
        r = dict(rs[0])
        for k in ("write_s", "read_s", "write_close_s", "write_mibs", "read_mibs"):
            vals = [x[k] for x in rs if k in x]
            if vals:
                r[k] = median(vals)
        r["runs"] = len(rs)
        out.append(r)
    return out


def header_lines(raw):
    mc = raw["machine"]
    loads = ", ".join("%s %.1f" % (l["when"], l["loadavg"]) for l in raw["load"])
    return ["# dlckpt checkpoint study, %s" % mc["date"],
            "# machine: %s, %s cores, %s GiB, kernel %s, host %s, %s" % (
                mc.get("cpu", "?"), mc["cores"], mc.get("memory_gib", "?"), mc["kernel"], mc["host"],
                mc.get("mpi", "")),
            "# disk baseline: %s (%s)" % (mc["disk_dir"], mc["disk_fs"]),
            "# load average (1 min): %s; all virtual nodes share the cores" % loads]


def write_csv(path, raw, columns, rows):
    with open(path, "w", newline="") as f:
        for line in header_lines(raw):
            f.write(line + "\n")
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow([fmt(r.get(c)) for c in columns])


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return "%.6g" % v
    return str(v)


def table(columns, rows):
    """A markdown table."""
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(columns))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(r) + " |")
    return "\n".join(out)


def baseline(raw, kind, **match):
    for b in raw["baselines"]:
        if b["kind"] == kind and all(abs(b.get(k, -1) - v) < 1e-9 for k, v in match.items()):
            return b
    return None


def ior_rec(raw, label, ranks, mib):
    for r in raw["ior"]:
        if r["target"] == label and r["ranks"] == ranks and r["mib"] == mib:
            return r
    return None


# ------------------------------------------------------------------ main --


# ---- the incremental (delta) encode case (issue 19) -------------------------
#
#   bench/ckpt_model.py --incremental OUTPUT_OF_dlckpt-bench-delta-encode
#
# The ch. 7 encode term for a checkpoint of d bytes per node of which the
# fraction f (packed: the union over a group's members) changed since the
# protected epoch:
#   C_k^delta(d, f) = Plan(d) + f (Pack(d) + k (RSEncodingTime(d) + ReductionTime(d, n)) + Apply(d))
#                     + Copy(d, f_prev + f)
# Plan walks the extent lists (no data); Pack reads old and new and writes
# the xor over f d; the reduction and the encoding run over f d instead of d;
# the spare applies f d and copies what its other slot lacks (the previous
# and the current union: about (f_prev + f) d with slot reuse, (1 - f) d
# without). In the measured form, per shape: t_delta / C_k = a + b f, fitted
# by least squares to the forced-delta times over the full encode of the
# same epoch measured alongside (the ratio cancels the load of a shared
# machine, which moves both). The crossover f* = (1 - a) / b is where a delta
# stops paying; the service's automatic threshold (codec/src/service_delta.cc)
# is at or below f* of each scheme measured.
def incremental_rows(path):
    import re
    pat = re.compile(r"^(\d+):(\d+)\s+(\d+)% changed \(packed ([0-9.]+)\): full\s+([0-9.]+) ms, "
                     r"delta\s+([0-9.]+) ms \([0-9.]+\), auto\s+([0-9.]+) ms")
    rows = []
    with open(path) as f:
        for line in f:
            m = pat.match(line.strip())
            if m:
                rows.append({"shape": "%s:%s" % (m.group(1), m.group(2)), "pct": int(m.group(3)),
                             "f": float(m.group(4)), "full": float(m.group(5)) / 1e3,
                             "delta": float(m.group(6)) / 1e3, "auto": float(m.group(7)) / 1e3})
    return rows


def incremental_main(path):
    rows = incremental_rows(path)
    if not rows:
        print("ckpt_model.py: no result lines of dlckpt-bench-delta-encode in %s" % path, file=sys.stderr)
        return 1
    crossovers = []
    print("| shape | changed | packed f | full C_k (s) | delta (s) | delta / C_k measured | model a + b f | error |")
    print("|---|---|---|---|---|---|---|---|")
    for shape in sorted({r["shape"] for r in rows}, key=lambda s: [int(x) for x in s.split(":")]):
        rs = [r for r in rows if r["shape"] == shape]
        (a, b) = lstsq([[1.0, r["f"]] for r in rs], [r["delta"] / r["full"] for r in rs])
        fstar = (1 - a) / b if b > 0 else 1.0
        crossovers.append((shape, fstar, a, b))
        for r in rs:
            ratio = r["delta"] / r["full"]
            pred = a + b * r["f"]
            print("| %s | %d %% | %.3f | %.3f | %.3f | %.3f | %.3f | %+.3f |" % (
                shape, r["pct"], r["f"], r["full"], r["delta"], ratio, pred, pred - ratio))
    print()
    for shape, fstar, a, b in crossovers:
        print("%s: t_delta / C_k = %.3f + %.3f f; crossover f* = %.2f" % (shape, a, b, fstar))
    best = min(c[1] for c in crossovers)
    print("METRIC incremental_model_crossover_fraction %.2f fraction target >= 0.15 (smallest over %s; "
          "the automatic threshold)" % (best, ", ".join(c[0] for c in crossovers)))
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--incremental":
        return incremental_main(sys.argv[2])
    ap = argparse.ArgumentParser(description="analysis of the checkpoint study")
    ap.add_argument("raw", help="raw.json of ckpt_study.py")
    ap.add_argument("--out", default=None, help="output directory (default: beside raw.json)")
    a = ap.parse_args()
    with open(a.raw) as f:
        raw = json.load(f)
    out = a.out or os.path.dirname(os.path.abspath(a.raw))
    os.makedirs(out, exist_ok=True)
    cores = raw["machine"]["cores"] or 1
    rows = aggregate(raw["ckpt"])
    raw["ior"] = aggregate_ior(raw["ior"])
    if not rows:
        print("ckpt-model: no checkpoint measurements in %s" % a.raw, file=sys.stderr)
        return 1
    for r in rows:
        r["ranks"] = r["m"] * r["groups"]
        r["spares"] = r["n"] * r["groups"]

    # ---- ratios to the baselines of the same run
    for r in rows:
        P, d, k, m, g = r["ranks"], r["mib"], r["n"], r["m"], r["groups"]
        data = P * d * MIB
        mc = baseline(raw, "memcpy", mib=d)
        if mc:
            r["write_vs_memcpy"] = (data / r["write"]) / (mc["gbs"] * GB * min(P, cores))
        ig = baseline(raw, "isal_group", m=m, k=k)
        if ig and r["encode"] > 0:
            r["encode_over_isal"] = r["encode"] / (data / (ig["gbs"] * GB * min(cores, P)))
        red = baseline(raw, "mpi_reduce", ranks=m + 1, mib=d)
        mul = baseline(raw, "isal_mul", mib=d)
        if red and mul and r["encode"] > 0:
            # The original design: per spare, every data rank scales its data
            # (RS only; the m ranks share the cores) and one MPI_Reduce per
            # group; the G groups' reductions share the cores too.
            orig = g * k * (red["seconds"] + (m * mul["seconds"] / min(cores, m) if k > 1 else 0))
            r["orig_encode_s"] = orig
            r["encode_speedup_vs_mpi_reduce"] = orig / r["encode"]
        t = ior_rec(raw, "tmpfs -e", P, d)
        if t and "write_s" in t:
            r["tmpfs_s"] = t["write_s"]
            r["ckpt_speedup_vs_tmpfs"] = t["write_s"] / r["total"]
        dk = ior_rec(raw, "disk -e", P, d)
        if dk and "write_s" in dk:
            r["disk_s"] = dk["write_s"]
            r["ckpt_speedup_vs_disk_fsync"] = dk["write_s"] / r["total"]
        gl = ior_rec(raw, "glusterfs -e", P, d)
        if gl and "write_s" in gl:
            r["glusterfs_s"] = gl["write_s"]
            r["ckpt_speedup_vs_glusterfs"] = gl["write_s"] / r["total"]

    # ---- the model
    shared, ins, loo = errors(lambda: Model(cores, True, "thesis"), rows)
    plain, ins_plain, loo_plain = errors(lambda: Model(cores, False, "thesis"), rows)
    fused, ins_fused, loo_fused = errors(lambda: Model(cores, True, "fused"), rows)
    for r in rows:
        parts = shared.predict_parts(r)
        r["pred_write"], r["pred_encode"], r["pred_overhead"] = parts["write"], parts["encode"], parts["overhead"]
        r["pred_total"] = sum(parts.values())
        r["pred_error_pct"] = 100 * (r["pred_total"] - r["total"]) / r["total"]
        r["pred_no_share_total"] = plain.predict(r)
        r["pred_fused_total"] = fused.predict(r)
        # Projection (not a measurement): the fused model with a core per node.
        one_core = Model(cores, False, "fused")
        one_core.p = fused.p
        r["proj_core_per_node_s"] = one_core.predict(r)
        r["proj_core_per_node_gbs"] = r["m"] * r["groups"] * r["mib"] * MIB / r["proj_core_per_node_s"] / GB
        r["pred_fused_error_pct"] = 100 * (r["pred_fused_total"] - r["total"]) / r["total"]
    model_err_mean = 100 * sum(ins) / len(ins)
    model_err_max = 100 * max(ins)
    loo_max = 100 * max(loo) if loo else float("nan")
    loo_mean = 100 * sum(loo) / len(loo) if loo else float("nan")

    # ---- recovery (R_k of §7.1 with the measured phases; rebuild ~ encode)
    recs = raw["recovery"]
    for rr in recs:
        rr["ranks"], rr["spares"] = rr["m"] * rr["groups"], rr["n"] * rr["groups"]
        enc = next((r for r in rows if r["config"] == rr["config"] and r["mib"] == rr["mib"]), None)
        if enc and enc["encode"] > 0:
            rr["rebuild_over_encode"] = rr["rebuild"] / enc["encode"]
    if recs:
        fixed = {k: sum(x[k] for x in recs) / len(recs) for k in ("detection", "survey", "relaunch", "reload")}
        for rr in recs:
            base = dict(rr, total=0, write=0, encode=0, overhead=0)
            rr["pred_total"] = fixed["detection"] + fixed["survey"] + fixed["relaunch"] + \
                shared.predict_parts(base)["encode"]
            rr["pred_error_pct"] = 100 * (rr["pred_total"] - rr["total"]) / rr["total"]

    # ---- files
    cols = ["config", "m", "n", "groups", "ranks", "spares", "mib", "iters", "write", "encode", "overhead",
            "total", "cold_total", "cold_over_warm", "throughput_gbs", "loadavg", "write_vs_memcpy", "encode_over_isal", "orig_encode_s",
            "encode_speedup_vs_mpi_reduce", "tmpfs_s", "ckpt_speedup_vs_tmpfs", "disk_s",
            "ckpt_speedup_vs_disk_fsync", "glusterfs_s", "ckpt_speedup_vs_glusterfs", "pred_write",
            "pred_encode", "pred_overhead", "pred_total",
            "pred_error_pct", "pred_no_share_total", "pred_fused_total", "pred_fused_error_pct", "rounds",
            "spread_pct", "proj_core_per_node_s", "proj_core_per_node_gbs"]
    write_csv(os.path.join(out, "ckpt_study.csv"), raw, cols, rows)
    rcols = ["config", "m", "n", "groups", "ranks", "spares", "mib", "detection", "teardown", "survey", "rebuild",
             "relaunch", "total", "reload", "ckpt_after", "rebuild_over_encode", "pred_total", "pred_error_pct",
             "loadavg"]
    write_csv(os.path.join(out, "recovery.csv"), raw, rcols, recs)
    bcols = ["kind", "mib", "m", "k", "ranks", "seconds", "wall_seconds", "gbs"]
    write_csv(os.path.join(out, "baselines.csv"), raw, bcols, raw["baselines"])
    icols = ["target", "ranks", "mib", "options", "write_mibs", "read_mibs", "write_s", "write_close_s",
             "read_s", "command"]
    write_csv(os.path.join(out, "ior.csv"), raw, icols, raw["ior"])
    mrows = [{"model": "thesis, with CPU share", "parameter": k, "value": v} for k, v in shared.p.items()]
    mrows += [{"model": "fused passes, with CPU share", "parameter": k, "value": v} for k, v in fused.p.items()]
    mrows += [{"model": "fused passes, with CPU share", "parameter": "error_mean_pct",
               "value": 100 * sum(ins_fused) / len(ins_fused)},
              {"model": "fused passes, with CPU share", "parameter": "error_max_pct", "value": 100 * max(ins_fused)},
              {"model": "fused passes, with CPU share", "parameter": "loo_error_max_pct",
               "value": 100 * max(loo_fused) if loo_fused else float("nan")}]
    mrows += [{"model": "thesis as is (no share)", "parameter": k, "value": v} for k, v in plain.p.items()]
    mrows += [{"model": "thesis, with CPU share", "parameter": "error_mean_pct", "value": model_err_mean},
              {"model": "thesis, with CPU share", "parameter": "error_max_pct", "value": model_err_max},
              {"model": "thesis, with CPU share", "parameter": "loo_error_mean_pct", "value": loo_mean},
              {"model": "thesis, with CPU share", "parameter": "loo_error_max_pct", "value": loo_max},
              {"model": "thesis as is (no share)", "parameter": "error_max_pct", "value": 100 * max(ins_plain)},
              {"model": "thesis as is (no share)", "parameter": "loo_error_max_pct",
               "value": 100 * max(loo_plain) if loo_plain else float("nan")}]
    write_csv(os.path.join(out, "model.csv"), raw, ["model", "parameter", "value"], mrows)
    # dlckpt-plan's bench file: the recovery size's checkpoint and restart times.
    plan_rows = []
    for rr in recs:
        c = next((r for r in rows if r["config"] == rr["config"] and r["mib"] == rr["mib"]), None)
        if c:
            plan_rows.append({"spares_per_group": rr["n"], "ckpt_seconds": c["total"],
                              "restart_seconds": rr["total"] + rr["reload"], "config": rr["config"],
                              "mib": rr["mib"]})
    if plan_rows:
        with open(os.path.join(out, "plan_bench.csv"), "w", newline="") as f:
            for line in header_lines(raw):
                f.write(line + "\n")
            f.write("# measured: dlckpt-plan --bench this-file averages the rows of each spares_per_group\n")
            w = csv.writer(f)
            w.writerow(["spares_per_group", "ckpt_seconds", "restart_seconds", "config", "mib"])
            for p in plan_rows:
                w.writerow([p["spares_per_group"], "%.4f" % p["ckpt_seconds"], "%.4f" % p["restart_seconds"],
                            p["config"], p["mib"]])

    # ---- summary tables (markdown) and METRIC lines
    md = []
    mc = raw["machine"]
    md.append("Machine: %s, %s cores, %s GiB, kernel %s; %s; disk baseline %s (%s); date %s; load average %s." % (
        mc.get("cpu", "?"), mc["cores"], mc.get("memory_gib", "?"), mc["kernel"], mc.get("mpi", ""),
        mc["disk_dir"], mc["disk_fs"], mc["date"][:10],
        " / ".join("%.1f" % l["loadavg"] for l in raw["load"])))
    md.append("")
    md.append("Checkpoints (medians of %d checkpoints in %d rounds, each run after a warm-up; seconds; spread = "
              "(max - min) / median of the total; throughput = all ranks' data / total):"
              % (int(rows[0].get("iters", 0)), int(rows[0].get("rounds", 1))))
    md.append("")
    trs = []
    for r in sorted(rows, key=lambda r: (r["mib"], r["n"], r["groups"], r["m"])):
        trs.append([r["config"], str(r["ranks"]), "%d MiB" % r["mib"], "%.3f" % r["write"], "%.3f" % r["encode"],
                    "%.3f" % r["overhead"], "%.3f" % r["total"],
                    "%.3f (%.1fx)" % (r["cold_total"], r["cold_over_warm"]), "%.0f %%" % r["spread_pct"],
                    "%.0f MiB/s" % (r["throughput_gbs"] * GB / MIB), "%.3f (%+.0f %%)" % (r["pred_total"], r["pred_error_pct"]),
                    "%.3f (%+.0f %%)" % (r["pred_fused_total"], r["pred_fused_error_pct"])])
    md.append(table(["m:n", "ranks", "per rank", "write", "encode", "overhead", "total (warm)",
                     "first checkpoint (cold, x warm)", "spread", "throughput",
                     "thesis model", "fused model"], trs))
    md.append("")
    md.append("Ratios to the baselines of the same run (write: share of memcpy bandwidth on min(ranks, cores) "
              "cores; encode / raw ISA-L: multiple of the pure compute time on all cores; speed-ups: baseline "
              "time / dlckpt time):")
    md.append("")
    trs = []
    gluster = any("ckpt_speedup_vs_glusterfs" in r for r in rows)
    for r in sorted(rows, key=lambda r: (r["mib"], r["n"], r["groups"], r["m"])):
        def g(k, f="%.2f"):
            return f % r[k] if k in r else "-"
        trs.append([r["config"], "%d MiB" % r["mib"], g("write_vs_memcpy"), g("encode_over_isal", "%.1f"),
                    g("encode_speedup_vs_mpi_reduce", "%.1fx"), g("ckpt_speedup_vs_tmpfs", "%.2fx"),
                    g("ckpt_speedup_vs_disk_fsync", "%.1fx")] +
                   ([g("ckpt_speedup_vs_glusterfs", "%.1fx")] if gluster else []))
    md.append(table(["m:n", "per rank", "write / memcpy", "encode / raw ISA-L", "encode vs MPI_Reduce",
                     "ckpt vs tmpfs write", "ckpt vs disk write+fsync"] +
                    (["ckpt vs GlusterFS write+fsync"] if gluster else []), trs))
    md.append("")
    if recs:
        md.append("Recoveries (vn1 killed after checkpoint 2; seconds):")
        md.append("")
        trs = []
        for rr in recs:
            trs.append([rr["config"], "%d MiB" % rr["mib"], "%.2f" % rr["detection"], "%.2f" % rr["survey"],
                        "%.2f" % rr["rebuild"], "%.2f" % rr["relaunch"], "%.2f" % rr["total"],
                        "%.3f" % rr["reload"], "%.2f" % rr.get("rebuild_over_encode", float("nan")),
                        "%.2f (%+.0f %%)" % (rr["pred_total"], rr["pred_error_pct"])])
        md.append(table(["m:n", "per rank", "detection", "survey", "rebuild", "relaunch", "total", "reload",
                         "rebuild / encode", "model"], trs))
        md.append("")
    if raw["ior"]:
        # MiB/s, IOR's own unit, as in the plots and the checkpoint table.
        md.append("dlckpt-ior (IOR's Max Write / Max Read, MiB/s):")
        md.append("")
        trs = []
        for i in raw["ior"]:
            if i["target"] in ("tmpfs -e", "disk -e", "glusterfs -e"):
                continue
            trs.append([i["target"], str(i["ranks"]), "%d MiB" % i["mib"],
                        "%.0f" % i["write_mibs"] if "write_mibs" in i else "-",
                        "%.0f" % i["read_mibs"] if "read_mibs" in i else "-"])
        md.append(table(["target", "ranks", "per rank", "write MiB/s", "read MiB/s"], trs))
        md.append("")
    md.append("Model (thesis ch. 7, fitted by least squares; CPU share max(1, processes / %d cores)):" % cores)
    md.append("")
    md.append("- thesis form, parameters: " + ", ".join("%s %.4g" % (k, v) for k, v in shared.p.items()))
    md.append("- prediction error of the checkpoint time: mean %.1f %%, max %.1f %% (leave-one-out: mean %.1f %%, "
              "max %.1f %%)" % (model_err_mean, model_err_max, loo_mean, loo_max))
    md.append("- the thesis' form without the CPU share: max %.1f %% (leave-one-out %.1f %%)" % (
        100 * max(ins_plain), 100 * max(loo_plain) if loo_plain else float("nan")))
    md.append("- the fused form (one ring pass carries all k parities, as dlckpt's codec): mean %.1f %%, max %.1f %% "
              "(leave-one-out max %.1f %%); parameters: %s" % (
                  100 * sum(ins_fused) / len(ins_fused), 100 * max(ins_fused),
                  100 * max(loo_fused) if loo_fused else float("nan"),
                  ", ".join("%s %.4g" % (k, v) for k, v in fused.p.items())))
    if raw["skipped"]:
        md.append("")
        md.append("Skipped: " + "; ".join("%s (%s)" % (s["what"], s["why"][:200]) for s in raw["skipped"]))
    summary = "\n".join(md) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(summary)
    print(summary)

    metrics = []
    big = max(r["mib"] for r in rows)
    disk = [r["ckpt_speedup_vs_disk_fsync"] for r in rows if r["mib"] == big and "ckpt_speedup_vs_disk_fsync" in r]
    if disk:
        metrics.append("METRIC ckpt_speedup_vs_disk_fsync %.2f x target >= 1 (smallest over the configurations, "
                       "%d MiB per rank)" % (min(disk), big))
    glu = [r["ckpt_speedup_vs_glusterfs"] for r in rows if r["mib"] == big and "ckpt_speedup_vs_glusterfs" in r]
    if glu:
        metrics.append("METRIC ckpt_speedup_vs_glusterfs %.2f x target >= 10 (smallest over the configurations, "
                       "%d MiB per rank; GlusterFS write + fsync of the same ranks and size)" % (min(glu), big))
    enc = [r["encode_speedup_vs_mpi_reduce"] for r in rows if r["mib"] == big and "encode_speedup_vs_mpi_reduce" in r]
    if enc:
        metrics.append("METRIC ckpt_encode_speedup_vs_mpi_reduce %.2f x target >= 2 (smallest over the "
                       "configurations, %d MiB per rank)" % (min(enc), big))
    # Groups added: G groups of m:n against one m:n group, same size per rank.
    scal = []
    for r in rows:
        if r["groups"] > 1:
            one = next((o for o in rows if o["groups"] == 1 and o["m"] == r["m"] and o["n"] == r["n"]
                        and o["mib"] == r["mib"]), None)
            if one:
                scal.append((r["throughput_gbs"] / one["throughput_gbs"], r["config"], r["mib"]))
    if scal:
        worst = min(scal)
        metrics.append("METRIC ckpt_throughput_more_groups_vs_1 %.2f ratio target >= 0.8 (smallest: %s against "
                       "one group, %d MiB per rank)" % worst)
    metrics.append("METRIC model_prediction_error_max %.1f %% target <= 20 (thesis form with CPU share; mean %.1f %%, "
                   "leave-one-out max %.1f %%)" % (model_err_max, model_err_mean, loo_max))
    metrics.append("METRIC model_fused_prediction_error_max %.1f %% target <= 20 (one pass for k parities; mean "
                   "%.1f %%, leave-one-out max %.1f %%)" % (
                       100 * max(ins_fused), 100 * sum(ins_fused) / len(ins_fused),
                       100 * max(loo_fused) if loo_fused else float("nan")))
    print("\n".join(metrics))
    with open(os.path.join(out, "summary.md"), "a") as f:
        f.write("\n" + "\n".join("`%s`" % m for m in metrics) + "\n")

    plots(raw, rows, recs, out)
    return 0


def place_labels(fig, ax, points, texts, avoid=()):
    """Labels each data point without overlaps: greedily, largest y first, at
    the first of a ring of offsets (growing radius) whose box touches no placed
    label, no marker in `avoid` or `points`, the legend or the axes' edge; a
    label moved away from its point gets a thin leader line."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    to_px = ax.transData.transform
    ax_box = ax.get_window_extent(renderer)
    legend = ax.get_legend()
    blocked = [legend.get_window_extent(renderer)] if legend else []
    marks = [to_px(p) for p in list(avoid) + list(points)]
    scale = fig.dpi / 72.0
    pad = 6 * scale
    placed = []

    def free(x0, y0, x1, y1):
        if x0 < ax_box.x0 + 2 or x1 > ax_box.x1 - 2 or y0 < ax_box.y0 + 2 or y1 > ax_box.y1 - 2:
            return False
        for b in blocked:
            if x0 < b.x1 and x1 > b.x0 and y0 < b.y1 and y1 > b.y0:
                return False
        for (a0, b0, a1, b1) in placed:
            if x0 < a1 + 1 and x1 > a0 - 1 and y0 < b1 + 1 and y1 > b0 - 1:
                return False
        for (mx, my) in marks:  # a marker's radius (~6 pt) and a gap
            if x0 - pad < mx < x1 + pad and y0 - pad < my < y1 + pad:
                return False
        return True

    order = sorted(range(len(points)), key=lambda i: -points[i][1])
    for i in order:
        px, py = to_px(points[i])
        t = ax.text(0, 0, texts[i], fontsize=6)
        ext = t.get_window_extent(renderer)
        t.remove()
        w, h = ext.width, ext.height
        best = None
        for radius in (5, 10, 16, 24, 34, 46, 60, 78, 100):
            for dx, dy in ((1, 0), (-1, 0), (1, -1), (-1, 1), (1, 1), (-1, -1), (0, -1), (0, 1)):
                ox, oy = dx * radius * scale, dy * radius * scale
                x0 = px + ox if dx >= 0 else px + ox - w
                if dx == 0:
                    x0 = px - w / 2
                y0 = py + oy - h / 2 if dy == 0 else (py + oy if dy > 0 else py + oy - h)
                if free(x0, y0, x0 + w, y0 + h):
                    best = (x0, y0, radius)
                    break
            if best:
                break
        if best is None:  # nowhere free: right of the point, overlapping
            best = (px + 5 * scale, py - h / 2, 5)
        x0, y0, radius = best
        placed.append((x0, y0, x0 + w, y0 + h))
        tx, ty = ax.transData.inverted().transform((x0, y0))
        ax.annotate(texts[i], points[i], xytext=(tx, ty), textcoords="data", fontsize=6, ha="left", va="bottom",
                    arrowprops=dict(arrowstyle="-", lw=0.4, color="0.4", shrinkA=0, shrinkB=2)
                    if radius >= 10 else None)


def plots(raw, rows, recs, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("ckpt-model: matplotlib not found (apt-get install python3-matplotlib; run with /usr/bin/python3): "
              "no plots", file=sys.stderr)
        return
    mc = raw["machine"]
    where = "%s, %s cores, %s GiB, %s" % (mc.get("cpu", "?"), mc["cores"], mc.get("memory_gib", "?"), mc["date"][:10])
    sizes = sorted({r["mib"] for r in rows})
    configs = []
    for r in sorted(rows, key=lambda r: (r["n"], r["groups"], r["m"])):
        if r["config"] not in configs:
            configs.append(r["config"])

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=110)
        plt.close(fig)

    # checkpoint time split
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 4), squeeze=False)
    for ax, s in zip(axes[0], sizes):
        xs, w, e, o, pred, fpred = [], [], [], [], [], []
        for c in configs:
            r = next((r for r in rows if r["config"] == c and r["mib"] == s), None)
            if r:
                xs.append(c)
                w.append(r["write"])
                e.append(r["encode"])
                o.append(r["overhead"])
                pred.append(r["pred_total"])
                fpred.append(r["pred_fused_total"])
        ax.bar(xs, w, label="write")
        ax.bar(xs, e, bottom=w, label="encode")
        ax.bar(xs, o, bottom=[a + b for a, b in zip(w, e)], label="overhead")
        ax.plot(xs, pred, "k_", markersize=18, mew=2, label="thesis model")
        ax.plot(xs, fpred, "r_", markersize=18, mew=2, label="fused model")
        ax.set_title("%d MiB per rank" % s)
        ax.set_xlabel("m:n (clients:spares per group)")
        ax.set_ylabel("checkpoint time (s)")
    axes[0][0].legend()
    fig.suptitle("dlckpt checkpoint time, split (%s)" % where, fontsize=9)
    save(fig, "ckpt_time.png")

    # aggregate throughput against tmpfs and disk writes of the same ranks
    fig, ax = plt.subplots(figsize=(9.5, 4))
    width = 0.8 / max(1, len(sizes))
    for i, s in enumerate(sizes):
        ys, xs = [], []
        for j, c in enumerate(configs):
            r = next((r for r in rows if r["config"] == c and r["mib"] == s), None)
            if r:
                xs.append(j + i * width)
                ys.append(r["throughput_gbs"] * GB / MIB)
        ax.bar(xs, ys, width, label="%d MiB per rank" % s)
        for j, c in enumerate(configs):
            r = next((r for r in rows if r["config"] == c and r["mib"] == s), None)
            if r and "disk_s" in r:
                ax.plot([j + i * width], [r["ranks"] * s / r["disk_s"]], "kv")
            if r and "tmpfs_s" in r:
                ax.plot([j + i * width], [r["ranks"] * s / r["tmpfs_s"]], "r^")
    ax.plot([], [], "r^", label="tmpfs write (same ranks)")
    ax.plot([], [], "kv", label="disk write + fsync")
    ax.set_xticks([j + width * (len(sizes) - 1) / 2 for j in range(len(configs))])
    ax.set_xticklabels(configs)
    ax.set_xlabel("m:n (clients:spares per group; 2x: two groups)")
    ax.set_ylabel("aggregate throughput, MiB/s (write + encode)")
    ax.set_title("dlckpt checkpoint throughput (%s)" % where, fontsize=9)
    # Beside the axes, never over the bars (it covered the 4:1 group).
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    save(fig, "ckpt_throughput.png")

    if recs:
        fig, ax = plt.subplots(figsize=(8.2, 4))
        xs = ["%s\n%d MiB" % (r["config"], r["mib"]) for r in recs]
        bottom = [0.0] * len(recs)
        # dlckpt-run's recovery phases, as its recovery lines name them.
        for k in ("detection", "teardown", "survey", "rebuild", "relaunch"):
            vals = [r.get(k, 0.0) for r in recs]
            ax.bar(xs, vals, bottom=bottom, label=k)
            bottom = [a + b for a, b in zip(bottom, vals)]
        ax.set_xlabel("m:n (clients:spares per group), data per rank")
        ax.set_ylabel("recovery time (s)")
        ax.set_title("dlckpt recovery after a node loss, dlckpt-run's phases (%s)" % where, fontsize=9)
        # Phases top to bottom as stacked; beside the axes, never over a bar.
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles[::-1], labels[::-1], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0)
        save(fig, "recovery.png")

    # Log-log: the times span two decades, so the small sizes are not one
    # clump at the origin; y = x and the +-20 % band stay straight lines.
    fig, ax = plt.subplots(figsize=(6.4, 6.4))
    meas = [r["total"] for r in rows]
    pred = [r["pred_total"] for r in rows]
    noshare = [r["pred_no_share_total"] for r in rows]
    fused = [r["pred_fused_total"] for r in rows]
    allv = [v for v in meas + pred + noshare + fused if v > 0]
    lo, top = min(allv) / 1.6, max(allv) * 1.6
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.plot([lo, top], [lo, top], "k-", lw=0.8)
    ax.plot([lo, top], [lo * 1.2, top * 1.2], "k:", lw=0.6)
    ax.plot([lo, top], [lo * 0.8, top * 0.8], "k:", lw=0.6)
    ax.plot(meas, pred, "o", label="ch. 7 model with CPU share")
    ax.plot(meas, fused, "s", mfc="none", label="fused passes, CPU share")
    ax.plot(meas, noshare, "x", label="ch. 7 model as is")
    ax.set_xlabel("measured checkpoint time (s)")
    ax.set_ylabel("predicted (s)")
    ax.set_xlim(lo, top)
    ax.set_ylim(lo, top)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("model vs measurement (dotted: +-20 %%; labels m:n/MiB per rank)\n%s" % where, fontsize=8)
    place_labels(fig, ax, [(r["total"], r["pred_total"]) for r in rows],
                 ["%s/%d" % (r["config"], r["mib"]) for r in rows],
                 avoid=list(zip(meas, pred)) + list(zip(meas, fused)) + list(zip(meas, noshare)))
    save(fig, "model.png")


if __name__ == "__main__":
    sys.exit(main())
