"""What the cyclic garbage collector costs the embedded pipeline on Linear
Road's standard data, with each collector policy of
caesar.services.common.collector, run side by side (A B A B, each run in a
fresh process):

- `plain`: rare collections (thresholds 20,000 / 20 / 100), the state
  alive at start frozen;
- `freeze`: the same, and what outlives a young collection frozen too (the
  default since session 18): the middle and old generations stay empty.

    python -m bench.linear_road.collector_cost [--window 6000 6060] [--history 300] [--rounds 2]

Per run: reports per CPU-second in the window (throughput.run, outputs
checked against the oracle), the collector's seconds and longest pause per
generation while the pipeline ran (not while the oracle did), and the
process's peak RSS. Rows go to results/collector_cost.csv, the figure to
results/collector_cost.png.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
POLICIES = ("plain", "freeze")


def one(policy: str, data: str | None, start: int, end: int, history: int) -> dict[str, Any]:
    """One run in this process."""
    import functools

    from bench.linear_road import throughput
    from bench.linear_road.standard import load
    from caesar.examples import model_path
    from caesar.services.common import collector

    tune = collector.tune_collector
    collector.tune_collector = functools.partial(tune, freeze_survivors=policy == "freeze")
    runs, seconds, longest = [0, 0, 0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
    second = throughput.TimedPipeline.second

    def timed_second(self: Any, records: list[Any], *rest: Any) -> list[Any]:
        clock = collector.CLOCK
        r0, s0 = list(clock.runs), list(clock.seconds)
        clock.max_s = [0.0, 0.0, 0.0]
        try:
            return second(self, records, *rest)
        finally:
            for g in range(3):
                runs[g] += clock.runs[g] - r0[g]
                seconds[g] += clock.seconds[g] - s0[g]
                longest[g] = max(longest[g], clock.max_s[g])

    throughput.TimedPipeline.second = timed_second  # type: ignore[method-assign]
    model = str(model_path("linear_road").with_name("model_per_segment.caesar"))
    reports = load(data).window(start - history, end).xways(1)
    row = throughput.run(reports, start, history, model=model, log=lambda *_: None)
    return {"policy": policy, "reports": row["reports"],
            "reports_per_cpu_s": row["reports_per_cpu_s"], "cpu_s": row["cpu_s"],
            "all_cpu_s": row["all_cpu_s"],
            **{f"{h}_us_per_report": row[f"{h}_us_per_report"] for h in throughput.HOPS},
            "differences": row["differences_tolls"] + row["differences_alerts"],
            **{f"gc{g}_runs": runs[g] for g in range(3)},
            **{f"gc{g}_s": round(seconds[g], 3) for g in range(3)},
            **{f"gc{g}_max_s": round(longest[g], 4) for g in range(3)},
            "gc_s": round(sum(seconds), 3),
            "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def plot(path: Path, out: Path) -> None:
    from bench.linear_road import bars
    from bench.linear_road.throughput import read_rows

    rows = read_rows(path)
    if not rows:
        return
    labels = bars.row_labels(rows, "policy", "label", "commit")
    fig, axes = bars.subplots(2, max(9, 1.3 * len(rows)))
    bars.bars(axes[0], labels, [float(r["reports_per_cpu_s"]) for r in rows],
              color=["C0" if r["policy"] == "plain" else "C1" for r in rows],
              ylabel="reports per CPU-second (window)", title="embedded pipeline, 1 expressway")
    bars.stacked(axes[1], labels, {f"generation {g}": [r[f"gc{g}_s"] for r in rows]
                                   for g in range(3)},
                 colors=["C2", "C3", "C4"], ylabel="collector seconds while the pipeline ran",
                 title="cyclic garbage collector")
    bars.save(fig, out)


def main(argv: list[str] | None = None) -> None:
    from bench.linear_road import alternate

    args = alternate.parser(__doc__ or "", POLICIES, [6000, 6060], RESULTS).parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.data, *args.window, args.history)))
        return
    rows = alternate.run("bench.linear_road.collector_cost", args, POLICIES,
                         args.out / "collector_cost.csv")
    for policy in POLICIES:
        mine = [r for r in rows if r["policy"] == policy]
        print(f"{policy}: median {statistics.median(r['reports_per_cpu_s'] for r in mine):,.0f} "
              f"reports per CPU-s, collector {statistics.median(r['gc_s'] for r in mine):.2f} s, "
              f"longest pause {max(max(r[f'gc{g}_max_s'] for g in range(3)) for r in mine):.3f} s, "
              f"differences {sum(r['differences'] for r in mine)}")
    plot(args.out / "collector_cost.csv", args.out / "collector_cost.png")
    if any(r["differences"] for r in rows):
        sys.exit("outputs differ from the oracle")


if __name__ == "__main__":
    main()
