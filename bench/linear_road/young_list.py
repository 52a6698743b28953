"""How long the collector's young list really is when a young collection
starts, and what that collection takes: the embedded pipeline on Linear
Road's standard data (1 expressway, its history then the window, outputs
checked against the oracle), A B A B, each run in a fresh process, with

- `plain`: the survivors of each young collection frozen (session 18);
- `settle`: and everything alive frozen between two batches, unwalked
  (collector.settle, session 21).

CPython starts a young collection when allocations outnumber deallocations
by the threshold (20,000 here), and every object freed counts, frozen ones
too. While the engine's sweep frees old parts as events make new ones, the
young list grows past the threshold unseen; `young` is its length at the
start of each young collection (gc.get_objects(0): this probe costs time
itself, so read the collections' seconds against each other, not the
throughput).

    python -m bench.linear_road.young_list [--window 6000 6060] [--history 300] [--rounds 1]

Rows go to results/young_list.csv.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
POLICIES = ("plain", "settle")


def one(policy: str, data: str | None, start: int, end: int, history: int) -> dict[str, Any]:
    """One run in this process."""
    from bench.linear_road import throughput
    from bench.linear_road.standard import load
    from caesar.examples import model_path
    from caesar.services.common import collector
    from caesar.services.embedded import pipeline

    runs: list[tuple[float, int, int]] = []  # (seconds, count, young) per young collection
    at: dict[str, Any] = {}

    def probe(phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 0:
            return
        if phase == "start":
            at.update(count=gc.get_count()[0], young=len(gc.get_objects(0)),
                      t=time.perf_counter())
        else:
            runs.append((time.perf_counter() - at["t"], at["count"], at["young"]))

    tune = collector.tune_collector

    def tuned(freeze_survivors: bool = True) -> None:
        tune(freeze_survivors)
        gc.callbacks.insert(0, probe)

    collector.tune_collector = tuned  # type: ignore[assignment]
    if policy == "plain":
        pipeline.settle = lambda: None  # type: ignore[assignment]
    model = str(model_path("linear_road").with_name("model_per_segment.caesar"))
    reports = load(data).window(start - history, end).xways(1)
    row = throughput.run(reports, start, history, model=model, log=lambda *_: None)
    runs.sort()
    return {"policy": policy, "young_collections": len(runs),
            "young_s": round(sum(r[0] for r in runs), 3),
            "young_max_s": round(runs[-1][0], 4),
            "young_p99_s": round(runs[int(len(runs) * 0.99)][0], 4),
            "young_list_max": max(r[2] for r in runs),
            "young_list_at_longest": runs[-1][2], "count_at_longest": runs[-1][1],
            "reports_per_cpu_s": row["reports_per_cpu_s"],
            "differences": row["differences_tolls"] + row["differences_alerts"]}


def main(argv: list[str] | None = None) -> None:
    from bench.linear_road import alternate

    ap = alternate.parser(__doc__ or "", POLICIES, [6000, 6060], RESULTS)
    ap.set_defaults(rounds=1)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.data, *args.window, args.history)))
        return
    rows = alternate.run("bench.linear_road.young_list", args, POLICIES,
                         args.out / "young_list.csv")
    if any(r["differences"] for r in rows):
        sys.exit("outputs differ from the oracle")


if __name__ == "__main__":
    main()
