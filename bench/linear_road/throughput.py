"""Embedded-mode throughput on Linear Road standard data: reports per
CPU-second (one core), per hop, with the outputs checked against the oracle.

    python -m bench.linear_road.throughput [--data L1.dat] [--window 6000 7800]
        [--history 600] [--xways 1] [--label NAME]

The window [start, end) of the standard data (default: the 30 peak minutes,
~2,860 reports/s) is fed to the embedded pipeline (scheduler -> deriver ->
router -> matcher processors, direct wiring, bench/linear_road/replay.py's
hop) one simulated second at a time, preceded by `history` seconds of the
data before it (the state the window needs: 5-minute speed windows,
stopped cars, open accidents), fed the same way but not counted. Each
second is followed by the end-of-second release the replay uses
(`advance_idle`). CPU time is `time.process_time()` of this process around
each hop's call; the figure is reports of the window / CPU seconds of the
window. Every toll notification and accident alert of the whole run must
equal the oracle's (src/caesar/examples/linear_road/oracle.py) on the same
reports, or the run is marked failed.

Results are appended to results/throughput.csv (one row per run, with the
commit and label) and plotted in results/throughput.png.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from bench.linear_road.standard import PEAK, Reports, load

RESULTS = Path(__file__).parent / "results"
HOPS = ("scheduler", "deriver", "router", "matcher")
TOPIC = "lr-position-reports"


def fanned_records(reports: Reports, fanout: bool) -> list[dict[str, Any]]:
    """Input values as the producer sends them: with `fanout`, every report
    once per partition segment pseg (src/caesar/examples/linear_road/partitioning.py)."""
    from caesar.examples.linear_road.partitioning import NEIGHBOURHOOD, NO_PSEG
    from caesar.examples.linear_road.records import SEGMENTS

    cols = reports.columns
    if not fanout:
        out = reports.records()
        for r in out:
            r["pseg"] = NO_PSEG
        return out
    n = len(reports)
    k = np.arange(NEIGHBOURHOOD + 1)
    step = np.where(cols["dir"] == 0, 1, -1)
    pseg = cols["seg"][:, None] - k[None, :] * step[:, None]
    ok = (pseg >= 0) & (pseg < SEGMENTS)
    rows = np.repeat(np.arange(n), ok.sum(axis=1))
    expanded = Reports({f: v[rows] for f, v in cols.items()})
    out = expanded.records()
    for r, p in zip(out, pseg[ok].tolist(), strict=True):
        r["pseg"] = p
    return out


def model_fans_out(plan: Any) -> bool:
    return "pseg" in plan.partition_by


class TimedPipeline:
    """The embedded pipeline with the CPU time of each hop's call summed."""

    def __init__(self, plan: Any) -> None:
        from caesar.services.embedded.pipeline import EmbeddedPipeline

        self.pipe = EmbeddedPipeline(plan)
        self.cpu = dict.fromkeys(HOPS, 0.0)
        for hop in HOPS:
            proc = getattr(self.pipe, hop)
            proc.process = self._timed(hop, proc.process)

    def _timed(self, hop: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            c0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.cpu[hop] += time.process_time() - c0
        return call

    def second(self, records: list[Any]) -> list[Any]:
        pipe = self.pipe
        alerts = pipe.feed(records)
        c0 = time.process_time()
        released = pipe.scheduler.advance_idle()
        self.cpu["scheduler"] += time.process_time() - c0
        return alerts + pipe._downstream(released)

    def finish(self) -> list[Any]:
        return self.pipe.finish()


def run(reports: Reports, start: int, history: int, log: Any = print) -> dict[str, Any]:
    from caesar.examples import model_path
    from caesar.examples.linear_road.oracle import ALERT_FIELDS, TOLL_FIELDS, expected_outputs
    from caesar.language import compile_model
    from caesar.services.common.messages import InputRecord

    try:
        from caesar.services.common.collector import tune_collector
    except ImportError:  # before the collector settings existed
        def tune_collector() -> None:
            return None

    plan = compile_model(os.environ.get("CAESAR_LR_MODEL") or model_path("linear_road"))
    fanout = model_fans_out(plan)
    seconds = []
    offset = 0
    for t, sec in reports.seconds():
        values = fanned_records(sec, fanout)
        for v in values:
            v["type"] = "PositionReport"
        recs = [InputRecord(TOPIC, 0, offset + i, v) for i, v in enumerate(values)]
        offset += len(recs)
        seconds.append((t, len(sec), recs))
    log(f"{len(reports):,} reports ({offset:,} input records, fan-out {fanout}), "
        f"{len(seconds)} s; history before {start}")
    tune_collector()
    timed = TimedPipeline(plan)
    outputs: list[Any] = []
    cpu_at_start: dict[str, float] | None = None
    wall0 = cpu0 = 0.0
    window_reports = 0
    for t, n, recs in seconds:
        if t >= start and cpu_at_start is None:
            cpu_at_start = dict(timed.cpu)
            wall0, cpu0 = time.perf_counter(), time.process_time()
        if t >= start:
            window_reports += n
        outputs += timed.second(recs)
    outputs += timed.finish()
    wall = time.perf_counter() - wall0
    cpu_total = time.process_time() - cpu0
    hop_cpu = {h: timed.cpu[h] - (cpu_at_start or {}).get(h, 0.0) for h in HOPS}
    log(f"window: {window_reports:,} reports, {cpu_total:.2f} CPU s, {wall:.2f} wall s")

    expected = expected_outputs(reports.position_reports())
    want = {"TollNotification": Counter(tuple(r) for r in expected.tolls),
            "AccidentAlert": Counter(tuple(r) for r in expected.alerts)}
    fields = {"TollNotification": TOLL_FIELDS, "AccidentAlert": ALERT_FIELDS}
    got = {k: Counter() for k in want}
    for a in outputs:
        if a.event_type in got:
            got[a.event_type][tuple(a.fields.get(f) for f in fields[a.event_type])] += 1
    diffs = {k: sum((want[k] - got[k]).values()) + sum((got[k] - want[k]).values())
             for k in want}
    return {
        "reports": window_reports, "input_records": offset, "fanout": fanout,
        "cpu_s": round(cpu_total, 3), "wall_s": round(wall, 3),
        "reports_per_cpu_s": round(window_reports / cpu_total) if cpu_total else 0,
        **{f"{h}_us_per_report": round(1e6 * hop_cpu[h] / max(1, window_reports), 2)
           for h in HOPS},
        "tolls": sum(got["TollNotification"].values()),
        "alerts": sum(got["AccidentAlert"].values()),
        "differences_tolls": diffs["TollNotification"],
        "differences_alerts": diffs["AccidentAlert"],
    }


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def append_row(path: Path, row: dict[str, Any]) -> None:
    rows = []
    if path.exists():
        with path.open() as f:
            rows = list(csv.DictReader(f))
    rows.append({k: str(v) for k, v in row.items()})
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def plot(path: Path, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with path.open() as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return
    labels = [f"{r['label']}\n{r['commit']}" for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.6 * len(rows)), 4.5))
    axes[0].bar(range(len(rows)), [float(r["reports_per_cpu_s"]) for r in rows], color="C0")
    axes[0].axhline(100_000, color="red", lw=1, label="target 100K reports/s")
    axes[0].set_ylabel("reports per CPU-second")
    axes[0].set_title("embedded mode, standard data, peak window")
    axes[0].legend(fontsize=8)
    bottom = np.zeros(len(rows))
    for i, hop in enumerate(HOPS):
        vals = np.array([float(r.get(f"{hop}_us_per_report") or 0) for r in rows])
        axes[1].bar(range(len(rows)), vals, bottom=bottom, label=hop, color=f"C{i}")
        bottom += vals
    axes[1].set_ylabel("CPU µs per report")
    axes[1].set_title("per hop")
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.set_xticks(range(len(rows)), labels, fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="LR data file (default: $CAESAR_LR_DATA)")
    ap.add_argument("--window", type=int, nargs=2, default=list(PEAK), metavar=("START", "END"))
    ap.add_argument("--history", type=int, default=600, help="seconds fed before the window")
    ap.add_argument("--xways", type=int, default=1)
    ap.add_argument("--label", default="", help="what this run measures (goes in the CSV)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    start, end = args.window
    reports = load(args.data).window(start - args.history, end).xways(args.xways)
    row = {"label": args.label, "commit": commit(), "when": time.strftime("%Y-%m-%d %H:%M"),
           "window": f"{start}-{end}", "history_s": args.history, "xways": args.xways,
           **run(reports, start, args.history)}
    ok = row["differences_tolls"] == 0 and row["differences_alerts"] == 0
    print(f"{row['reports_per_cpu_s']:,} reports per CPU-second "
          f"({row['reports']:,} reports, {row['cpu_s']} s CPU); per report: "
          + ", ".join(f"{h} {row[f'{h}_us_per_report']} µs" for h in HOPS))
    print(f"outputs: {row['tolls']:,} tolls, {row['alerts']:,} alerts; differences from the "
          f"oracle: {row['differences_tolls']} tolls, {row['differences_alerts']} alerts"
          + ("" if ok else "  ** NOT EXACT **"))
    if not args.no_save:
        args.out.mkdir(parents=True, exist_ok=True)
        append_row(args.out / "throughput.csv", row)
        plot(args.out / "throughput.csv", args.out / "throughput.png")


if __name__ == "__main__":
    main()
