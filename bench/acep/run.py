"""ACEP benchmark: SEI vs S2PL vs LWM (the paper's section 6), side by side
in one process, rounds interleaved (the machine is shared and noisy).

Each actor of the query-rule pool is a thread; every table access costs
`--op-ms` of waiting (a round trip to the store service; a Ray actor call
is about 0.7 ms here), so what is measured is how much of that waiting the
scheduler lets s-transactions overlap. Pure CPU work cannot overlap in one
CPython process (the GIL), which the CPU-only run shows.

1. readN 1..6 at writeN 0.25 (Figure 6, lockG = table; Figure 5 with
   lockG = tuple): throughput;
2. writeN 0.125..1 at readN 1 (Figure 8; Figure 7 with lockG = tuple):
   throughput;
3. input rate vs latency at readN 1, writeN 0.25 (Figure 11);
4. the CPU-only control: readN 3, writeN 0.25, no op cost.

Every run's final tables and outputs are checked against the serial
reference executor. Writes bench/acep/results/{throughput.csv (every run
configuration, throughput and latency),
results.json,acep.png}.

Usage: .venv/bin/python -m bench.acep.run [--quick]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench.acep.workload import Pool
from caesar.services.scheduler.acep.executors import Granularity, ThreadedRun, run_serial

SCHEDULERS = ("sei", "s2pl", "lwm")
OUT = Path(__file__).parent / "results"


def one_run(pool: Pool, n: int, scheduler: str, op_ms: float,
            rate: float | None = None, granularity: Granularity = "table") -> dict[str, Any]:
    plan = pool.plan()
    workload = pool.transactions(n)
    runner = ThreadedRun(plan, scheduler, op_cost=op_ms / 1000, arrival_rate=rate,
                         granularity=granularity)
    start = time.perf_counter()
    result = runner.run(workload)
    wall = time.perf_counter() - start
    expected = run_serial(plan, workload)
    if result.tables != expected.tables or \
            [o.fields for o in result.outputs] != [o.fields for o in expected.outputs]:
        raise AssertionError(f"{scheduler}: result differs from the serial reference")
    return {"events_per_s": n / wall, "latency_ms": 1000 * statistics.fmean(runner.latencies),
            "p99_latency_ms": 1000 * sorted(runner.latencies)[int(0.99 * len(runner.latencies))],
            "wall_s": wall}


def sweep(configs: list[tuple[str, Pool]], n: int, rounds: int, op_ms: float,
          rate: float | None = None, granularity: Granularity = "table") -> list[dict[str, Any]]:
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in range(rounds):
        for label, pool in configs:
            order = SCHEDULERS if r % 2 == 0 else tuple(reversed(SCHEDULERS))
            for s in order:
                rows.setdefault((label, s), []).append(
                    one_run(pool, n, s, op_ms, rate, granularity))
    out = []
    for (label, s), runs in rows.items():
        out.append({"config": label, "scheduler": s,
                    **{k: statistics.median(run[k] for run in runs) for k in runs[0]}})
        print(f"  {label:>14} {s:>5}: {out[-1]['events_per_s']:8.0f} events/s  "
              f"latency {out[-1]['latency_ms']:8.1f} ms", flush=True)
    return out


def ratios(rows: list[dict[str, Any]], prefix: str) -> dict[str, float]:
    by = {(r["config"], r["scheduler"]): r["events_per_s"] for r in rows
          if r["config"].startswith(prefix)}
    configs = sorted({c for c, _ in by})
    lwm_s2pl = [by[(c, "lwm")] / by[(c, "s2pl")] for c in configs]
    lwm_sei = [by[(c, "lwm")] / by[(c, "sei")] for c in configs]
    return {"lwm_over_s2pl_mean": statistics.fmean(lwm_s2pl),
            "lwm_over_sei_mean": statistics.fmean(lwm_sei),
            "lwm_over_s2pl_last": lwm_s2pl[-1], "lwm_over_sei_last": lwm_sei[-1]}


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, grid = plt.subplots(2, 3, figsize=(15, 8.4))
    axes = list(grid.flat)
    panels = [("readN=", "readN (writeN = 0.25), table locks", "events_per_s",
               "throughput (events/s)"),
              ("writeN=", "writeN (readN = 1), table locks", "events_per_s",
               "throughput (events/s)"),
              ("rate=", "input rate (events/s), table locks", "latency_ms", "mean latency (ms)"),
              ("tuple readN=", "readN (writeN = 0.25), tuple locks", "events_per_s",
               "throughput (events/s)"),
              ("tuple writeN=", "writeN (readN = 1), tuple locks", "events_per_s",
               "throughput (events/s)")]
    axes[-1].axis("off")
    for ax, (prefix, xlabel, key, ylabel) in zip(axes, panels, strict=False):
        for s in SCHEDULERS:
            pts = sorted((float(r["config"].split("=")[1]), r[key]) for r in rows
                         if r["config"].startswith(prefix) and r["scheduler"] == s)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s.upper())
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if key == "latency_ms":
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("ACEP s-transaction schedulers: 8 actor threads, 0.5 ms per table access")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small smoke run, writes nothing")
    ap.add_argument("--op-ms", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = 120 if args.quick else 500
    rounds = 1 if args.quick else args.rounds
    reads = [1, 3] if args.quick else [1, 2, 3, 4, 5, 6]
    writes = [0.25, 1.0] if args.quick else [0.125, 0.25, 0.5, 1.0]
    rates = [200, 1000] if args.quick else [100, 200, 400, 800, 1600, 3200]
    print(f"load average {os.getloadavg()[0]:.1f}; {n} transactions per run, "
          f"{rounds} rounds (medians), op cost {args.op_ms} ms")
    print("1. readN vs throughput (writeN 0.25)")
    rows = sweep([(f"readN={r}", Pool(read_n=r)) for r in reads], n, rounds, args.op_ms)
    print("2. writeN vs throughput (readN 1)")
    rows += sweep([(f"writeN={w}", Pool(write_n=w)) for w in writes], n, rounds, args.op_ms)
    print("1t. readN vs throughput, tuple-level locks (Figure 5)")
    rows += sweep([(f"tuple readN={r}", Pool(read_n=r)) for r in reads], n, rounds,
                  args.op_ms, granularity="tuple")
    print("2t. writeN vs throughput, tuple-level locks (Figure 7)")
    rows += sweep([(f"tuple writeN={w}", Pool(write_n=w)) for w in writes], n, rounds,
                  args.op_ms, granularity="tuple")
    print("3. input rate vs latency (readN 1, writeN 0.25)")
    for rate in rates:
        rows += sweep([(f"rate={rate}", Pool())], n, rounds, args.op_ms, float(rate))
    print("4. CPU only (no op cost; readN 3, writeN 0.25)")
    rows += sweep([("cpu_only", Pool(read_n=3))], n * 4, rounds, 0.0)
    summary = {"readN": ratios(rows, "readN="), "writeN": ratios(rows, "writeN="),
               "tuple readN": ratios(rows, "tuple readN="),
               "tuple writeN": ratios(rows, "tuple writeN="),
               "load_average": os.getloadavg()[0], "transactions": n, "rounds": rounds,
               "op_ms": args.op_ms}
    print(json.dumps(summary, indent=2))
    if args.quick:
        return
    OUT.mkdir(exist_ok=True)
    with (OUT / "throughput.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (OUT / "results.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=2))
    plot(rows, OUT / "acep.png")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
