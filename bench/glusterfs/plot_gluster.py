#!/usr/bin/env python3
"""Plots gluster_bench.sh's CSV: IOR write bandwidth, checkpoint time and
recovery time per target, one panel each (panels without data are left out).

usage: plot_gluster.py RESULTS.csv OUT.png [SUBTITLE]
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {
    "dlckpt": "/dlckpt\n(write +\nencode)",
    "fuse": "dlckpt-fuse\nmount\n(no encode)",
    "devshm": "/dev/shm",
    "disk": "local disk\n(fsync)",
    "glusterfs": "GlusterFS\n(fsync)",
}
ORDER = ["dlckpt", "fuse", "devshm", "disk", "glusterfs"]
COLORS = {"dlckpt": "#1b7837", "fuse": "#5aae61", "devshm": "#9970ab",
          "disk": "#bababa", "glusterfs": "#d6604d"}


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = list(csv.DictReader(open(sys.argv[1])))
    get = {(r["section"], r["target"], r["metric"]): float(r["value"])
           for r in rows if r["value"] not in ("", "nan")}

    def series(section, metric):
        return [(t, get[(section, t, metric)]) for t in ORDER if (section, t, metric) in get]

    # One unit across the project's plots: MiB/s, IOR's (the CSV holds it).
    ior = series("ior", "write_bw")
    ckpt = series("ckpt", "ckpt_seconds")
    phases_d = ["detection", "teardown", "survey", "rebuild", "relaunch", "app_read"]
    phases_g = ["detection", "relaunch_read"]
    rec = any(k[0] == "recovery" for k in get)
    panels = [p for p in (("ior", ior), ("ckpt", ckpt), ("rec", rec)) if p[1]]
    if not panels:
        print("plot_gluster: no data in " + sys.argv[1], file=sys.stderr)
        return 1
    # The recovery panel is wider: its legend stands beside its bars.
    widths = [1.6 if kind == "rec" else 1.0 for kind, _ in panels]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * sum(widths), 4.6),
                             gridspec_kw={"width_ratios": widths})
    if len(panels) == 1:
        axes = [axes]
    for ax, (kind, data) in zip(axes, panels):
        if kind in ("ior", "ckpt"):
            names = [t for t, _ in data]
            vals = [v for _, v in data]
            bars = ax.bar([LABELS[t] for t in names], vals, color=[COLORS[t] for t in names])
            fmt = "{:.0f}" if kind == "ior" else "{:.3f}"
            for b, v in zip(bars, vals):
                ax.annotate(fmt.format(v), (b.get_x() + b.get_width() / 2, v),
                            ha="center", va="bottom", fontsize=8)
            if kind == "ior":
                ax.set_title("IOR write, file per process, fsync")
                ax.set_ylabel("write bandwidth, MiB/s (best of repetitions)")
            else:
                ax.set_title("application checkpoint time")
                ax.set_ylabel("seconds per checkpoint (median)")
            ax.tick_params(axis="x", labelsize=8)
            ax.set_xlabel("target")
            ax.set_ylim(0, max(vals) * 1.12)  # room for the value labels only
        else:
            def stack(target, phases, bar, color, label):
                """One bar of the target's recovery phases, stacked in order."""
                bottom = 0.0
                for i, ph in enumerate(phases):
                    v = get.get(("recovery", target, ph))
                    if v is not None:
                        ax.bar(bar, v, bottom=bottom, color=color(i), label=label(ph))
                        bottom += v
                if bottom > 0:
                    ax.annotate("{:.2f}".format(bottom), (bar, bottom), ha="center", va="bottom", fontsize=8)
                return bottom

            tops = [0.0]
            # Each phase its own hue (shades of one colour were told apart
            # by nobody); GlusterFS's in reds, dlckpt's in other hues.
            tops.append(stack("glusterfs", phases_g, "GlusterFS:\nkill, rerun,\nread back",
                  lambda i: ("#f4a582", "#b2182b")[i % 2],
                  lambda ph: "GlusterFS " + ph.replace("_", " + ")))
            tops.append(stack("dlckpt", phases_d, "dlckpt:\nnode kill,\nrebuild on spare",
                  lambda i: ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf")[i % 6],
                  lambda ph: "dlckpt " + ph.replace("_", " ")))
            ax.set_title("kill to 'restarted from iteration'")
            ax.set_ylabel("recovery time (s)")
            ax.set_xlabel("target, what was killed")
            # The legend stands beside the axes, so the y-axis ends just
            # above the highest bar (it used to run 1.6x past it).
            handles, labels = ax.get_legend_handles_labels()
            ax.legend(handles[::-1], labels[::-1], fontsize=9, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                      borderaxespad=0, title="phases, top to bottom", title_fontsize=9)
            ax.set_ylim(0, max(tops) * 1.12)
    title = "dlckpt vs GlusterFS on one machine"
    if len(sys.argv) > 3:
        title += " (" + sys.argv[3] + ")"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
