"""What a full collection (collector.sweep) stops a process for when it
holds the Linear Road state: the embedded pipeline on standard data (1
expressway, the window after its history, outputs checked against the
oracle), with the services' collector policy; every --every simulated
seconds, between two seconds of input, it times

- `gc.get_freeze_count()`: counting the frozen objects walks their list;
- a young collection (`gc.collect(0)`);
- `sweep()`: unfreeze, collect everything, freeze again.

    python -m bench.linear_road.sweep_cost [--window 6000 6060] [--history 300] [--every 120]

Rows go to results/sweep_cost.csv (one per measurement).
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def measure(data: str | None, start: int, end: int, history: int,
            every: int) -> list[dict[str, Any]]:
    from bench.linear_road import throughput
    from bench.linear_road.standard import load
    from caesar.examples import model_path
    from caesar.services.common import collector

    rows: list[dict[str, Any]] = []
    seconds = [0]
    second = throughput.TimedPipeline.second

    def timed_second(self: Any, records: list[Any], *rest: Any) -> list[Any]:
        out = second(self, records, *rest)
        seconds[0] += 1
        if seconds[0] % every == 0:
            t0 = time.perf_counter()
            frozen = gc.get_freeze_count()
            t1 = time.perf_counter()
            gc.collect(0)
            t2 = time.perf_counter()
            found = collector.sweep()
            t3 = time.perf_counter()
            rows.append({"second": seconds[0], "frozen_objects": frozen,
                         "count_frozen_s": round(t1 - t0, 4), "young_s": round(t2 - t1, 4),
                         "sweep_s": round(t3 - t2, 3), "sweep_found": found,
                         "resident_mb": collector.resident_bytes() // 2**20})
            print(rows[-1], flush=True)
        return out

    throughput.TimedPipeline.second = timed_second  # type: ignore[method-assign]
    model = str(model_path("linear_road").with_name("model_per_segment.caesar"))
    reports = load(data).window(start - history, end).xways(1)
    row = throughput.run(reports, start, history, model=model, log=lambda *_: None)
    differences = row["differences_tolls"] + row["differences_alerts"]
    if differences:
        raise SystemExit(f"{differences} outputs differ from the oracle")
    return rows


def main(argv: list[str] | None = None) -> None:
    from bench.linear_road.throughput import append_row, commit

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="LR data file (default: $CAESAR_LR_DATA)")
    ap.add_argument("--window", type=int, nargs=2, default=[6000, 6060], metavar=("START", "END"))
    ap.add_argument("--history", type=int, default=300)
    ap.add_argument("--every", type=int, default=120, help="simulated s between measurements")
    ap.add_argument("--label", default="")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    start, end = args.window
    rows = measure(args.data, start, end, args.history, args.every)
    args.out.mkdir(parents=True, exist_ok=True)
    for r in rows:
        append_row(args.out / "sweep_cost.csv",
                   {"label": args.label, "commit": commit(), "when": time.strftime("%Y-%m-%d %H:%M"),
                    "window": f"{start}-{end}", "history_s": args.history, **r})


if __name__ == "__main__":
    main()
