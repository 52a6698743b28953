"""How much of the deriver's and the matcher's CPU is the pattern engine and
the aggregations, and how much the Python around them: one throughput run
(throughput.run, exact outputs checked) with the engine's process/advance and
each aggregation's add_columns/advance timed (`time.process_time`).

    python -m bench.linear_road.engine_split [--model PATH] [--window 6600 6620] [--history 20]
    python -m bench.linear_road.engine_split --plot results/engine_split-session26.csv

With an older checkout's sources and bench (the bench code changed with the
validator merge), e.g. for 2c9783b:
    git archive 2c9783b bench | tar -x -C /tmp/b && \
    PYTHONPATH=/tmp/b:/tmp/caesar-at-2c9783b/src python -m bench.linear_road.engine_split \
        --model /tmp/caesar-at-2c9783b/src/caesar/examples/linear_road/model_per_segment.caesar
(/tmp/caesar-at-<commit> as bench/linear_road/at_commit.sh builds it; this
file copied into /tmp/b/bench/linear_road).
"""

from __future__ import annotations

import argparse
import csv
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TIMED = {"engine": ("process", "advance", "process_columns"), "aggregate": ("add_columns", "advance")}


class _Timed:
    """Stands for an engine (a Cython object: its methods cannot be replaced)."""

    def __init__(self, inner: Any, name: str, acc: dict[str, float]) -> None:
        self._inner, self._name, self._acc = inner, name, acc

    def __getattr__(self, attr: str) -> Any:
        fn = getattr(self._inner, attr)
        if attr not in TIMED["engine"]:
            return fn
        return _clock(fn, f"{self._name}.engine.{attr}", self._acc)


def _clock(fn: Callable[..., Any], key: str, acc: dict[str, float]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        c0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[key] = acc.get(key, 0.0) + time.process_time() - c0
    return call


def plot(csv_path: Path) -> Path:
    """Per run (in the order run, A B A B), the engine's µs per input record
    in the matcher and the deriver, and the window's reports per CPU-second;
    next to the CSV, as .png. The CSV has one row per run, the lines printed
    by main() as columns (results/engine_split-*.csv)."""
    from bench.linear_road import bars

    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    labels = bars.row_labels(rows, "commit", "run")
    fig, (left, right) = bars.subplots(2, 14)
    bars.grouped(left, labels, {
        "matcher engine.process_columns": [r["matcher_engine_process_columns_us"] for r in rows],
        "matcher engine.advance": [r["matcher_engine_advance_us"] for r in rows],
        "deriver engine.process_columns": [r["deriver_engine_process_columns_us"] for r in rows]},
        ylabel="CPU µs per input record",
        title=f"pattern engine, embedded, 1 xway, {rows[0]['window']}",
        rotation=45)
    bars.bars(right, labels, [r["reports_per_cpu_s_window"] for r in rows],
              ylabel="reports per CPU-second", title="whole pipeline, the window", rotation=45,
              color=[f"C{sorted({r['commit'] for r in rows}).index(r['commit'])}" for r in rows])
    out = csv_path.with_suffix(".png")
    bars.save(fig, out)
    return out


def main(argv: list[str] | None = None) -> None:
    import caesar.services.embedded.pipeline as embedded
    from bench.linear_road import throughput
    from bench.linear_road.standard import load
    from caesar.examples import model_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="LR data file (default: $CAESAR_LR_DATA)")
    ap.add_argument("--model", default=str(model_path("linear_road").with_name(
        "model_per_segment.caesar")))
    ap.add_argument("--window", type=int, nargs=2, default=[6600, 6620])
    ap.add_argument("--history", type=int, default=20)
    ap.add_argument("--plot", type=Path, metavar="CSV", help="only draw CSV's runs as a PNG")
    ap.add_argument("--csv", type=Path, help="append this run's row to CSV (the --plot format)")
    ap.add_argument("--label", default="", help="the row's label (with --csv)")
    ap.add_argument("--commit", default="", help="the sources' commit (with --csv)")
    args = ap.parse_args(argv)
    if args.plot:
        print(f"wrote {plot(args.plot)}")
        return
    acc: dict[str, float] = {}
    original = embedded.EmbeddedPipeline.__init__

    def init(self: Any, *a: Any, **kw: Any) -> None:
        original(self, *a, **kw)
        for service in ("deriver", "matcher"):
            graph = getattr(self, service).graph
            if graph.engine is not None:
                graph.engine = _Timed(graph.engine, service, acc)
            for agg in graph.aggregates.values():
                for attr in TIMED["aggregate"]:
                    setattr(agg, attr, _clock(getattr(agg, attr), f"{service}.aggregate.{attr}",
                                              acc))

    embedded.EmbeddedPipeline.__init__ = init  # type: ignore[method-assign]
    start, end = args.window
    reports = load(args.data).window(start - args.history, end).xways(1)
    row = throughput.run(reports, start, args.history, model=args.model)
    n = row["input_records"]
    print(f"{row['reports_per_cpu_s']:,} reports per CPU-second in the window; µs per report "
          "sched / deriv / router / matcher: " + " / ".join(
              str(row[f"{h}_us_per_report"]) for h in throughput.HOPS)
          + f"; differences from the oracle: {row['differences_tolls']} tolls, "
          f"{row['differences_alerts']} alerts")
    for key, cpu in sorted(acc.items()):
        print(f"  {key:<30} {cpu:7.2f} CPU s  {1e6 * cpu / n:6.2f} µs per input record")
    if args.csv:
        _append(args.csv, args, row, {k: round(1e6 * v / n, 2) for k, v in acc.items()})


def _append(path: Path, args: argparse.Namespace, row: dict[str, Any],
            split: dict[str, float]) -> None:
    """One row per run, numbered in the order run (A B A B)."""
    from bench.linear_road import throughput

    old = list(csv.DictReader(path.open())) if path.exists() else []
    out = {"label": args.label, "commit": args.commit,
           "when": time.strftime("%Y-%m-%d %H:%M:%S"), "run": len(old) + 1,
           "window": f"{args.window[0]}-{args.window[1]}", "history_s": args.history,
           "reports_per_cpu_s_window": row["reports_per_cpu_s"],
           **{f"{h}_us_per_report": row[f"{h}_us_per_report"] for h in throughput.HOPS},
           "tolls": row["tolls"], "alerts": row["alerts"],
           "differences_tolls": row["differences_tolls"],
           "differences_alerts": row["differences_alerts"],
           # the process's peak resident memory: data, oracle and pipeline state
           "maxrss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
           **{f"{k.replace('.', '_')}_us": split.get(k, 0.0) for k in (
               f"{s}.{part}.{m}" for s in ("deriver", "matcher")
               for part, ms in (("aggregate", TIMED["aggregate"]),
                                ("engine", ("advance", "process_columns"))) for m in ms)}}
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out))
        if not old:
            w.writeheader()
        w.writerow(out)


if __name__ == "__main__":
    main()
