"""Embedded-mode throughput on Linear Road standard data: reports per
CPU-second (one core), per hop, against a plain Python loop of the same
rules, with the outputs checked against the oracle.

    python -m bench.linear_road.throughput [--data L1.dat] [--window 6600 6720]
        [--history 120] [--xways 1] [--rounds 2]
        [--models model_per_segment model] [--label NAME]

The window [start, end) of the standard data (default: two minutes inside
the 30 peak minutes, ~2,850 reports/s) is fed to the embedded pipeline
(scheduler -> deriver -> router -> matcher processors, direct wiring,
bench/linear_road/replay.py's hop) one simulated second at a time, preceded
by `history` seconds of the data before it (state the window needs: speed
windows, stopped cars, open accidents), fed the same way. Each second is
followed by an input watermark at its end (`advance(t + 1)`: the source has
sent all of second t, as the producers say with watermark records). CPU
time is `time.process_time()` of this process around each hop's call.

Side by side in one run, interleaved round by round (the machine is shared
and noisy): every model of --models through the pipeline, then the plain
loop, src/caesar/examples/linear_road/oracle.py's `expected_outputs` (the
same tolls and alerts computed by plain single-threaded Python over the same
reports, no pipeline, no context machinery). Two ratios: on the whole
input (history + window), and on the window alone, each timed after the
history ran through it. The window's is the one that counts for a long run:
the pipeline slows down as its per-car state ages (the same 2 minutes of
input at 7500 ran 1.65x slower after 35 minutes of history than after 60 s,
the plain loop 1.2x: session 46), so a short history flatters it. Every toll
notification and accident alert of every pipeline run must equal the
oracle's, or the run is marked failed.

One row per (round, configuration) goes to results/throughput_vs_plain.csv,
the medians and ratios to results/throughput_vs_plain.png.
`--rounds 0` makes the older single pipeline run appended to
results/throughput.csv (plotted in results/throughput.png).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from bisect import bisect_left
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
    once per partition segment pseg; `ts` in milliseconds, in `ts` order
    (src/caesar/examples/linear_road/partitioning.py)."""
    from caesar.examples.linear_road.partitioning import NEIGHBOURHOOD, NO_PSEG, ms_timestamps
    from caesar.examples.linear_road.records import SEGMENTS

    cols = reports.columns
    if not fanout:
        expanded, pseg = reports, np.full(len(reports), NO_PSEG, dtype=np.int64)
    else:
        n = len(reports)
        k = np.arange(NEIGHBOURHOOD + 1)
        step = np.where(cols["dir"] == 0, 1, -1)
        every = cols["seg"][:, None] - k[None, :] * step[:, None]
        ok = (every >= 0) & (every < SEGMENTS)
        rows = np.repeat(np.arange(n), ok.sum(axis=1))
        expanded, pseg = Reports({f: v[rows] for f, v in cols.items()}), every[ok]
    e = expanded.columns
    ts = ms_timestamps(e["time"], [e["xway"], e["dir"], pseg], e["pos"])
    order = np.argsort(ts, kind="stable")
    out = expanded.records()
    for i in order.tolist():
        out[i]["pseg"] = int(pseg[i])
        out[i]["ts"] = int(ts[i])
    return [out[i] for i in order.tolist()]


def model_fans_out(plan: Any) -> bool:
    return "pseg" in plan.partition_by


def second_watermark(records: list[Any], ts_field: str) -> int | None:
    """Just past the latest event time of the records (None: no event)."""
    top = max((int(r.value[ts_field]) for r in records if r.value is not None), default=None)
    return None if top is None else top + 1


class TimedPipeline:
    """The embedded pipeline with the CPU time of each hop's call summed."""

    def __init__(self, plan: Any, engine_factory: Any = None) -> None:
        from caesar.services.embedded.pipeline import EmbeddedPipeline

        self.pipe = EmbeddedPipeline(plan, **({"engine_factory": engine_factory}
                                              if engine_factory else {}))
        # the input's event-time field (LR: `ts`, milliseconds)
        self.ts_field = plan.event_types[0].ts_field
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

    def second(self, records: list[Any], watermark: int | None = None) -> list[Any]:
        """Feed one second's input records, then the input watermark the
        source sends after them (`watermark`: no event below it follows;
        None: just past the records' latest event time)."""
        pipe = self.pipe
        if watermark is None:
            watermark = second_watermark(records, self.ts_field)
        alerts = pipe.feed(records)
        if watermark is not None:
            c0 = time.process_time()
            # The whole second is in: an input watermark just past it releases
            # it. (Until session 35 this was the report's `time` in seconds + 1,
            # far below its `ts` in milliseconds: a no-op, so each second's
            # reports at its latest millisecond waited for the next second's.)
            released = pipe.scheduler.advance(watermark)
            self.cpu["scheduler"] += time.process_time() - c0
            alerts += pipe._downstream(released)
        pipe.result.alerts.clear()  # the caller keeps them, as Session and `caesar run` do
        return alerts

    def finish(self) -> list[Any]:
        return self.pipe.finish()


def input_seconds(reports: Reports, plan: Any) -> list[tuple[int, int, list[Any], int | None]]:
    """Per second of `reports`: (second, its reports, the input records the
    pipeline reads, the source's watermark after them), all made before a
    clock starts; offsets run on across the seconds."""
    from caesar.services.common.messages import InputRecord

    fanout = model_fans_out(plan)
    ts_field = plan.event_types[0].ts_field
    seconds = []
    offset = 0
    for t, sec in reports.seconds():
        values = fanned_records(sec, fanout)
        for v in values:
            v["type"] = "PositionReport"
        recs = [InputRecord(TOPIC, 0, offset + i, v) for i, v in enumerate(values)]
        offset += len(recs)
        seconds.append((t, len(sec), recs, second_watermark(recs, ts_field)))
    return seconds


def run(reports: Reports, start: int, history: int, log: Any = print,
        model: str | None = None, engine_factory: Any = None) -> dict[str, Any]:
    from caesar.examples import model_path
    from caesar.examples.linear_road.oracle import ALERT_FIELDS, TOLL_FIELDS, expected_outputs
    from caesar.language import compile_model

    try:
        from caesar.services.common.collector import tune_collector
    except ImportError:  # before the collector settings existed
        def tune_collector() -> None:
            return None

    plan = compile_model(model or os.environ.get("CAESAR_LR_MODEL") or model_path("linear_road"))
    fanout = model_fans_out(plan)
    seconds = input_seconds(reports, plan)
    offset = sum(len(recs) for _t, _k, recs, _wm in seconds)
    log(f"{len(reports):,} reports ({offset:,} input records, fan-out {fanout}), "
        f"{len(seconds)} s; history before {start}")
    tune_collector()
    timed = TimedPipeline(plan, engine_factory)
    outputs: list[Any] = []
    cpu_at_start: dict[str, float] | None = None
    wall0 = cpu0 = 0.0
    window_reports = 0
    cpu_all0 = time.process_time()
    for t, n, recs, watermark in seconds:
        if t >= start and cpu_at_start is None:
            cpu_at_start = dict(timed.cpu)
            wall0, cpu0 = time.perf_counter(), time.process_time()
        if t >= start:
            window_reports += n
        outputs += timed.second(recs, watermark)
    outputs += timed.finish()
    wall = time.perf_counter() - wall0
    cpu_total = time.process_time() - cpu0
    cpu_all = time.process_time() - cpu_all0
    del seconds
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
        "all_reports": len(reports), "all_cpu_s": round(cpu_all, 3),
        "cpu_s": round(cpu_total, 3), "wall_s": round(wall, 3),
        "reports_per_cpu_s": round(window_reports / cpu_total) if cpu_total else 0,
        **{f"{h}_us_per_report": round(1e6 * hop_cpu[h] / max(1, window_reports), 2)
           for h in HOPS},
        "tolls": sum(got["TollNotification"].values()),
        "alerts": sum(got["AccidentAlert"].values()),
        "differences_tolls": diffs["TollNotification"],
        "differences_alerts": diffs["AccidentAlert"],
    }


def plain_loop(reports: Reports, start: int | None = None) -> dict[str, Any]:
    """The baseline: the oracle's plain Python loop over the same reports
    (objects built before the clock starts, as the pipeline's input records
    are), its window (from `start` on) timed apart, after the history ran
    through the same loop, as the pipeline's is."""
    from caesar.examples.linear_road.oracle import Expected, collecting

    prs = reports.position_reports()
    cut = len(prs) if start is None else bisect_left([r.time for r in prs], start)
    exp = Expected()
    oracle = collecting(exp)
    c0 = time.process_time()
    for record in prs[:cut]:  # as expected_outputs loops
        oracle.feed(record)
    c1 = time.process_time()
    for record in prs[cut:]:
        oracle.feed(record)
    oracle.finish()
    c2 = time.process_time()
    window = len(prs) - cut
    return {"reports": window, "cpu_s": round(c2 - c1, 3),
            "reports_per_cpu_s": round(window / (c2 - c1)) if window and c2 > c1 else 0,
            "all_reports": len(prs), "all_cpu_s": round(c2 - c0, 3),
            "tolls": len(exp.tolls), "alerts": len(exp.alerts)}


PLAIN = "plain loop"


def one(reports: Reports, start: int, history: int, name: str, log: Any = print) -> dict[str, Any]:
    """One configuration's run: a model through the pipeline, or the plain loop."""
    from caesar.examples import model_path

    if name == PLAIN:
        return plain_loop(reports, start)
    base = model_path("linear_road")
    return run(reports, start, history, log, str(base.with_name(f"{name}.caesar")))


def interleaved(reports: Reports, start: int, history: int, models: list[str], rounds: int,
                log: Any = print, child_args: list[str] | None = None) -> list[dict[str, Any]]:
    """`rounds` x (each model through the pipeline, then the plain loop).
    With `child_args` (this module's arguments that load the same reports)
    each run is a process of its own: a pipeline run after another in one
    process works on the heap the earlier one's state of ~7 GB left (a
    new car's state lands in its scattered holes), which no deployment
    has; it ran 1.15x slower than a first run (session 48)."""
    rows = []
    for r in range(rounds):
        for name in [*models, PLAIN]:
            log(f"round {r + 1}/{rounds}: {name}")
            if child_args is None:
                row = one(reports, start, history, name, log)
            else:
                row = _in_child(child_args, name)
            row = {"round": r + 1, "config": name, **row}
            row["all_reports_per_cpu_s"] = round(row["all_reports"] / row["all_cpu_s"])
            log(f"  {row['all_reports_per_cpu_s']:,} reports per CPU-second "
                f"({row['all_reports']:,} reports, {row['all_cpu_s']} CPU s)")
            rows.append(row)
    return rows


def child_args(data: str | None, start: int, end: int, history: int, xways: int = 1) -> list[str]:
    """This module's arguments that load these reports in a child (_in_child)."""
    return [*(["--data", data] if data else []), "--window", str(start), str(end),
            "--history", str(history), "--xways", str(xways)]


def _in_child(child_args: list[str], name: str, echo: bool = True) -> dict[str, Any]:
    """one() in a fresh process (its log on this one's output if `echo`,
    its row as the last line of its stdout, JSON: plain data, nothing
    unpickled)."""
    cmd = [sys.executable, "-m", "bench.linear_road.throughput", *child_args, "--one", name]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    lines = proc.stdout.splitlines()
    for line in lines[:-1] if echo else []:
        print(line, flush=True)
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"run of {name!r} failed (exit {proc.returncode}): {' '.join(cmd)}")
    return dict(json.loads(lines[-1]))


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per configuration: median whole-input and window rates, and the ratio
    to the plain loop's median (same input, same run)."""
    out: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(r["config"] for r in rows):
        mine = [r for r in rows if r["config"] == name]
        out[name] = {"all": float(np.median([float(r["all_reports_per_cpu_s"]) for r in mine]))}
        # rows written before session 46 have no window rate for the plain loop
        window = [float(r["reports_per_cpu_s"]) for r in mine if r.get("reports_per_cpu_s")]
        out[name]["window"] = float(np.median(window)) if window else 0.0
        if name != PLAIN:
            for h in HOPS:
                out[name][h] = float(np.median([float(r[f"{h}_us_per_report"]) for r in mine]))
    plain = out.get(PLAIN, {})
    for v in out.values():
        v["ratio"] = v["all"] / plain["all"] if plain.get("all") else 0.0
        v["window_ratio"] = v["window"] / plain["window"] if plain.get("window") else 0.0
    return out


def plot_vs_plain(rows: list[dict[str, Any]], out: Path, title: str) -> None:
    from bench.linear_road import bars

    summ = summary(rows)
    names = list(summ)
    fig, axes = bars.subplots(2, 11)
    vals = [summ[n]["all"] for n in names]
    bars.bars(axes[0], names, vals, color=["C0" if n != PLAIN else "C7" for n in names],
              ylabel="reports per CPU-second (median of rounds)", title=title)
    for i, n in enumerate(names):
        axes[0].text(i, vals[i], f"{vals[i]:,.0f}\n{summ[n]['ratio']:.2f}x plain; window "
                     f"{summ[n]['window']:,.0f}, {summ[n]['window_ratio']:.2f}x",
                     ha="center", va="bottom", fontsize=8)
    axes[0].set_ylim(0, max(vals) * 1.25)
    models = [n for n in names if n != PLAIN]
    bars.stacked(axes[1], models, {hop: [summ[n][hop] for n in models] for hop in HOPS},
                 ylabel="pipeline CPU µs per report, window", title="per hop")
    bars.save(fig, out)


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def read_rows(path: Path) -> list[dict[str, str]]:
    """A results CSV's rows ([] when there is none yet)."""
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def append_row(path: Path, row: dict[str, Any]) -> None:
    rows = read_rows(path)
    rows.append({k: str(v) for k, v in row.items()})
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def plot(path: Path, out: Path) -> None:
    from bench.linear_road import bars

    rows = read_rows(path)
    if not rows:
        return
    labels = bars.row_labels(rows)
    fig, axes = bars.subplots(2, max(8, 1.6 * len(rows)))
    bars.bars(axes[0], labels, [float(r["reports_per_cpu_s"]) for r in rows],
              ylabel="reports per CPU-second", title="embedded mode, standard data, peak window")
    axes[0].axhline(100_000, color="red", lw=1, label="target 100K reports/s")
    axes[0].legend(fontsize=8)
    bars.stacked(axes[1], labels, {hop: [r.get(f"{hop}_us_per_report") or 0 for r in rows]
                                   for hop in HOPS},
                 ylabel="CPU µs per report", title="per hop")
    bars.save(fig, out)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="LR data file (default: $CAESAR_LR_DATA)")
    ap.add_argument("--window", type=int, nargs=2, default=[6600, 6720],
                    metavar=("START", "END"), help=f"peak: {PEAK[0]} {PEAK[1]}")
    ap.add_argument("--history", type=int, default=120, help="seconds fed before the window")
    ap.add_argument("--xways", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2,
                    help="interleaved rounds vs the plain loop (0: one pipeline run)")
    ap.add_argument("--models", nargs="+", default=["model_per_segment", "model"],
                    help="Linear Road example models (file names without .caesar)")
    ap.add_argument("--label", default="", help="what this run measures (goes in the CSV)")
    ap.add_argument("--in-process", action="store_true",
                    help="every round in this process (before session 48: later pipeline "
                         "rounds run on the heap an earlier one left)")
    ap.add_argument("--one", metavar="CONFIG", help=argparse.SUPPRESS)  # a child's run
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-save", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    start, end = args.window
    reports = load(args.data).window(start - args.history, end).xways(args.xways)
    head = {"label": args.label, "commit": commit(), "when": time.strftime("%Y-%m-%d %H:%M"),
            "window": f"{start}-{end}", "history_s": args.history, "xways": args.xways}
    if args.one:
        row = one(reports, start, args.history, args.one, log=lambda *m: print(*m, flush=True))
        print(json.dumps(row), flush=True)
        return
    if args.rounds > 0:
        child = None if args.in_process else child_args(args.data, start, end, args.history,
                                                        args.xways)
        rows = [{**head, "fresh_process": not args.in_process, **r}
                for r in interleaved(reports, start, args.history, args.models, args.rounds,
                                     child_args=child)]
        _report_vs_plain(rows, args, reports.rate())
        return
    row = {**head, **run(reports, start, args.history)}
    _print_run(row)
    if not args.no_save:
        args.out.mkdir(parents=True, exist_ok=True)
        append_row(args.out / "throughput.csv", row)
        plot(args.out / "throughput.csv", args.out / "throughput.png")


def _exact(row: dict[str, Any]) -> bool:
    return row.get("differences_tolls", 0) == 0 and row.get("differences_alerts", 0) == 0


def _print_run(row: dict[str, Any]) -> None:
    print(f"{row['reports_per_cpu_s']:,} reports per CPU-second "
          f"({row['reports']:,} reports, {row['cpu_s']} s CPU); per report: "
          + ", ".join(f"{h} {row[f'{h}_us_per_report']} µs" for h in HOPS))
    print(f"outputs: {row['tolls']:,} tolls, {row['alerts']:,} alerts; differences from the "
          f"oracle: {row['differences_tolls']} tolls, {row['differences_alerts']} alerts"
          + ("" if _exact(row) else "  ** NOT EXACT **"))


def _report_vs_plain(rows: list[dict[str, Any]], args: argparse.Namespace, rate: float) -> None:
    summ = summary(rows)
    print(f"\nmedians of {args.rounds} interleaved rounds ({rows[0]['all_reports']:,} reports, "
          f"{rate:,.0f}/s on average):")
    for name, v in summ.items():
        extra = f"; window {v['window']:,.0f}/CPU-s {v['window_ratio']:.3f}x plain" + (
            "" if name == PLAIN else "; exact: "
            + str(all(_exact(r) for r in rows if r["config"] == name)))
        print(f"  {name:<20} {v['all']:>10,.0f} reports/CPU-s  {v['ratio']:.3f}x plain{extra}")
    if args.no_save:
        return
    args.out.mkdir(parents=True, exist_ok=True)
    for r in rows:
        append_row(args.out / "throughput_vs_plain.csv", r)
    title = (f"embedded pipeline vs plain loop, standard data {rows[0]['window']} "
             f"(+{args.history} s history), {args.xways} xway, {rows[0]['commit']}")
    plot_vs_plain(rows, args.out / "throughput_vs_plain.png", title)


if __name__ == "__main__":
    main()
