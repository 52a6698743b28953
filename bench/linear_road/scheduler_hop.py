"""The scheduler hop of the Kafka + Ray deployment alone: CPU per report of
`SchedulerProcessor.process_columns` on Linear Road standard data, the
records decoded in bulk as the scheduler's runner hands them over.

    python -m bench.linear_road.scheduler_hop [--data L1.dat] [--window 6600 6660]
        [--xways 4] [--batch 250] [--rounds 3] [--label NAME]

The window's reports of `xways` expressways (copies as kafka_ray.py makes
them), with millisecond `ts` as the producers stamp them, go to one
processor per input partition (xway, dir), as in kafka_ray.py, in batches
of `batch` records per partition (a poll's share of one partition), as
InputColumns: the int64 columns of the flat Avro decoder. Each round runs
the whole input through fresh processors; CPU time is
`time.process_time()` around the calls. Run it at two commits side by side
(`at_commit.sh`) for before/after: the bench is this tree's, the processor
the commit's. Rows go to results/scheduler_hop.csv, bars to
results/scheduler_hop.png.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.linear_road.standard import load

RESULTS = Path(__file__).parent / "results"
TOPIC = "lr-position-reports"


def batches(xways: int, start: int, end: int, batch: int, data: str | None
            ) -> list[tuple[int, Any]]:
    """(input partition, InputColumns) in the order the runner sees them:
    each partition's reports in ts order, cut into `batch`-record pieces,
    the partitions' pieces interleaved."""
    from caesar.examples.linear_road.partitioning import NO_PSEG, ms_timestamps
    from caesar.services.common.messages import InputColumns

    reports = load(data).window(start, end).xways(xways)
    cols = dict(reports.columns)
    n = len(reports)
    pseg = np.full(n, NO_PSEG, dtype=np.int64)
    cols["ts"] = ms_timestamps(cols["time"], [cols["xway"], cols["dir"], pseg], cols["pos"])
    cols["pseg"] = pseg
    order = np.argsort(cols["ts"], kind="stable")
    cols = {k: v[order].astype(np.int64) for k, v in cols.items()}
    part = cols["xway"] * 2 + cols["dir"]
    pieces: list[list[tuple[int, Any]]] = []
    for j in np.unique(part).tolist():
        rows = np.flatnonzero(part == j)
        mine = []
        for k in range(0, len(rows), batch):
            r = rows[k:k + batch]
            mine.append((j, InputColumns(
                TOPIC, "PositionReport", np.full(len(r), j, dtype=np.int64),
                np.arange(k, k + len(r), dtype=np.int64), cols["time"][r] * 1000,
                {a: v[r] for a, v in cols.items()}, [b""] * len(r))))
        pieces.append(mine)
    out = []
    for k in range(max(len(p) for p in pieces)):
        out += [p[k] for p in pieces if k < len(p)]
    return out


def run(plan: Any, work: list[tuple[int, Any]]) -> tuple[float, int, int]:
    """CPU seconds, events released and dead letters over the whole input."""
    from caesar.services.common.messages import TxnBatch
    from caesar.services.scheduler.processor import SchedulerProcessor

    procs: dict[int, SchedulerProcessor] = {}
    released = dead = 0
    cpu = 0.0
    for j, cols in work:
        proc = procs.get(j)
        if proc is None:
            proc = procs[j] = SchedulerProcessor(plan)
        t0 = time.process_time()
        out = proc.process_columns(cols)
        cpu += time.process_time() - t0
        released += sum(len(b.events) for b in out.transactions if isinstance(b, TxnBatch))
        dead += len(out.dead_letters)
    return cpu, released, dead


def main() -> None:
    from caesar.examples import model_path
    from caesar.language import compile_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="LR data file (default: $CAESAR_LR_DATA)")
    ap.add_argument("--window", type=int, nargs=2, default=[6600, 6660])
    ap.add_argument("--xways", type=int, default=4)
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    plan = compile_model(str(model_path("linear_road").with_name("model_per_segment.caesar")))
    work = batches(args.xways, *args.window, args.batch, args.data)
    n = sum(len(c) for _, c in work)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()
    rows = []
    for rnd in range(1, args.rounds + 1):
        cpu, released, dead = run(plan, work)
        rows.append({"label": args.label, "commit": commit,
                     "when": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                     "window": "-".join(map(str, args.window)), "xways": args.xways,
                     "batch": args.batch, "round": rnd, "reports": n, "cpu_s": round(cpu, 3),
                     "us_per_report": round(cpu / n * 1e6, 2), "released": released,
                     "dead": dead})
        print(f"round {rnd}: {n:,} reports, {cpu:.2f} CPU s, {cpu / n * 1e6:.2f} µs/report, "
              f"{released:,} released, {dead} dead letters", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "scheduler_hop.csv"
    new = not path.exists()
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        if new:
            w.writeheader()
        w.writerows(rows)
    plot(path, args.out / "scheduler_hop.png")


def plot(csv_path: Path, out: Path) -> None:
    """Median µs per report of each label, in the order labels first appear."""
    from bench.linear_road import bars

    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r["label"], []).append(float(r["us_per_report"]))
    labels = list(by)
    fig, (ax,) = bars.subplots(1, max(5.0, 1.6 * len(labels)))
    bars.bars(ax, labels, [float(np.median(v)) for v in by.values()],
              ylabel="CPU µs per report (median of rounds)",
              title="Scheduler hop: process_columns on LR standard data")
    bars.save(fig, out)


if __name__ == "__main__":
    main()
