"""The matcher's output path alone: CPU per report of turning the engine's
match columns into records (`StageGraph._records_of`), alerts
(`MatcherProcessor._alerts`) and the bytes the runner produces
(`OutputEncoder.encode`), on Linear Road standard data.

    python -m bench.linear_road.matcher_output [--data L1.dat] [--window 6600 6660]
        [--history 60] [--xways 1] [--rounds 2] [--label NAME]

The embedded pipeline runs the window as bench/linear_road/throughput.py
does (model_per_segment, every output checked against the oracle). The two
functions are wrapped with `time.process_time()`; the alerts each
`_alerts` call returns are encoded at once as the matcher's runner encodes
a step's alerts (the model's Avro schemas, flat integer records in bulk),
timed too. The matcher hop's whole CPU is reported beside it. Run it at two
commits (`at_commit.sh`) for before/after. Rows go to
results/matcher_output.csv, stacked bars (median per label) to
results/matcher_output.png.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.linear_road.standard import load
from bench.linear_road.throughput import commit, run

RESULTS = Path(__file__).parent / "results"
PARTS = ("records_of", "alerts", "encode")


def timed_run(reports: Any, start: int, history: int, model: str) -> dict[str, Any]:
    """One pipeline run with the output path's parts timed (restored after)."""
    from caesar.codecs import make_codec
    from caesar.services.common.config import ServiceConfig
    from caesar.services.matcher.processor import MatcherProcessor
    from caesar.services.matcher.runner import OutputEncoder
    from caesar.services.matcher.stage_graph import StageGraph
    from caesar.settings import TopicSettings

    cpu = dict.fromkeys(PARTS, 0.0)
    topics = TopicSettings(partitions=1, alerts_copy=False)  # as kafka_ray.py deploys
    encoders: dict[int, OutputEncoder] = {}
    originals = (StageGraph._records_of, MatcherProcessor._alerts)
    records_of, alerts_of = originals

    def timed_records_of(self: Any, *args: Any) -> Any:
        c0 = time.process_time()
        try:
            return records_of(self, *args)
        finally:
            cpu["records_of"] += time.process_time() - c0

    def timed_alerts(self: Any, outputs: Any) -> Any:
        c0 = time.process_time()
        alerts = alerts_of(self, outputs)
        c1 = time.process_time()
        cpu["alerts"] += c1 - c0
        if alerts:
            enc = encoders.get(id(self))
            if enc is None:
                cfg = ServiceConfig(self.plan, topics, make_codec(), (0,), "bench")
                enc = encoders[id(self)] = OutputEncoder(cfg)
            enc.encode(alerts)
            cpu["encode"] += time.process_time() - c1
        return alerts

    StageGraph._records_of = timed_records_of  # type: ignore[method-assign]
    MatcherProcessor._alerts = timed_alerts  # type: ignore[method-assign]
    try:
        row = run(reports, start, history, model=model, log=lambda *_: None)
    finally:
        StageGraph._records_of, MatcherProcessor._alerts = originals  # type: ignore[method-assign]
    # the parts ran over history and window; per report of the whole input
    n = row["all_reports"]
    out = {f"{p}_us_per_report": round(1e6 * cpu[p] / n, 3) for p in PARTS}
    out["output_path_us_per_report"] = round(1e6 * sum(cpu.values()) / n, 3)
    return {**row, **out}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="LR data file (default: $CAESAR_LR_DATA)")
    ap.add_argument("--window", type=int, nargs=2, default=[6600, 6660],
                    metavar=("START", "END"))
    ap.add_argument("--history", type=int, default=60)
    ap.add_argument("--xways", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    from caesar.examples import model_path

    model = str(model_path("linear_road").with_name("model_per_segment.caesar"))
    start, end = args.window
    reports = load(args.data).window(start - args.history, end).xways(args.xways)
    head = {"label": args.label, "commit": commit(), "when": time.strftime("%Y-%m-%d %H:%M"),
            "window": f"{start}-{end}", "history_s": args.history, "xways": args.xways}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "matcher_output.csv"
    for r in range(args.rounds):
        row = {**head, "round": r + 1, **timed_run(reports, start, args.history, model)}
        exact = row["differences_tolls"] == row["differences_alerts"] == 0
        print(f"round {r + 1}: {row['all_reports']:,} reports, exact {exact}: output path "
              f"{row['output_path_us_per_report']} µs per report (records "
              f"{row['records_of_us_per_report']}, alerts {row['alerts_us_per_report']}, "
              f"encode {row['encode_us_per_report']}); matcher {row['matcher_us_per_report']}")
        new = not path.exists()
        with path.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(row))
            if new:
                w.writeheader()
            w.writerow(row)
    plot(path, path.with_suffix(".png"))


def plot(csv_path: Path, out: Path) -> None:
    """Each label's median µs per report of the three parts, stacked."""
    from bench.linear_road import bars

    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    by: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        by.setdefault(r["label"], []).append(r)
    labels = list(by)
    parts = {p: [float(np.median([float(r[f"{p}_us_per_report"]) for r in by[k]]))
                 for k in labels] for p in PARTS}
    fig, (ax,) = bars.subplots(1, max(5.0, 1.8 * len(labels)))
    bars.stacked(ax, labels, parts, ylabel="CPU µs per report (median of rounds)",
                 title="Matcher output path on LR standard data (embedded)")
    bars.save(fig, out)


if __name__ == "__main__":
    main()
