"""Replay on Spark: events/s of `caesar spark replay` with 1 and 2 local cores,
and the embedded pipeline in one process (no Spark) as the reference.

- Workload: the hospital hygiene example (src/caesar/examples/hospital_hygiene),
  WORKERS workers over HOURS hours from its generator, as one Parquet file;
  the same file for every run.
- spark-1 / spark-2: `replay()` (caesar/jobs/replay.py) in a fresh process with
  a `local[N]` SparkSession, N Spark partitions (one pipeline per core). The
  time is the whole job: read, convert and check, shuffle by key, sort, run
  the pipelines, write every output table; not the session start. Each
  process first replays a small sample, so the Python workers are warm.
- embedded: EmbeddedPipeline over the same events in one process (what one
  Spark task does, without Spark), the ceiling of one core.
- Besides the whole job (wall time), the pipeline stage alone (shuffle, sort,
  the pipelines) and the slowest partition's pipeline CPU time: events / that
  CPU time is what the job would reach with a free core per partition (the
  critical path). On this machine, shared with other engineers' jobs, wall
  times show how much CPU was left over more than how the job scales; the load
  average is recorded with every run.
- Runs are interleaved (embedded, spark-1, spark-2, then the next round in
  rotated order): the machine is shared and noisy. Medians are reported.

Run: .venv/bin/python -m bench.spark_replay.run [--rounds 3] (prints the table,
writes bench/spark_replay/results/replay.csv and replay.png).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
WORKERS, HOURS, SEED = 400, 4.0, 11
CONFIGS = ("embedded", "spark-1", "spark-2")


def make_input(directory: Path) -> tuple[Path, int]:
    from caesar.examples.event_files import write_events
    from caesar.examples.hospital_hygiene.generator import HygieneConfig, generate

    path = directory / "hospital_hygiene.parquet"
    n = write_events(generate(HygieneConfig(workers=WORKERS, hours=HOURS, seed=SEED)), path)
    return path, n


def run_embedded(source: Path) -> dict:
    import pyarrow.parquet as pq

    from caesar.examples import model_path
    from caesar.jobs.input_rows import ColumnMapping, RowConverter
    from caesar.jobs.job_model import JobModel
    from caesar.services.embedded.pipeline import EmbeddedPipeline

    model = JobModel.load(model_path("hospital_hygiene"))
    rows = pq.read_table(source).to_pylist()
    started, cpu0 = time.perf_counter(), time.process_time()
    conv = RowConverter({t.name: t for t in model.input_types}, model.plan.partition_by,
                        ColumnMapping.parse(type_column="type"), model.unit_ms)
    values = []
    for r in rows:
        c = conv.convert(r)
        values.append({**(c.record or {}), "type": c.etype.name if c.etype else None})
    result = EmbeddedPipeline(model.plan).run_values(values)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu0
    return {"events": len(values), "outputs": len(result.alerts), "wall_s": wall,
            "pipeline_s": wall, "max_partition_cpu_s": cpu, "partition_cpu_s": [cpu]}


def run_spark(source: Path, cores: int, out: Path) -> dict:
    from caesar.examples import model_path
    from caesar.jobs.input_rows import ColumnMapping
    from caesar.jobs.job_model import JobModel
    from caesar.jobs.replay import replay
    from caesar.jobs.sources import read_source
    from caesar.jobs.spark_session import spark_session

    spark = spark_session(f"bench-replay-{cores}", master=f"local[{cores}]",
                          shuffle_partitions=cores)
    model = JobModel.load(model_path("hospital_hygiene"))
    mapping = ColumnMapping.parse()
    try:
        warm = read_source(spark, str(source)).limit(2000)
        replay(spark, model, warm, mapping, str(out / "warm"), partitions=cores)
        stats = replay(spark, model, read_source(spark, str(source)), mapping,
                       str(out / "replay"), partitions=cores)
    finally:
        spark.stop()
    return {"events": stats.events, "outputs": sum(stats.outputs.values()),
            "wall_s": stats.wall_s, "pipeline_s": stats.pipeline_s,
            "max_partition_cpu_s": max(stats.partition_cpu_s),
            "partition_cpu_s": stats.partition_cpu_s}


def worker(config: str, source: Path, out: Path) -> dict:
    if config == "embedded":
        return run_embedded(source)
    return run_spark(source, int(config.split("-")[1]), out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", choices=CONFIGS, help=argparse.SUPPRESS)
    ap.add_argument("--input", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:  # one measurement, in its own process (one SparkContext per process)
        print("RESULT " + json.dumps(worker(args.worker, args.input, args.out)), flush=True)
        return

    RESULTS.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        source, n = make_input(Path(tmp))
        print(f"workload: hospital hygiene, {WORKERS} workers x {HOURS} h = {n:,} events")
        for r in range(args.rounds):
            order = CONFIGS[r % 3:] + CONFIGS[:r % 3]
            for config in order:
                proc = subprocess.run(
                    [sys.executable, "-m", "bench.spark_replay.run", "--worker", config,
                     "--input", str(source), "--out", str(Path(tmp) / f"{config}-{r}")],
                    capture_output=True, text=True, cwd=Path(__file__).parents[2])
                line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")),
                            None)
                if proc.returncode != 0 or line is None:
                    sys.exit(f"{config} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
                got = json.loads(line.removeprefix("RESULT "))
                got.update(round=r, config=config, load=os.getloadavg()[0],
                           events_per_s=got["events"] / got["wall_s"],
                           pipeline_events_per_s=got["events"] / got["pipeline_s"],
                           critical_events_per_s=got["events"] / got["max_partition_cpu_s"])
                rows.append(got)
                print(f"  round {r} {config:<9} {got['events']:>8,} events "
                      f"{got['outputs']:>8,} outputs | job {got['wall_s']:6.1f} s "
                      f"{got['events_per_s']:>7,.0f}/s | pipeline stage {got['pipeline_s']:6.1f} s"
                      f" | pipeline CPU per partition "
                      f"{', '.join(f'{c:.1f}' for c in got['partition_cpu_s'])} s "
                      f"| load {got['load']:.1f}", flush=True)
    fields = ["round", "config", "events", "outputs", "wall_s", "events_per_s", "pipeline_s",
              "pipeline_events_per_s", "max_partition_cpu_s", "critical_events_per_s", "load"]
    with (RESULTS / "replay.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fields)
        w.writeheader()
        w.writerows({k: row[k] for k in fields} for row in rows)
    metrics = {"events_per_s": "whole job", "pipeline_events_per_s": "pipeline stage",
               "critical_events_per_s": "slowest partition's CPU"}
    medians = {m: {c: statistics.median(r[m] for r in rows if r["config"] == c)
                   for c in CONFIGS} for m in metrics}
    print(f"\nmedians, events/s (vs spark-1); load average during the runs "
          f"{min(r['load'] for r in rows):.1f}-{max(r['load'] for r in rows):.1f} on "
          f"{os.cpu_count()} cores")
    print(f"{'config':<10}" + "".join(f"{label:>30}" for label in metrics.values()))
    for c in CONFIGS:
        print(f"{c:<10}" + "".join(
            f"{medians[m][c]:>21,.0f} ({medians[m][c] / medians[m]['spark-1']:4.2f}x)"
            for m in metrics))
    plot(rows, medians)


def plot(rows: list[dict], medians: dict[str, dict[str, float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [("events_per_s", "whole job (wall)"),
               ("critical_events_per_s", "slowest partition (CPU)")]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    labels = ["embedded\n1 process", "replay\nlocal[1]", "replay\nlocal[2]"]
    for ax, (metric, title) in zip(axes, metrics, strict=True):
        ax.bar(range(len(CONFIGS)), [medians[metric][c] for c in CONFIGS],
               color=["#999", "#4c72b0", "#55a868"])
        for i, c in enumerate(CONFIGS):
            ys = [r[metric] for r in rows if r["config"] == c]
            ax.scatter([i] * len(ys), ys, color="k", s=12, zorder=3)
        ax.set_xticks(range(len(CONFIGS)), labels)
        ax.set_title(title)
        ax.set_ylabel("events/s (bars: median; dots: runs)")
    fig.suptitle("hospital hygiene, spark replay vs embedded (2 cores shared with other jobs)")
    fig.tight_layout()
    fig.savefig(RESULTS / "replay.png", dpi=120)


if __name__ == "__main__":
    main()
