"""The same window of standard data after histories of different lengths:
the embedded pipeline against the plain loop, each rated on the window
alone (session 46: the pipeline's per-car state costs more as it ages).

    python -m bench.linear_road.state_age [--data L1.dat] [--window 7500 7620]
        [--histories 60 600 1200 2100] [--rounds 1]

Per round and history H, one after the other, each in a process of its
own: the pipeline (`model_per_segment.caesar`) over the H seconds before
the window, then the window, then the plain loop over the same input
(throughput.py's `run` and `plain_loop`). The input rate of the window is
the same in every row, so a rate that falls with H is the state's age, not
the load. Until session 48 all ran in one process (`--in-process`), so a
pipeline ran on the heap the earlier ones' state left, which added to the
age it measures. Rows go to results/state_age.csv, the medians to
results/state_age.png.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.linear_road import throughput as T
from bench.linear_road.standard import load

MODEL = "model_per_segment"


def measure(data: str | None, start: int, end: int, histories: list[int], rounds: int,
            log: Any = print, in_process: bool = False) -> list[dict[str, Any]]:
    every = load(data)
    rows = []
    for r in range(rounds):
        for h in histories:
            if in_process:
                reports = every.window(start - h, end)
                pipe = T.one(reports, start, h, MODEL, lambda *_: None)
                plain = T.one(reports, start, h, T.PLAIN)
            else:
                child = T.child_args(data, start, end, h)
                pipe = T._in_child(child, MODEL, echo=False)
                plain = T._in_child(child, T.PLAIN, echo=False)
            row = {"round": r + 1, "history_s": h, "reports": pipe["reports"],
                   "pipeline": pipe["reports_per_cpu_s"], "plain": plain["reports_per_cpu_s"],
                   "exact": pipe["differences_tolls"] == 0 and pipe["differences_alerts"] == 0}
            row["ratio"] = round(row["pipeline"] / row["plain"], 3) if row["plain"] else 0.0
            log(f"round {r + 1}, history {h:>5} s: pipeline {row['pipeline']:>9,} "
                f"plain {row['plain']:>9,} reports/CPU-s in the window, ratio {row['ratio']}, "
                f"exact {row['exact']}")
            rows.append(row)
    return rows


def medians(rows: list[dict[str, Any]]) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for h in dict.fromkeys(r["history_s"] for r in rows):
        mine = [r for r in rows if r["history_s"] == h]
        out[h] = {k: float(np.median([float(r[k]) for r in mine]))
                  for k in ("pipeline", "plain", "ratio")}
    return out


def plot(rows: list[dict[str, Any]], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    med = medians(rows)
    hs = list(med)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot(hs, [med[h]["pipeline"] for h in hs], "o-", label="embedded pipeline")
    a.plot(hs, [med[h]["plain"] for h in hs], "s-", color="C7", label="plain loop")
    a.set_xlabel("history before the window (s)")
    a.set_ylabel("reports per CPU-second in the window")
    a.set_ylim(0, None)
    a.legend()
    a.set_title(title, fontsize=9)
    b.plot(hs, [med[h]["ratio"] for h in hs], "o-")
    b.axhline(0.5, color="C3", lw=1, label="half the plain loop")
    b.set_xlabel("history before the window (s)")
    b.set_ylabel("pipeline / plain loop")
    b.set_ylim(0, 1)
    b.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="LR data file (default: $CAESAR_LR_DATA)")
    ap.add_argument("--window", type=int, nargs=2, default=[7500, 7620],
                    metavar=("START", "END"))
    ap.add_argument("--histories", type=int, nargs="+", default=[60, 600, 1200, 2100])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--label", default="")
    ap.add_argument("--in-process", action="store_true",
                    help="every run in this process (as before session 48)")
    ap.add_argument("--out", type=Path, default=T.RESULTS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    start, end = args.window
    if any(h <= 0 for h in args.histories):
        raise SystemExit("--histories: each must be positive (seconds before the window)")
    rows = measure(args.data, start, end, args.histories, args.rounds,
                   in_process=args.in_process)
    head = {"label": args.label, "commit": T.commit(), "when": time.strftime("%Y-%m-%d %H:%M"),
            "window": f"{start}-{end}", "fresh_process": not args.in_process}
    args.out.mkdir(parents=True, exist_ok=True)
    for r in rows:
        T.append_row(args.out / "state_age.csv", {**head, **r})
    plot(rows, args.out / "state_age.png",
         f"standard data {start}-{end} after each history, {head['commit']}")
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
