"""Spark Structured Streaming alert consumer: the Linear Road output topics (Spark's
own Kafka source) -> decoded Avro -> Parquet, one directory per output type, and a
summary: counts per type and latency p50/p99/max.

Latency of an alert = the time its micro-batch finished writing to Parquet minus
`ingest_ms`, the Kafka timestamp of the position report that triggered it (the
pipeline copies it into the alert). Records that do not decode are counted and
kept in `<out>/_undecodable/` with the reason, never dropped silently.

    python -m jobs.linear_road.consume_alerts --bootstrap 127.0.0.1:9092 --out /tmp/lr-alerts \
        --idle-stop 20 --max-seconds 600
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.linear_road.avro import ACCIDENT_ALERT, TOLL_NOTIFICATION, decode_column
from jobs.linear_road.validate import SHORT_NAMES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

DEFAULT_TOPICS = {TOLL_NOTIFICATION: "lr-tolls", ACCIDENT_ALERT: "lr-accident-alerts"}
BATCH_TIMES = "_batch_written_ms.json"


@dataclass
class TypeSummary:
    name: str
    count: int
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None


@dataclass
class ConsumeSummary:
    types: list[TypeSummary]
    undecodable: int
    overall: TypeSummary = field(default_factory=lambda: TypeSummary("all", 0))

    def render(self) -> str:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:,.0f}"

        lines = ["Linear Road alerts consumed (latency = written to Parquet - report entered Kafka)",
                 f"  {'output':<18}{'count':>9}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}"]
        for t in [*self.types, self.overall]:
            lines.append(f"  {t.name:<18}{t.count:>9}{ms(t.p50_ms):>10}{ms(t.p99_ms):>10}"
                         f"{ms(t.max_ms):>10}")
        lines.append(f"  undecodable records: {self.undecodable}")
        return "\n".join(lines)


class AlertConsumer:
    """A running streaming query writing the alert topics to `out_dir`."""

    def __init__(self, spark: SparkSession, bootstrap: str, out_dir: str | Path,
                 topics: dict[str, str] | None = None, trigger_s: float = 1.0,
                 fresh: bool = False) -> None:
        self.spark = spark
        self.out = Path(out_dir)
        if fresh and self.out.exists():
            shutil.rmtree(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.topics = topics or dict(DEFAULT_TOPICS)
        self.records = 0
        self.undecodable = 0
        self._batch_ms: dict[int, int] = self._load_batch_times()
        self._lock = threading.Lock()
        self._last_data = time.monotonic()
        source = (spark.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", ",".join(self.topics.values()))
                  .option("startingOffsets", "earliest")
                  .option("failOnDataLoss", "false")
                  .load())
        self.query: StreamingQuery = (
            source.writeStream.foreachBatch(self._write_batch)
            .option("checkpointLocation", str(self.out / "_checkpoint"))
            .trigger(processingTime=f"{trigger_s} seconds")
            .start())

    def _load_batch_times(self) -> dict[int, int]:
        path = self.out / BATCH_TIMES
        return {int(k): v for k, v in json.loads(path.read_text()).items()} if path.exists() else {}

    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        # Decode every record once (each topic with its schema), then one aggregate for
        # the counts and one write per output type that has records.
        decoded = batch.select(
            "topic", "value", F.col("timestamp").alias("alert_kafka_ts"),
            *[F.when(F.col("topic") == topic, decode_column(schema, F.col("value")))
              .alias(f"r{i}") for i, (schema, topic) in enumerate(self.topics.items())],
        ).persist()
        try:
            error = F.coalesce(*[F.col(f"r{i}._error") for i in range(len(self.topics))])
            counts = decoded.groupBy("topic", error.isNull().alias("ok")).count().collect()
            good = {(r["topic"]) : r["count"] for r in counts if r["ok"]}
            n_bad = sum(r["count"] for r in counts if not r["ok"])
            for i, (schema, topic) in enumerate(self.topics.items()):
                if good.get(topic):
                    (decoded.filter((F.col("topic") == topic) & F.col(f"r{i}._error").isNull())
                     .select(f"r{i}.*", "alert_kafka_ts").drop("_error")
                     .withColumn("batch_id", F.lit(batch_id).cast("long"))
                     .write.mode("append").parquet(str(self.out / SHORT_NAMES[schema])))
            if n_bad:
                decoded.filter(error.isNotNull()).select("topic", error.alias("error"), "value") \
                    .write.mode("append").parquet(str(self.out / "_undecodable"))
            written = int(time.time() * 1000)
            total = sum(good.values())
            with self._lock:
                self.undecodable += n_bad
                self.records += total
                self._batch_ms[batch_id] = written
                if total or n_bad:  # undecodable records are arrivals too
                    self._last_data = time.monotonic()
                (self.out / BATCH_TIMES).write_text(json.dumps(self._batch_ms))
        finally:
            decoded.unpersist()

    def wait_idle(self, idle_s: float, max_s: float, min_records: int = 1) -> None:
        """Return once `min_records` arrived and nothing new came for `idle_s` (or after max_s)."""
        deadline = time.monotonic() + max_s
        while time.monotonic() < deadline:
            if self.query.exception() is not None:
                raise RuntimeError(f"alert consumer failed: {self.query.exception()}")
            with self._lock:
                enough = self.records + self.undecodable >= min_records
                quiet = time.monotonic() - self._last_data >= idle_s
            if enough and quiet:
                return
            time.sleep(0.5)

    def stop(self) -> None:
        self.query.stop()

    def summary(self) -> ConsumeSummary:
        return summarize(self.spark, self.out, self.undecodable)


def summarize(spark: SparkSession, out_dir: str | Path, undecodable: int = 0) -> ConsumeSummary:
    from pyspark.sql import functions as F

    out = Path(out_dir)
    path = out / BATCH_TIMES
    times = json.loads(path.read_text()) if path.exists() else {}
    batch_times = spark.createDataFrame([(int(k), int(v)) for k, v in times.items()],
                                        "batch_id LONG, written_ms LONG")
    frames, types = [], []
    for schema in DEFAULT_TOPICS:
        name = SHORT_NAMES[schema]
        folder = out / name
        if not (folder.is_dir() and any(folder.glob("*.parquet"))):
            types.append(TypeSummary(name, 0))
            continue
        df = spark.read.parquet(str(folder)).join(batch_times, "batch_id", "left") \
            .select((F.col("written_ms") - F.col("ingest_ms")).alias("latency_ms"))
        frames.append(df)
        types.append(_latency(name, df))
    overall = TypeSummary("all", 0)
    if frames:
        union = frames[0]
        for df in frames[1:]:
            union = union.unionByName(df)
        overall = _latency("all", union)
    return ConsumeSummary(types, undecodable, overall)


def _latency(name: str, df: DataFrame) -> TypeSummary:
    row = df.selectExpr("count(*) AS n", "percentile(latency_ms, 0.5) AS p50",
                        "percentile(latency_ms, 0.99) AS p99", "max(latency_ms) AS mx").first()
    return TypeSummary(name, row["n"], row["p50"], row["p99"],
                       None if row["mx"] is None else float(row["mx"]))


def main(argv: list[str] | None = None) -> int:
    from jobs.spark_session import spark_session

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--out", required=True, help="Parquet output directory")
    parser.add_argument("--toll-topic", default=DEFAULT_TOPICS[TOLL_NOTIFICATION])
    parser.add_argument("--alert-topic", default=DEFAULT_TOPICS[ACCIDENT_ALERT])
    parser.add_argument("--idle-stop", type=float, default=20.0,
                        help="stop after this many seconds without new alerts")
    parser.add_argument("--max-seconds", type=float, default=3600.0)
    parser.add_argument("--fresh", action="store_true", help="delete --out first")
    args = parser.parse_args(argv)

    spark = spark_session("caesar-lr-consume-alerts", kafka=True)
    consumer = AlertConsumer(spark, args.bootstrap, args.out,
                             {TOLL_NOTIFICATION: args.toll_topic,
                              ACCIDENT_ALERT: args.alert_topic}, fresh=args.fresh)
    print(f"[consume] reading {args.toll_topic}, {args.alert_topic} -> {args.out}", flush=True)
    try:
        consumer.wait_idle(args.idle_stop, args.max_seconds)
    finally:
        consumer.stop()
    print(consumer.summary().render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
