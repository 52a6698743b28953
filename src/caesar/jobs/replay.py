"""`caesar spark replay MODEL --from PATH_OR_TABLE --to PATH`: a model run over
historical data on Spark, without Kafka (backfills, what-if runs of a changed
model).

  1. rows -> input events, converted and checked exactly as the producer does
     (input_rows.py); what is not an event goes to `<to>/_dead_letters`;
  2. shuffle by the model's stream partition key (PARTITION BY) and sort each
     Spark partition by event time, then source order — what a Kafka
     partition holds in the deployment: many stream partitions, in time order;
  3. per Spark partition, the embedded pipeline (services/embedded/pipeline.py:
     the same scheduler, deriver, router and matcher processors, the Cython
     engine) runs over the partition's events in `mapInArrow`, streaming batch
     by batch, and flushes at the end of the input;
  4. alerts -> one Parquet table per output type (`<to>/<Type>`: the type's
     fields, plan_id, partition_key, start_ts, end_ts), context changes ->
     `<to>/_context_changes`.

A stream partition's events never leave one Spark partition, and everything a
model computes is per stream partition, so the output is the deployment's on
the same input (tests/jobs/test_spark_model_jobs.py checks it) and the work
spreads over as many executor cores as there are Spark partitions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from caesar.codecs.errors import CodecError
from caesar.jobs.frames import FrameEncoder
from caesar.jobs.input_rows import ColumnMapping, Converted, RowConverter, row_json
from caesar.jobs.job_model import JobModel
from caesar.plans.execution import ExecutionPlan

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

SEQ = "_caesar_row"
EVENTS_DDL = ("seq BIGINT, ok BOOLEAN, key STRING, ts BIGINT, event_type STRING, "
              "record STRING, reason STRING, detail STRING, raw STRING")
RESULT_DDL = ("kind STRING, event_type STRING, plan_id STRING, partition_key STRING, "
              "start_ts BIGINT, end_ts BIGINT, fields STRING, contexts ARRAY<STRING>, "
              "vector BIGINT")
CONTEXT_CHANGES = "_context_changes"
DEAD_LETTERS = "_dead_letters"
SPARK_TYPES = {"int": "BIGINT", "float": "DOUBLE", "string": "STRING", "bool": "BOOLEAN"}


@dataclass
class ReplayStats:
    rows: int = 0
    events: int = 0
    dead_letters: int = 0
    outputs: dict[str, int] = field(default_factory=dict)
    context_changes: int = 0
    partitions: int = 0
    wall_s: float = 0.0
    # Where the time went: reading + converting + checking the rows; the shuffle,
    # sort and pipelines; writing the tables.
    convert_s: float = 0.0
    pipeline_s: float = 0.0
    write_s: float = 0.0
    # Per Spark partition: events and the CPU seconds its pipeline took (skew shows here).
    partition_events: list[int] = field(default_factory=list)
    partition_cpu_s: list[float] = field(default_factory=list)

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s if self.wall_s else 0.0

    def render(self) -> str:
        outs = ", ".join(f"{t} {n:,}" for t, n in sorted(self.outputs.items())) or "none"
        return (f"[replay] {self.events:,} events in {self.partitions} Spark partition(s), "
                f"{self.dead_letters:,} dead letters -> {outs}; {self.context_changes:,} "
                f"context changes | {self.wall_s:.1f} s | {self.events_per_s:,.0f} events/s "
                f"(convert {self.convert_s:.1f} s, pipeline {self.pipeline_s:.1f} s, write "
                f"{self.write_s:.1f} s); pipeline CPU per partition: "
                + ", ".join(f"{c:.1f} s" for c in self.partition_cpu_s))


@dataclass
class EventConverter:
    """mapInArrow, step 1: source rows -> EVENTS_DDL rows (the event as JSON).
    Events of a type with a SCHEMA of its own are also checked against it (the
    producer encodes them with it); the generated input schemas accept whatever
    the row check accepts."""

    rows: RowConverter
    own_schemas: FrameEncoder | None = None  # type name -> its own Avro schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: list[tuple[Any, ...]] = []
            for r in batch.to_pylist():
                seq = r.pop(SEQ)
                c = self.rows.convert(r)
                if not c.reason and c.etype is not None and c.record is not None:
                    c = self._check_schema(c)
                if c.reason or c.etype is None or c.record is None:
                    out.append((seq, False, None, None, c.etype.name if c.etype else None,
                                None, c.reason, c.detail, row_json(r)))
                else:
                    out.append((seq, True, self.rows.key(c.record), c.record[c.etype.ts_field],
                                c.etype.name, json.dumps(c.record), None, None, None))
            yield _batch(out, _events_schema())


    def _check_schema(self, c: Converted) -> Converted:
        if self.own_schemas is None or c.etype is None or c.record is None \
                or c.etype.name not in self.own_schemas.headers:
            return c
        try:
            self.own_schemas.encode(c.etype.name, c.record)
        except CodecError as exc:
            return Converted(c.etype, c.record, "schema", str(exc))
        return c


def own_schema_checks(model: JobModel) -> FrameEncoder | None:
    """The input types with a SCHEMA of their own, keyed by type name."""
    import json as json_

    schemas = {t.name: json_.loads(t.schema_json) for t in model.input_types if t.schema_json}
    return (FrameEncoder(dict.fromkeys(schemas, b""), schemas, frozenset(schemas)) if schemas
            else None)


@dataclass
class PartitionReplayer:
    """mapInArrow, step 3: one Spark partition's events (sorted by time) through
    the embedded pipeline -> RESULT_DDL rows (alerts and context changes)."""

    plan: ExecutionPlan
    engine: str = "auto"
    batch_size: int = 5000

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from caesar.services.common.messages import InputRecord
        from caesar.services.embedded.pipeline import EmbeddedPipeline

        cpu0, wall0, events = time.process_time(), time.monotonic(), 0
        pipe = EmbeddedPipeline(self.plan, engine_factory=_engine_factory(self.engine))
        topics = {t.name: t.topic or t.name for t in self.plan.event_types}
        for batch in batches:
            events += batch.num_rows
            cols = batch.to_pydict()
            records = []
            for seq, etype, record in zip(cols["seq"], cols["event_type"], cols["record"],
                                          strict=True):
                value = json.loads(record)
                value["type"] = etype
                records.append(InputRecord(topics[etype], 0, seq, value))
            for start in range(0, len(records), self.batch_size):
                pipe.feed(records[start:start + self.batch_size])
            yield from self._drain(pipe)
        pipe.finish()
        yield from self._drain(pipe)
        # What this partition cost (the job reports the spread over partitions).
        usage = {"events": events, "cpu_s": time.process_time() - cpu0,
                 "wall_s": time.monotonic() - wall0}
        yield _batch([("stats", None, None, None, None, None, json.dumps(usage), None, None)],
                     _result_schema())

    @staticmethod
    def _drain(pipe: Any) -> Iterator[pa.RecordBatch]:
        result = pipe.result.take()
        out: list[tuple[Any, ...]] = [("alert", a.event_type, a.plan_id, a.key, a.start_ts, a.end_ts,
                json.dumps(dict(a.fields)), None, None) for a in result.alerts]
        out += [("context", None, None, c.key, c.ts, c.ts, None, list(c.contexts), c.vector)
                for c in result.context_changes]
        out += [("dead", None, None, None, d.offset, d.offset, json.dumps(
            {"reason": d.reason, "detail": d.detail}), None, None) for d in result.dead_letters]
        if out:
            yield _batch(out, _result_schema())


def _engine_factory(name: str) -> Any:
    if name == "reference":
        from caesar.services.matcher.reference import ReferenceEngine

        return ReferenceEngine
    from caesar.services.matcher.processor import default_engine_factory

    return default_engine_factory


def _batch(rows: list[tuple], schema: Any) -> pa.RecordBatch:
    import pyarrow as pa

    columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
    return pa.RecordBatch.from_arrays([pa.array(list(c), type=f.type)
                                       for c, f in zip(columns, schema, strict=True)],
                                      schema=schema)


@cache
def _events_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("seq", pa.int64()), ("ok", pa.bool_()), ("key", pa.string()),
                      ("ts", pa.int64()), ("event_type", pa.string()), ("record", pa.string()),
                      ("reason", pa.string()), ("detail", pa.string()), ("raw", pa.string())])


@cache
def _result_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("kind", pa.string()), ("event_type", pa.string()),
                      ("plan_id", pa.string()), ("partition_key", pa.string()),
                      ("start_ts", pa.int64()), ("end_ts", pa.int64()), ("fields", pa.string()),
                      ("contexts", pa.list_(pa.string())), ("vector", pa.int64())])


def replay_frames(spark: SparkSession, model: JobModel, frame: DataFrame,
                  mapping: ColumnMapping, *, partitions: int | None = None,
                  engine: str = "auto") -> tuple[DataFrame, DataFrame]:
    """(events in EVENTS_DDL, results in RESULT_DDL computed from them), lazily."""
    from pyspark.sql import functions as F

    rows = RowConverter({t.name: t for t in model.input_types}, model.plan.partition_by,
                        mapping, model.unit_ms).for_source(frame.columns)
    n = partitions or spark.sparkContext.defaultParallelism
    events = (frame.withColumn(SEQ, F.monotonically_increasing_id())
              .mapInArrow(EventConverter(rows, own_schema_checks(model)), EVENTS_DDL))
    ordered = events.where(F.col("ok")).repartition(n, "key").sortWithinPartitions("ts", "seq")
    results = ordered.select("seq", "event_type", "record").mapInArrow(
        PartitionReplayer(model.plan, engine), RESULT_DDL)
    return events, results


def replay(spark: SparkSession, model: JobModel, frame: DataFrame, mapping: ColumnMapping,
           to: str, *, partitions: int | None = None, engine: str = "auto") -> ReplayStats:
    """Run the model over `frame` and write its outputs under `to` (overwritten)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started = time.monotonic()
    n = partitions or spark.sparkContext.defaultParallelism
    events, results = replay_frames(spark, model, frame, mapping, partitions=n, engine=engine)
    events = events.persist(StorageLevel.MEMORY_AND_DISK)
    results = results.persist(StorageLevel.MEMORY_AND_DISK)
    stats = ReplayStats(partitions=n)
    try:
        for ok, count in events.groupBy("ok").count().collect():
            stats.rows += count
            if ok:
                stats.events = count
            else:
                stats.dead_letters = count
        stats.convert_s = time.monotonic() - started
        for kind, etype, count in results.groupBy("kind", "event_type").count().collect():
            if kind == "alert":
                stats.outputs[etype] = count
            elif kind == "context":
                stats.context_changes = count
            elif kind == "dead":
                stats.dead_letters += count
        for (usage,) in results.where(F.col("kind") == "stats").select("fields").collect():
            part = json.loads(usage)
            stats.partition_events.append(part["events"])
            stats.partition_cpu_s.append(part["cpu_s"])
        stats.pipeline_s = time.monotonic() - started - stats.convert_s
        root = to.rstrip("/")
        for etype in model.output_types():
            _alert_table(results, model, etype).write.mode("overwrite").parquet(f"{root}/{etype}")
        (results.where(F.col("kind") == "context")
         .select("partition_key", F.col("end_ts").alias("ts"), "contexts", "vector")
         .write.mode("overwrite").parquet(f"{root}/{CONTEXT_CHANGES}"))
        bad = events.where(~F.col("ok")).select(
            "seq", "event_type", "reason", "detail", F.col("raw").alias("row"))
        late = results.where(F.col("kind") == "dead").select(
            F.col("start_ts").alias("seq"), F.lit(None).cast("string").alias("event_type"),
            F.get_json_object("fields", "$.reason").alias("reason"),
            F.get_json_object("fields", "$.detail").alias("detail"),
            F.lit(None).cast("string").alias("row"))
        bad.unionByName(late).write.mode("overwrite").parquet(f"{root}/{DEAD_LETTERS}")
        stats.write_s = time.monotonic() - started - stats.convert_s - stats.pipeline_s
    finally:
        results.unpersist()
        events.unpersist()
    stats.wall_s = time.monotonic() - started
    return stats


def _alert_table(results: DataFrame, model: JobModel, etype: str) -> DataFrame:
    """The alerts of `etype` with their fields as typed columns (replay table layout)."""
    from pyspark.sql import functions as F

    fields = model.types[etype].fields
    schema = ", ".join(f"`{f}` {SPARK_TYPES[k]}" for f, k in fields.items())
    return (results.where((F.col("kind") == "alert") & (F.col("event_type") == etype))
            .withColumn("_f", F.from_json("fields", schema))
            .select(*[F.col("_f").getField(f).alias(f) for f in fields],
                    *[F.col(c) for c in ("plan_id", "partition_key", "start_ts", "end_ts")
                      if c not in fields]))
