"""What one checkpoint costs the deriver and the matcher: their state after
`--history` seconds of the standard data before `--at` (the embedded
pipeline, 1 expressway by default), then `--repeat` times the snapshot a
checkpoint takes (`graph.snapshot`), its msgpack encoding and LZ4, each
timed with `time.process_time`; medians per service.

    python -m bench.linear_road.checkpoint_cost [--at 6000] [--history 600] [--label NAME]

Against an earlier commit's sources, run side by side (A B A B):
    bash bench/linear_road/at_commit.sh 48c7c68 bench.linear_road.checkpoint_cost --label before

Appends one row per service to results/checkpoint_cost.csv and redraws
results/checkpoint_cost.png (the snapshot's CPU seconds per label).
In the Kafka + Ray deployment each input partition's loop takes such a
snapshot of its share of the state once per checkpoint interval
(`kafka.checkpoint_interval_s`, 10 s), on the thread that handles input.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
SERVICES = ("deriver", "matcher")


def state_after(data: str | None, at: int, history: int, xways: int) -> Any:
    """The embedded pipeline after the reports of [at - history, at)."""
    from bench.linear_road import throughput
    from bench.linear_road.standard import load
    from caesar.examples import model_path
    from caesar.language import compile_model
    from caesar.services.common.messages import InputRecord

    plan = compile_model(model_path("linear_road").with_name("model_per_segment.caesar"))
    reports = load(data).window(at - history, at).xways(xways)
    pipe = throughput.TimedPipeline(plan)
    offset = 0
    for _, sec in reports.seconds():
        values = throughput.fanned_records(sec, False)
        for v in values:
            v["type"] = "PositionReport"
        pipe.second([InputRecord(throughput.TOPIC, 0, offset + i, v)
                     for i, v in enumerate(values)])
        offset += len(values)
    return pipe.pipe, len(reports)


def measure(processor: Any, repeat: int) -> dict[str, float]:
    import lz4.frame

    from caesar.services.store.state_format import pack

    cost: dict[str, list[float]] = {"snapshot": [], "pack": [], "lz4": []}
    size = packed = 0
    for _ in range(repeat):
        c0 = time.process_time()
        state = processor.snapshot()
        c1 = time.process_time()
        blob = pack(state)
        c2 = time.process_time()
        packed = len(lz4.frame.compress(blob, compression_level=0))
        c3 = time.process_time()
        size = len(blob)
        cost["snapshot"].append(c1 - c0)
        cost["pack"].append(c2 - c1)
        cost["lz4"].append(c3 - c2)
        del state, blob
    out = {f"{k}_cpu_s": round(statistics.median(v), 4) for k, v in cost.items()}
    out["total_cpu_s"] = round(sum(out[f"{k}_cpu_s"] for k in cost), 4)
    out["state_mb"] = round(size / 1e6, 2)
    out["lz4_mb"] = round(packed / 1e6, 2)
    return out


def plot(path: Path, out: Path) -> None:
    from bench.linear_road import bars
    from bench.linear_road.throughput import read_rows

    rows = read_rows(path)
    if not rows:
        return
    fig, axes = bars.subplots(len(SERVICES), 10, sharey=True)
    for ax, service in zip(axes, SERVICES, strict=True):
        mine = [r for r in rows if r["service"] == service]
        bars.stacked(ax, bars.row_labels(mine),
                     {part: [r[f"{part}_cpu_s"] for r in mine] for part in ("snapshot", "pack", "lz4")},
                     rotation=30, ylabel="CPU s (median)",
                     title=f"{service}: one checkpoint of the whole state")
    bars.save(fig, out)


def _source() -> tuple[str, str]:
    """The commit of the CAESAR sources measured (at_commit.sh's checkout, or
    this tree's HEAD, "+" when it has uncommitted changes) and their path."""
    import caesar

    src = Path(caesar.__file__).parent.parent
    if src.parent.name.startswith("caesar-at-"):
        return src.parent.name.removeprefix("caesar-at-"), str(src)
    git = ["git", "-C", str(src)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=False).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--", "."], capture_output=True,
                           text=True, check=False).stdout.strip()
    return head + ("+" if dirty else ""), str(src)


def main(argv: list[str] | None = None) -> None:
    from bench.linear_road.throughput import append_row

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="LR data file (default: $CAESAR_LR_DATA)")
    ap.add_argument("--at", type=int, default=6000)
    ap.add_argument("--history", type=int, default=600)
    ap.add_argument("--xways", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    pipe, n = state_after(args.data, args.at, args.history, args.xways)
    commit, src = _source()
    for service in SERVICES:
        row = {"label": args.label, "commit": commit, "src": src,
               "when": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
               "service": service, "at": args.at, "history_s": args.history,
               "xways": args.xways, "reports": n, "repeat": args.repeat,
               **measure(getattr(pipe, service), args.repeat)}
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        args.out.mkdir(parents=True, exist_ok=True)
        append_row(args.out / "checkpoint_cost.csv", row)
    plot(args.out / "checkpoint_cost.csv", args.out / "checkpoint_cost.png")


if __name__ == "__main__":
    main()
