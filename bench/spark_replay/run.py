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
- Besides the whole job, the pipeline stage alone (shuffle, sort, the
  pipelines; the part that spreads over the cores) is reported as events/s.
- Runs are interleaved (embedded, spark-1, spark-2, then the next round in
  rotated order): the machine is shared and noisy. Medians are reported.

Run: .venv/bin/python -m bench.spark_replay.run [--rounds 3] (prints the table,
writes bench/spark_replay/results/replay.csv and replay.png).
"""

from __future__ import annotations

import argparse
import csv
import json
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
    started = time.perf_counter()
    conv = RowConverter({t.name: t for t in model.input_types}, model.plan.partition_by,
                        ColumnMapping.parse(type_column="type"), model.unit_ms)
    values = []
    for r in rows:
        c = conv.convert(r)
        values.append({**(c.record or {}), "type": c.etype.name if c.etype else None})
    result = EmbeddedPipeline(model.plan).run_values(values)
    wall = time.perf_counter() - started
    return {"events": len(values), "outputs": len(result.alerts), "wall_s": wall,
            "pipeline_s": wall}


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
            "wall_s": stats.wall_s, "pipeline_s": stats.pipeline_s}


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
                got.update(round=r, config=config,
                           events_per_s=got["events"] / got["wall_s"],
                           pipeline_events_per_s=got["events"] / got["pipeline_s"])
                rows.append(got)
                print(f"  round {r} {config:<9} {got['events']:>8,} events "
                      f"{got['outputs']:>8,} outputs {got['wall_s']:7.1f} s "
                      f"{got['events_per_s']:>9,.0f} events/s (pipeline stage "
                      f"{got['pipeline_s']:.1f} s, {got['pipeline_events_per_s']:,.0f}/s)",
                      flush=True)
    with (RESULTS / "replay.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, ["round", "config", "events", "outputs", "wall_s",
                                "events_per_s", "pipeline_s", "pipeline_events_per_s"])
        w.writeheader()
        w.writerows({k: row[k] for k in w.fieldnames} for row in rows)
    medians = {c: statistics.median(r["events_per_s"] for r in rows if r["config"] == c)
               for c in CONFIGS}
    stage = {c: statistics.median(r["pipeline_events_per_s"] for r in rows if r["config"] == c)
             for c in CONFIGS}
    print(f"\n{'config':<10}{'job events/s':>14}{'vs spark-1':>12}{'pipeline stage/s':>18}"
          f"{'vs spark-1':>12}   (medians)")
    for c in CONFIGS:
        print(f"{c:<10}{medians[c]:>14,.0f}{medians[c] / medians['spark-1']:>12.2f}"
              f"{stage[c]:>18,.0f}{stage[c] / stage['spark-1']:>12.2f}")
    plot(rows, medians)


def plot(rows: list[dict], medians: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs = range(len(CONFIGS))
    ax.bar(xs, [medians[c] for c in CONFIGS], color=["#999", "#4c72b0", "#55a868"])
    for i, c in enumerate(CONFIGS):
        ax.scatter([i] * sum(r["config"] == c for r in rows),
                   [r["events_per_s"] for r in rows if r["config"] == c], color="k", s=12,
                   zorder=3)
    ax.set_xticks(list(xs), ["embedded\n(1 process)", "spark replay\nlocal[1]",
                             "spark replay\nlocal[2]"])
    ax.set_ylabel("events/s (bars: median; dots: runs)")
    ax.set_title("hospital hygiene replay, 2 shared cores")
    fig.tight_layout()
    fig.savefig(RESULTS / "replay.png", dpi=120)


if __name__ == "__main__":
    main()
