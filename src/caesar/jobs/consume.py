"""`caesar spark consume MODEL --to PATH_OR_TABLE`: a Structured Streaming job
that lands every output topic of a model in one table per output type.

Spark's Kafka source reads the output topics with isolation.level =
read_committed (records of aborted transactions never reach a table). Each
micro-batch is read once and decoded on the driver with the project's codec
(output_tables.py; pyspark ships no spark-avro), then written per output type
by a writer whose writes are idempotent per batch id (table_writers.py). With
Spark's checkpoint (offsets logged before a batch runs, committed after it
returned), a consumer killed at any point and started again re-runs the batch
it was in with the same records, which replaces what its first attempt wrote:
nothing is lost and nothing is written twice.

Latency of an output = when its micro-batch was written minus `ingest_ms`, the
Kafka timestamp of the input event that triggered it (the services carry it
through). `--hops` adds the per-hop breakdown read back from the topics
(hops.py).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caesar.jobs.job_model import JobModel
from caesar.jobs.output_tables import UNDECODABLE, OutputDecoder
from caesar.jobs.table_writers import make_writer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from caesar.settings import Settings

BATCH_TIMES = "_batch_written_ms.json"


@dataclass
class TypeSummary:
    name: str
    count: int
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None

    @classmethod
    def of(cls, name: str, count: int, latencies: list[int]) -> TypeSummary:
        if not latencies:
            return cls(name, count)
        v = sorted(latencies)

        def q(p: float) -> float:
            return float(v[min(len(v) - 1, int(round(p * (len(v) - 1))))])

        return cls(name, count, q(0.5), q(0.99), float(v[-1]))


@dataclass
class ConsumeSummary:
    types: list[TypeSummary]
    undecodable: int
    overall: TypeSummary = field(default_factory=lambda: TypeSummary("all", 0))
    title: str = "outputs consumed"

    def render(self) -> str:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:,.0f}"

        lines = [f"{self.title} (latency = written to the table - input entered Kafka)",
                 f"  {'output':<22}{'count':>9}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}"]
        lines.extend(f"  {t.name:<22}{t.count:>9}{ms(t.p50_ms):>10}{ms(t.p99_ms):>10}"
                     f"{ms(t.max_ms):>10}" for t in [*self.types, self.overall])
        lines.append(f"  undecodable records: {self.undecodable}")
        return "\n".join(lines)


class OutputConsumer:
    """A running streaming query writing a model's output topics to tables under `to`."""

    def __init__(self, spark: SparkSession, model: JobModel, settings: Settings, to: str, *,
                 writer: str = "arrow", bootstrap: str | None = None,
                 kafka_options: dict[str, str] | None = None, checkpoint: str | None = None,
                 trigger_s: float = 1.0, fresh: bool = False,
                 topics: list[str] | None = None, max_records_per_batch: int = 200_000,
                 starting_offsets: str = "earliest") -> None:
        self.spark, self.model, self.to = spark, model, to
        self.local = "://" not in to and writer in ("arrow", "spark")
        self.checkpoint = checkpoint or (str(Path(to) / "_checkpoint") if "://" not in to
                                         else f"{to.rstrip('/')}/_checkpoint")
        if fresh:
            for path in (to, self.checkpoint):
                if "://" not in path and Path(path).exists():
                    shutil.rmtree(path)
        if self.local:
            Path(to).mkdir(parents=True, exist_ok=True)
        self.decoder = OutputDecoder(model, model.codec(settings))
        app_id = "caesar-" + hashlib.sha1(self.checkpoint.encode()).hexdigest()[:12]
        self.writer = make_writer(writer, spark, to, app_id)
        self.topics = topics or sorted(model.output_topics())
        if not self.topics:
            raise ValueError(f"model {model.name} has no output topics")
        model_topics = model.output_topics()
        # The output types it reads (a subclass naming renamed topics sets this).
        self.read_types = {t for topic in self.topics for t in model_topics.get(topic, [])}
        self.records = 0
        self.undecodable = 0
        self.counts: dict[str, int] = defaultdict(int)
        self.latencies: dict[str, list[int]] = defaultdict(list)  # written - ingest_ms
        self.spark_latencies: dict[str, list[int]] = defaultdict(list)  # written - kafka_ms
        self._batch_ms = self._load_batch_times()
        self._lock = threading.Lock()
        self._last_data = time.monotonic()
        source = (spark.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", bootstrap or settings.kafka.bootstrap_servers)
                  .options(**(kafka_options or {}))  # `kafka.*` security options
                  .option("kafka.isolation.level", "read_committed")
                  .option("subscribe", ",".join(self.topics))
                  .option("startingOffsets", starting_offsets)
                  .option("maxOffsetsPerTrigger", str(max_records_per_batch))
                  .option("failOnDataLoss", "false")
                  .load())
        self.query: StreamingQuery = (
            source.writeStream.foreachBatch(self.write_batch)
            .option("checkpointLocation", self.checkpoint)
            .trigger(processingTime=f"{trigger_s} seconds")
            .start())

    def _load_batch_times(self) -> dict[int, int]:
        path = Path(self.to) / BATCH_TIMES
        if not self.local or not path.exists():
            return {}
        return {int(k): v for k, v in json.loads(path.read_text()).items()}

    def write_batch(self, batch: DataFrame, batch_id: int) -> None:
        # One Spark job reads the micro-batch (outputs are small records); the
        # driver decodes them and writes each output type's rows in one go.
        from pyspark.sql import functions as F

        rows = batch.select("topic", "partition", "offset", "value",
                            F.unix_millis("timestamp")).collect()
        by_table: dict[str, list[tuple]] = defaultdict(list)
        for topic, partition, offset, value, kafka_ms in rows:
            name, row = self.decoder.decode(topic, partition, offset, value, kafka_ms, batch_id)
            by_table[name].append(row)
        for name, table_rows in by_table.items():
            table = self.decoder.tables[name]
            self.writer.write(name, table.arrow(table_rows), batch_id)
        written = int(time.time() * 1000)
        self._account(by_table, written)
        with self._lock:
            self._batch_ms[batch_id] = written
            if rows:
                self._last_data = time.monotonic()
            if self.local:
                (Path(self.to) / BATCH_TIMES).write_text(json.dumps(self._batch_ms))

    def _account(self, by_table: dict[str, list[tuple]], written: int) -> None:
        with self._lock:
            for name, rows in by_table.items():
                if name == UNDECODABLE:
                    self.undecodable += len(rows)
                    continue
                self.records += len(rows)
                self.counts[name] += len(rows)
                table = self.decoder.tables[name]
                k = table.names.index("kafka_ms", table.from_record)
                self.spark_latencies[name] += [written - r[k] for r in rows]
                if "ingest_ms" in table.names[:table.from_record]:
                    i = table.names.index("ingest_ms")
                    self.latencies[name] += [written - r[i] for r in rows if r[i]]

    def wait_idle(self, idle_s: float, max_s: float, min_records: int = 1) -> None:
        """Return once `min_records` arrived and nothing new came for `idle_s` (or after
        `max_s`); raises if the query failed."""
        deadline = time.monotonic() + max_s
        while time.monotonic() < deadline:
            if self.query.exception() is not None:
                raise RuntimeError(f"output consumer failed: {self.query.exception()}")
            with self._lock:
                enough = self.records + self.undecodable >= min_records
                quiet = time.monotonic() - self._last_data >= idle_s
            if enough and quiet:
                return
            time.sleep(0.5)

    def stop(self) -> None:
        self.query.stop()

    def summary(self) -> ConsumeSummary:
        with self._lock:
            # The types this consumer reads, and any it got: a type it does not
            # read would show as 0 outputs, as if the pipeline had lost them.
            read = self.read_types | set(self.counts)
            types = [TypeSummary.of(n, self.counts.get(n, 0), self.latencies.get(n, []))
                     for n in self.model.output_types() if n in read]
            every = [v for lat in self.latencies.values() for v in lat]
            return ConsumeSummary(types, self.undecodable,
                                  TypeSummary.of("all", self.records, every),
                                  f"{self.model.name}: outputs consumed this run")


def read_tables(to: str | Path, model: JobModel) -> dict[str, list[dict[str, Any]]]:
    """What the arrow/spark Parquet writers wrote under `to`, table -> rows (tests, tools)."""
    import pyarrow.parquet as pq

    out: dict[str, list[dict[str, Any]]] = {}
    for name in [*model.output_types(), UNDECODABLE]:
        folder = Path(to) / name
        if folder.is_dir() and any(folder.rglob("*.parquet")):
            out[name] = pq.read_table(str(folder)).to_pylist()
    return out
