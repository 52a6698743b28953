"""What sweeping idle parts in slices does to the time each second of input
takes: the embedded pipeline on Linear Road's standard data (1 expressway,
its history then the window, outputs checked against the oracle), A B A B,
each run in a fresh process, with the engine's sweep of parts no event
reaches any more

- `whole`: all of it in the advance call it falls due in, every half window
  of event time (the engine before session 20: `sweep_min` above any state);
- `slices`: spread over a quarter window, a slice per call (the default).

    python -m bench.linear_road.sweep_slices [--window 6000 6120] [--history 300] [--rounds 2]

Per run: the wall time of each simulated second (history and window: the
state, and so the sweep, grows through both) as p50 / p99 / max, the
window's reports per CPU-second, and the collector's seconds. Rows go to
results/sweep_slices.csv, the figure to results/sweep_slices.png.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
POLICIES = ("whole", "slices")
WHOLE = 2**62  # sweep_min: more parts than any state holds


def one(policy: str, data: str | None, start: int, end: int, history: int) -> dict[str, Any]:
    """One run in this process."""
    from bench.linear_road import throughput
    from bench.linear_road.standard import load
    from caesar.examples import model_path
    from caesar.services.common import collector
    from caesar.services.matcher.engine import CythonEngine

    def engine(plans: Any) -> CythonEngine:
        made = CythonEngine(plans)
        if policy == "whole":
            made.sweep_min = WHOLE
        return made

    took: list[float] = []
    second = throughput.TimedPipeline.second

    def timed_second(self: Any, records: list[Any], *rest: Any) -> list[Any]:
        t0 = time.perf_counter()
        try:
            return second(self, records, *rest)
        finally:
            took.append(time.perf_counter() - t0)

    throughput.TimedPipeline.second = timed_second  # type: ignore[method-assign]
    model = str(model_path("linear_road").with_name("model_per_segment.caesar"))
    reports = load(data).window(start - history, end).xways(1)
    gc0 = sum(collector.CLOCK.seconds)
    row = throughput.run(reports, start, history, model=model, log=lambda *_: None,
                         engine_factory=engine)
    took.sort()
    return {"policy": policy, "seconds": len(took),
            "second_p50_s": round(took[len(took) // 2], 4),
            "second_p99_s": round(took[int(len(took) * 0.99)], 4),
            "second_max_s": round(took[-1], 4), "all_seconds_s": round(sum(took), 2),
            "reports": row["reports"], "reports_per_cpu_s": row["reports_per_cpu_s"],
            "gc_s": round(sum(collector.CLOCK.seconds) - gc0, 2),
            "differences": row["differences_tolls"] + row["differences_alerts"]}


def plot(path: Path, out: Path) -> None:
    from bench.linear_road import bars
    from bench.linear_road.throughput import read_rows

    rows = read_rows(path)
    if not rows:
        return
    labels = bars.row_labels(rows, "policy", "label", "commit")
    fig, axes = bars.subplots(2, max(10, 1.6 * len(rows)))
    bars.grouped(axes[0], labels, {q: [r[f"second_{q}_s"] for r in rows]
                                   for q in ("p50", "p99", "max")},
                 ylabel="wall s to process one simulated second",
                 title="embedded pipeline, 1 expressway, history and window")
    bars.bars(axes[1], labels, [float(r["reports_per_cpu_s"]) for r in rows],
              color=["C0" if r["policy"] == "whole" else "C1" for r in rows],
              ylabel="reports per CPU-second (window)", title="throughput")
    bars.save(fig, out)


def main(argv: list[str] | None = None) -> None:
    from bench.linear_road import alternate

    args = alternate.parser(__doc__ or "", POLICIES, [6000, 6120], RESULTS).parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.data, *args.window, args.history)))
        return
    rows = alternate.run("bench.linear_road.sweep_slices", args, POLICIES,
                         args.out / "sweep_slices.csv")
    for policy in POLICIES:
        mine = [r for r in rows if r["policy"] == policy]
        print(f"{policy}: one second p99 {max(r['second_p99_s'] for r in mine):.3f} s, "
              f"max {max(r['second_max_s'] for r in mine):.3f} s; median "
              f"{statistics.median(r['reports_per_cpu_s'] for r in mine):,.0f} reports per CPU-s, "
              f"collector {statistics.median(r['gc_s'] for r in mine):.2f} s, "
              f"differences {sum(r['differences'] for r in mine)}")
    plot(args.out / "sweep_slices.csv", args.out / "sweep_slices.png")
    if any(r["differences"] for r in rows):
        sys.exit("outputs differ from the oracle")


if __name__ == "__main__":
    main()
