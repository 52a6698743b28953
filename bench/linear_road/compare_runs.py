"""Before/after figure from rows of results/throughput_vs_plain.csv: for each
label (a checkout, run interleaved with the others by the caller), the
median reports per CPU-second of each configuration, its ratio to the plain
loop of the same rounds, and the per-hop µs per report.

    python -m bench.linear_road.compare_runs --labels "baseline: main 27adb32" "pipe 1ea21f0" \
        [--csv results/throughput_vs_plain.csv] [--out results/throughput_pipe_vs_main.png]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from statistics import median

from bench.linear_road.throughput import HOPS, PLAIN, RESULTS


def medians(rows: list[dict[str, str]], label: str) -> dict[str, dict[str, float]]:
    """config -> median rate (whole input), ratio to the plain loop, per-hop µs."""
    mine = [r for r in rows if r["label"] == label]
    if not mine:
        raise SystemExit(f"no rows labelled {label!r}")
    plain = median(float(r["all_reports_per_cpu_s"]) for r in mine if r["config"] == PLAIN)
    out: dict[str, dict[str, float]] = {}
    for config in dict.fromkeys(r["config"] for r in mine if r["config"] != PLAIN):
        rs = [r for r in mine if r["config"] == config]
        rate = median(float(r["all_reports_per_cpu_s"]) for r in rs)
        out[config] = {"rate": rate, "ratio": rate / plain, "plain": plain,
                       **{h: median(float(r[f"{h}_us_per_report"]) for r in rs) for h in HOPS}}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", nargs="+", required=True)
    ap.add_argument("--csv", type=Path, default=RESULTS / "throughput_vs_plain.csv")
    ap.add_argument("--out", type=Path, default=RESULTS / "throughput_pipe_vs_main.png")
    args = ap.parse_args(argv)
    with args.csv.open() as f:
        rows = list(csv.DictReader(f))
    summ = {label: medians(rows, label) for label in args.labels}
    for label, configs in summ.items():
        for config, v in configs.items():
            hops = " / ".join(f"{v[h]:.1f}" for h in HOPS)
            print(f"{label:<28} {config:<20} {v['rate']:>9,.0f} reports/CPU-s "
                  f"{v['ratio']:.3f}x plain ({v['plain']:,.0f}); µs/report {hops}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    configs = list(dict.fromkeys(c for s in summ.values() for c in s))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(summ)
    for i, (label, s) in enumerate(summ.items()):
        x = np.arange(len(configs)) + i * width
        ratio = [s[c]["ratio"] if c in s else 0 for c in configs]
        bars = axes[0].bar(x, ratio, width, label=label)
        axes[0].bar_label(bars, [f"{s[c]['rate']:,.0f}/s\n{s[c]['ratio']:.3f}x" if c in s else ""
                                 for c in configs], fontsize=7)
        bottom = np.zeros(len(configs))
        for j, hop in enumerate(HOPS):
            v = np.array([s[c][hop] if c in s else 0 for c in configs])
            axes[1].bar(x, v, width, bottom=bottom, color=f"C{j}", edgecolor="k",
                        hatch="//" if i else None, label=hop if i == 0 else None)
            bottom += v
    for ax in axes:
        ax.set_xticks(np.arange(len(configs)) + width * (len(summ) - 1) / 2, configs)
    axes[0].set_ylabel("reports per CPU-s / plain loop's (median)")
    axes[0].legend(fontsize=7)
    axes[1].set_ylabel("µs CPU per report in the window (median)")
    axes[1].legend(fontsize=7, title="hop (hatched: " + args.labels[-1] + ")",
                   title_fontsize=7)
    fig.suptitle("embedded pipeline on standard LR data: " + " vs ".join(args.labels),
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
