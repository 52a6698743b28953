"""`caesar spark produce MODEL --from PATH_OR_TABLE`: a PySpark job that feeds a
model's input topics from a table.

Rows are read (sources.py), converted to the model's input events and checked
(input_rows.py), encoded with the model's Avro schemas in the project's wire
format and keyed by its PARTITION BY (event_encoder.py) on the executors
(`mapInArrow`). Rows that are not valid events go to the dead-letter topic
(caesar.DeadLetter, reason and the row as JSON) or to `--dead-letter-path`.

Order: the scheduler's watermark is per input topic partition, so every Kafka
partition must receive its events in event-time order. The job computes each
record's Kafka partition (Kafka's murmur2 partitioner), shuffles by (topic,
partition) and sorts each Spark partition by (event time, row number): every
topic partition is then written by one task, in order. Ties keep the rows'
order in the source.

Pacing: `speed` N > 0 sends slices of event time so that event time runs N
times faster than the wall clock (1 = real time, in the model's TIME UNIT);
0 sends everything as fast as Spark writes it. A streaming source
(`--streaming`) writes each micro-batch the same way (not paced; Spark's Kafka
sink is at-least-once, so a restarted micro-batch may send its events again).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from caesar.errors import CaesarError
from caesar.jobs.event_encoder import ENCODED_DDL, EventEncoder
from caesar.jobs.frames import FrameEncoder
from caesar.jobs.input_rows import ColumnMapping, RowConverter
from caesar.jobs.job_model import JobModel
from caesar.services.common.wire import DEAD

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from caesar.settings import Settings

SEQ = "_caesar_row"
MIN_SLICE_WALL_S = 0.5  # one Spark write per slice: long enough to amortize it


@dataclass
class ProduceStats:
    rows: int = 0
    events: int = 0
    dead_letters: int = 0
    slices: int = 0
    by_topic: dict[str, int] = field(default_factory=dict)
    event_time: int | None = None  # end of the last slice sent (model time units)
    wall_s: float = 0.0

    def render(self) -> str:
        rate = self.events / self.wall_s if self.wall_s else 0.0
        topics = ", ".join(f"{t} {n:,}" for t, n in sorted(self.by_topic.items()))
        return (f"[produce] {self.events:,} events ({topics}), {self.dead_letters:,} dead "
                f"letters | {self.slices} write(s) | {self.wall_s:.1f} s | {rate:,.0f} events/s")


@dataclass
class KafkaTarget:
    """Where and how the job writes: bootstrap servers and Spark's `kafka.*` options."""

    bootstrap: str
    options: dict[str, str] = field(default_factory=dict)

    def write(self, frame: DataFrame) -> None:
        (frame.write.format("kafka").option("kafka.bootstrap.servers", self.bootstrap)
         .options(**self.options).save())


def input_partitions(model: JobModel, settings: Settings, bootstrap: str) -> dict[str, int]:
    """Input topic -> its partitions; creates the missing ones as the services would
    (settings.topics: partitions, replication)."""
    from caesar.bus.kafka import KafkaBus
    from caesar.bus.records import TopicSpec

    t = settings.topics
    bus = KafkaBus(settings.kafka.model_copy(update={"bootstrap_servers": bootstrap}))
    try:
        bus.create_topics([TopicSpec(name, t.partitions_by_topic.get(name, t.partitions),
                                     t.replication_factor) for name in model.input_topics()]
                          + [TopicSpec(t.dead_letters, t.partitions_by_topic.get(
                              t.dead_letters, t.partitions), t.replication_factor)])
        found = bus.list_topics()
    finally:
        bus.close()
    return {name: found[name] for name in model.input_topics()}


def make_encoder(model: JobModel, settings: Settings, mapping: ColumnMapping,
                 partitions: dict[str, int], *, dead_letters_to_topic: bool = True,
                 source: str = "source") -> EventEncoder:
    codec = model.codec(settings)
    schema_names = model.input_schema_names(codec.repository)
    own = [schema_names[t.name] for t in model.input_types if t.schema_json]
    frames = FrameEncoder.from_codec(codec, [*schema_names.values(), DEAD], checked=own)
    rows = RowConverter({t.name: t for t in model.input_types}, model.plan.partition_by,
                        mapping, model.unit_ms)
    return EventEncoder(rows, schema_names, partitions, frames,
                        settings.topics.dead_letters if dead_letters_to_topic else None, source)


def encode(frame: DataFrame, encoder: EventEncoder) -> DataFrame:
    """`frame` -> one ENCODED_DDL row per source row (on the executors)."""
    from pyspark.sql import functions as F

    encoder = replace(encoder, rows=encoder.rows.for_source(frame.columns))  # fails here
    numbered = frame.withColumn(SEQ, F.monotonically_increasing_id())
    return numbered.mapInArrow(functools.partial(encoder.encode_batches, seq_column=SEQ),
                               ENCODED_DDL)


def ordered_records(events: DataFrame) -> DataFrame:
    """Kafka rows (topic, partition, key, value): each topic partition in one Spark
    partition, sorted by event time, then source order."""
    return (events.repartition("topic", "partition").sortWithinPartitions("ts", "seq")
            .select("topic", "partition", "key", "value"))


def write_dead_letters(bad: DataFrame, target: KafkaTarget, path: str | None) -> None:
    if path is not None:
        (bad.select("seq", "event_type", "reason", "detail", bad["raw"].alias("row"))
         .write.mode("append").json(path))
    else:
        target.write(bad.select("topic", "value"))


class ModelProducer:
    """Sends DataFrames of source rows to a model's input topics. Built once per
    job (the topics' partitions, the encoder); `send` for a batch input (paced
    or not), `send_batch` for one ordered write (a micro-batch, a time slice)."""

    def __init__(self, spark: SparkSession, model: JobModel, settings: Settings,
                 mapping: ColumnMapping, *, bootstrap: str | None = None,
                 kafka_options: dict[str, str] | None = None,
                 dead_letter_path: str | None = None, source: str = "source") -> None:
        self.spark, self.model, self.settings = spark, model, settings
        servers = bootstrap or settings.kafka.bootstrap_servers
        self.target = KafkaTarget(servers, dict(kafka_options or {}))
        self.dead_letter_path = dead_letter_path
        self.encoder = make_encoder(model, settings, mapping,
                                    input_partitions(model, settings, servers),
                                    dead_letters_to_topic=dead_letter_path is None,
                                    source=source)
        self.totals = ProduceStats()
        self._started = time.monotonic()

    def send_batch(self, frame: DataFrame) -> ProduceStats:
        """`frame`'s events (and dead letters) in one ordered write; returns the
        running totals. The encoded rows are cached for the counts and the writes.
        (Not an Observation on the write: with a DataSource V1 save its metrics
        sometimes never arrive and `Observation.get` blocks forever.)"""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        encoded = encode(frame, self.encoder).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            counts = _counts(encoded, self.model)
            self._add(counts)
            if self.dead_letter_path is None:
                # Dead letters travel with the events (no partition, no order).
                self.target.write(ordered_records(encoded))
            else:
                if counts.get("dead"):
                    write_dead_letters(encoded.where(~F.col("ok")), self.target,
                                       self.dead_letter_path)
                self.target.write(ordered_records(encoded.where(F.col("ok"))))
        finally:
            encoded.unpersist()
        self.totals.slices += 1
        self.totals.wall_s = time.monotonic() - self._started
        return self.totals

    def send(self, frame: DataFrame, *, speed: float = 0.0, slice_units: int | None = None,
             progress: Callable[[ProduceStats], None] | None = None) -> ProduceStats:
        """Every event of `frame` (a batch DataFrame): at once, or in slices of event
        time released `speed` times faster than real time."""
        from pyspark import StorageLevel

        if speed < 0:
            raise CaesarError("--speed cannot be negative (0 = as fast as possible)")
        length = slice_units or (_slice_units(speed, self.model.unit_ms) if speed > 0 else None)
        if length is None:
            self.send_batch(frame)
            if progress is not None:
                progress(self.totals)
            return self.totals
        encoded = encode(frame, self.encoder).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            self._add(_counts(encoded, self.model))
            self._send_slices(encoded, length, speed, progress)
        finally:
            encoded.unpersist()
        return self.totals

    def _add(self, counts: dict[str, Any]) -> None:
        t = self.totals
        t.rows += counts.get("rows") or 0
        t.dead_letters += counts.get("dead") or 0
        for topic in self.model.input_topics():
            n = counts.get(f"topic:{topic}") or 0
            t.events += n
            if n:
                t.by_topic[topic] = t.by_topic.get(topic, 0) + n

    def _send_slices(self, encoded: DataFrame, length: int, speed: float,
                     progress: Callable[[ProduceStats], None] | None) -> None:
        """One write per slice of `length` event-time units; with speed > 0 each is
        released when its first event is due on the wall clock."""
        from pyspark.sql import functions as F

        if self.totals.dead_letters:
            write_dead_letters(encoded.where(~F.col("ok")), self.target, self.dead_letter_path)
        events = encoded.where(F.col("ok"))
        first = events.agg(F.min("ts")).first()
        if first is None or first[0] is None:
            return
        origin = first[0]
        sliced = events.withColumn("slice", F.floor((F.col("ts") - F.lit(origin)) / length))
        slices = [r[0] for r in sliced.select("slice").distinct().orderBy("slice").collect()]
        started = time.monotonic()
        for k in slices:
            if speed > 0:
                delay = started + k * length * self.model.unit_ms / 1000 / speed \
                    - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            self.target.write(ordered_records(sliced.where(F.col("slice") == k)))
            self.totals.slices += 1
            self.totals.event_time = origin + (k + 1) * length
            self.totals.wall_s = time.monotonic() - self._started
            if progress is not None:
                progress(self.totals)


def _counts(encoded: DataFrame, model: JobModel) -> dict[str, Any]:
    row = encoded.select(*_count_columns(model)).first()
    return row.asDict() if row is not None else {}


def _count_columns(model: JobModel) -> list[Any]:
    """Aggregates counting rows, dead letters and events per input topic."""
    from pyspark.sql import functions as F

    ok = F.col("ok")
    return [F.count(F.lit(1)).alias("rows"),
            F.sum(F.when(~ok, 1).otherwise(0)).alias("dead"),
            *[F.sum(F.when(ok & (F.col("topic") == t), 1).otherwise(0)).alias(f"topic:{t}")
              for t in model.input_topics()]]


def produce(spark: SparkSession, model: JobModel, frame: DataFrame, settings: Settings,
            mapping: ColumnMapping, *, bootstrap: str | None = None,
            kafka_options: dict[str, str] | None = None, dead_letter_path: str | None = None,
            speed: float = 0.0, slice_units: int | None = None,
            progress: Callable[[ProduceStats], None] | None = None,
            source: str = "source") -> ProduceStats:
    """Send the events of `frame` (a batch DataFrame) to the model's input topics."""
    producer = ModelProducer(spark, model, settings, mapping, bootstrap=bootstrap,
                             kafka_options=kafka_options, dead_letter_path=dead_letter_path,
                             source=source)
    return producer.send(frame, speed=speed, slice_units=slice_units, progress=progress)


def _slice_units(speed: float, unit_ms: int) -> int:
    return max(1, int(speed * MIN_SLICE_WALL_S * 1000 / unit_ms))


def produce_stream(spark: SparkSession, model: JobModel, frame: DataFrame, settings: Settings,
                   mapping: ColumnMapping, *, checkpoint: str, bootstrap: str | None = None,
                   kafka_options: dict[str, str] | None = None,
                   dead_letter_path: str | None = None, trigger_s: float = 5.0,
                   available_now: bool = False,
                   progress: Callable[[ProduceStats], None] | None = None,
                   source: str = "source") -> StreamingQuery:
    """The streaming form: every micro-batch of `frame` (a streaming DataFrame) is
    encoded, ordered and written like a batch input (not paced)."""
    producer = ModelProducer(spark, model, settings, mapping, bootstrap=bootstrap,
                             kafka_options=kafka_options, dead_letter_path=dead_letter_path,
                             source=source)
    producer.encoder.rows.for_source(frame.columns)  # a missing column fails here

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        totals = producer.send_batch(batch)
        if progress is not None:
            progress(totals)

    writer = frame.writeStream.foreachBatch(write_batch).option("checkpointLocation", checkpoint)
    writer = (writer.trigger(availableNow=True) if available_now
              else writer.trigger(processingTime=f"{trigger_s} seconds"))
    return writer.start()
