"""Randomized fault runs on the real broker and Ray (bench/faults/harness.py).

    .venv/bin/python -m bench.faults.run [--runs 21] [--seed 11] [--duration 240] [--speed 6]

A clean run first (no fault), then `--runs` runs, each with one fault drawn
from a seeded schedule: the kind (every kind at least twice before any third
time: kill -9 of each service's actor, of the driver, of the broker, a broker
pause beyond the transaction timeout) and the point of the stream it hits
(uniform over the input, away from its very start). Every run must show
0 lost, 0 duplicated and no stuck partition. Writes results/faults.csv,
results/faults.json, results/faults.png (recovery time per fault kind) and
prints the table.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from bench.faults.harness import KINDS, FaultLab, RunResult, Stream, to_json

RESULTS = Path(__file__).parent / "results"
COLUMNS = ("run", "kind", "seed", "fault_at_s", "fault_s", "recovery_s", "expected", "got",
           "lost", "duplicated", "stuck", "drain_s", "restarts")


def schedule(runs: int, seed: int, input_s: float) -> list[tuple[str, float]]:
    """(kind, seconds into the input) per run: kinds shuffled in rounds."""
    rnd = random.Random(seed)
    kinds: list[str] = []
    while len(kinds) < runs:
        round_ = list(KINDS)
        rnd.shuffle(round_)
        kinds += round_
    return [(k, round(rnd.uniform(0.15, 0.8) * input_s, 1)) for k in kinds[:runs]]


def table(results: list[RunResult]) -> str:
    head = f"{'run':>3} {'fault':<16} {'at s':>6} {'for s':>6} {'recovery s':>10} " \
           f"{'expected':>8} {'lost':>5} {'dup':>4} {'stuck':>5} {'drain s':>7}"
    lines = [head, "-" * len(head)]
    for r in results:
        rec = "-" if r.recovery_s is None else f"{r.recovery_s:.2f}"
        lines.append(f"{r.run:>3} {r.kind:<16} {r.fault_at_s:>6.1f} {r.fault_s:>6.1f} "
                     f"{rec:>10} {r.expected:>8} {r.lost:>5} {r.duplicated:>4} "
                     f"{len(r.stuck):>5} {r.drain_s:>7.1f}")
    faulty = [r for r in results if r.kind != "none"]
    lines.append(f"{len(faulty)} fault runs: {sum(r.lost for r in faulty)} lost, "
                 f"{sum(r.duplicated for r in faulty)} duplicated, "
                 f"{sum(1 for r in faulty if r.stuck)} with a stuck partition, "
                 f"{sum(1 for r in faulty if r.ok)} of {len(faulty)} exact")
    return "\n".join(lines)


def plot(results: list[RunResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in KINDS if any(r.kind == k for r in results)]
    fig, ax = plt.subplots(figsize=(9, 4))
    for i, k in enumerate(kinds):
        values = [r.recovery_s for r in results if r.kind == k and r.recovery_s is not None]
        ax.scatter([i] * len(values), values, color="tab:blue")
        fault = [r.fault_s for r in results if r.kind == k]
        if any(fault):
            ax.scatter([i + 0.15] * len(fault), fault, color="tab:gray", marker="x")
    ax.set_xticks(range(len(kinds)), kinds, rotation=20)
    ax.set_ylabel("seconds")
    ax.set_title("recovery after the fault ends (dots); fault duration (x)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--duration", type=int, default=240, help="simulated seconds of LR input")
    ap.add_argument("--segments", default="84:88",
                    help="LO:HI, the segments of the standard load kept")
    ap.add_argument("--speed", type=float, default=6.0, help="simulated s per wall s")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--resume", action="store_true",
                    help="keep the runs already in OUT/faults.json, run the rest")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    lo, hi = (int(v) for v in args.segments.split(":"))
    stream = Stream.make(args.duration, args.seed, segments=(lo, hi))
    input_s = args.duration / args.speed
    print(f"stream: {stream.reports:,} reports, {sum(stream.expected.values()):,} expected "
          f"alerts, {input_s:.0f} s of input per run", flush=True)
    work = Path(tempfile.mkdtemp(prefix="caesar-faults-"))
    results: list[RunResult] = []
    saved = args.out / "faults.json"
    if args.resume and saved.exists():  # the same schedule, from the first run not saved
        results = [RunResult(**r) for r in json.loads(saved.read_text())]
        print(f"resuming after run {len(results) - 1}", flush=True)
    started = time.monotonic()
    try:
        with FaultLab(work, log=lambda m: print(m, flush=True)) as lab:
            runs = [(None, 0.0), *schedule(args.runs, args.seed, input_s)]
            for i, (kind, at) in enumerate(runs):
                if i < len(results):
                    continue
                try:
                    r = lab.run(i, kind, stream, speed=args.speed, seed=args.seed,
                                fault_at_s=at)
                except Exception as exc:  # noqa: BLE001 - a failed run is a result too
                    r = RunResult(i, kind or "none", args.seed, at, 0.0, None,
                                  sum(stream.expected.values()), 0,
                                  sum(stream.expected.values()), 0,
                                  note=f"the run failed: {type(exc).__name__}: {exc}")
                    print(r.note, flush=True)
                results.append(r)
                print(f"run {i} {r.kind}: lost {r.lost}, duplicated {r.duplicated}, "
                      f"stuck {r.stuck or 0}, recovery {r.recovery_s} s "
                      f"({time.monotonic() - started:.0f} s so far)", flush=True)
                (args.out / "faults.json").write_text(to_json(results))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(args.out / "faults.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for r in results:
            w.writerow([getattr(r, c) if c != "stuck" else len(r.stuck) for c in COLUMNS])
    plot(results, args.out / "faults.png")
    text = table(results)
    (args.out / "faults.txt").write_text(text + "\n")
    print(text)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
