"""Spark producer: Linear Road position reports -> the input topic, through the
generic producer (caesar/jobs/produce.py: Avro in the model's PositionReport
schema, keyed by the model's PARTITION BY (xway, dir, pseg), each Kafka
partition in time order). What is Linear Road's own: the reports come from the
generator or a standard LR file, and with segment fan-out each goes to the
(up to) 6 segment partitions that need it, `pseg` set (SPEC.md section 1).

Reports are sent in slices of simulated time, each one write of the generic
producer; between slices the job waits so that simulated time advances
`speed` times faster than wall time (speed 1 = real time, 0 = as fast as
possible). Each report carries its event time in ms (`ts`, SPEC.md section 1:
the reports of one second at one place in input order). The Kafka record
timestamp is the time a report entered Kafka; the pipeline carries it into the
alerts as `ingest_ms` for the latency figures. Lines of an LR file that are not
usable records go to the dead-letter topic with the reason; the queries (Types
2, 3) are for accounts.caesar and are not sent here.

After each slice, the generic producer sends every partition of the topic an
input watermark (the slice's last report ts + 1), and this job one at the
end of the slice's last second (`1000 * (time + 1)`, the first millisecond
of the next second): no report before it follows, so the scheduler releases the slice at once rather than when the
next one arrives, and what counts as late never depends on pauses.

    python -m caesar.examples.linear_road.produce --bootstrap 127.0.0.1:9092 --generate duration_s=600,segments=40:59 --speed 10
    python -m caesar.examples.linear_road.produce --bootstrap 127.0.0.1:9092 --lr-file data.lr --speed 0
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from caesar.examples.linear_road.avro import POSITION_REPORT, WIRE_DDL
from caesar.examples.linear_road.generator import generate
from caesar.examples.linear_road.partitioning import MS_PER_S, second
from caesar.examples.linear_road.records import BadLine, PositionReport, position_reports, read_lr

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from caesar.jobs.produce import ModelProducer

DEFAULT_TOPIC = "lr-position-reports"
MIN_SLICE_WALL_S = 0.5  # one Spark write per slice: keep slices long enough to amortize it


@dataclass
class ProduceStats:
    records: int = 0
    messages: int = 0  # Kafka records: records x fan-out
    slices: int = 0
    simulated_s: int = 0
    wall_s: float = 0.0


def time_slices(reports: Iterable[PositionReport], slice_s: int
                ) -> Iterator[tuple[int, list[PositionReport]]]:
    """(end of slice in simulated seconds, reports with time < end), in order."""
    if slice_s < 1:
        raise ValueError("slice_s must be >= 1")
    for start, group in itertools.groupby(reports, key=lambda r: r.time // slice_s):
        yield (start + 1) * slice_s, list(group)


def slice_seconds(speed: float) -> int:
    if speed <= 0:
        # As fast as possible, a minute at a time: 5-minute slices halved
        # the main-job test's producing, but its alerts then came in bursts
        # and, on a loaded host, a gap outlived the consumer's idle stop.
        return 60
    return max(1, int(speed * MIN_SLICE_WALL_S))


def paced_slices(reports: Iterable[PositionReport], speed: float,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> Iterator[list[PositionReport]]:
    """Time slices of `reports`, each released when its first report is due in wall
    time: simulated time runs `speed` times faster than the clock (0 = no waiting)."""
    started = clock()
    first_time: int | None = None
    for _end, batch in time_slices(reports, slice_seconds(speed)):
        if first_time is None:
            first_time = batch[0].time
        if speed > 0:
            delay = started + (batch[0].time - first_time) / speed - clock()
            if delay > 0:
                sleep(delay)
        yield batch


def produce(spark: SparkSession, reports: Iterable[PositionReport], bootstrap: str,
            topic: str = DEFAULT_TOPIC, speed: float = 0.0,
            progress: Callable[[ProduceStats], None] | None = None,
            kafka_options: dict[str, str] | None = None,
            fanout: bool = False) -> ProduceStats:
    """Send `reports` (time-ordered) to `topic`; `fanout` = per-segment partitions
    (src/caesar/examples/linear_road/partitioning.py)."""
    producer = model_producer(spark, bootstrap, topic, kafka_options)
    stats = ProduceStats()
    started = time.monotonic()
    for batch in paced_slices(reports, speed):
        rows = [tuple(record.values()) for _, group in itertools.groupby(batch, lambda r: r.time)
                for _, record in second(group, fanout)]
        sent = producer.send_batch(spark.createDataFrame(rows, WIRE_DDL[POSITION_REPORT]))
        if sent.dead_letters:  # the generator's reports are valid events; a file's may not be
            print(f"[produce] {sent.dead_letters} reports went to the dead letters", flush=True)
        # A slice holds whole seconds: no report before the next second follows,
        # so results at the end of the last second (ms 999) are released too.
        producer.send_watermark((batch[-1].time + 1) * MS_PER_S)
        stats.records += len(batch)
        stats.messages += len(rows)
        stats.slices += 1
        stats.simulated_s = batch[-1].time + 1
        stats.wall_s = time.monotonic() - started
        if progress is not None:
            progress(stats)
    return stats


def model_producer(spark: SparkSession, bootstrap: str, topic: str = DEFAULT_TOPIC,
                   kafka_options: dict[str, str] | None = None) -> ModelProducer:
    """The generic producer for the Linear Road model, writing PositionReports to `topic`."""
    from caesar.examples import model_path
    from caesar.jobs.input_rows import ColumnMapping
    from caesar.jobs.job_model import JobModel
    from caesar.jobs.produce import ModelProducer
    from caesar.settings import load_settings

    model = JobModel.load(model_path("linear_road")).with_input_topics({"PositionReport": topic})
    settings = load_settings()
    settings = settings.model_copy(update={"kafka": settings.kafka.model_copy(
        update={"bootstrap_servers": bootstrap})})
    return ModelProducer(spark, model, settings, ColumnMapping(event_type="PositionReport"),
                         kafka_options=kafka_options, source="linear-road-generator")


@contextmanager
def produce_progress(duration_s: int) -> Iterator[Callable[[ProduceStats], None]]:
    """A live bar of simulated time on a terminal; numbered lines otherwise
    (logs, CI), as `print_progress`."""
    if not sys.stdout.isatty():
        yield print_progress
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(TextColumn("[bold]producing[/bold] simulated s"), BarColumn(),
                  MofNCompleteColumn(), TextColumn("{task.fields[detail]}"),
                  TimeElapsedColumn()) as bar:
        task = bar.add_task("produce", total=duration_s, detail="")

        def update(stats: ProduceStats) -> None:
            rate = stats.records / stats.wall_s if stats.wall_s else 0.0
            bar.update(task, completed=min(stats.simulated_s, duration_s),
                       detail=f"{stats.records:,} reports, {rate:,.0f}/s, {pace(stats)}")

        yield update


def send_dead_letters(spark: SparkSession, bad: list[BadLine], bootstrap: str, topic: str,
                      kafka_options: dict[str, str] | None = None) -> int:
    """Unusable input lines as caesar.DeadLetter records (the line, its place, why)."""
    from caesar.examples.linear_road.avro import codec
    from caesar.services.common.wire import DEAD, now_ms

    if not bad:
        return 0
    values = codec().encode_many(DEAD, [
        {"version": 1, "topic": b.where.rsplit(":", 1)[0], "partition": 0,
         "offset": int(b.where.rsplit(":", 1)[1]), "key": None, "value": b.text.encode(),
         "headers": {}, "record_ms": -1, "reason": "SCHEMA_VIOLATION", "detail": b.reason,
         "service": "lr-produce", "time_ms": now_ms()} for b in bad])
    frame = spark.createDataFrame([(None, v) for v in values], "key BINARY, value BINARY")
    (frame.write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
     .options(**(kafka_options or {})).option("topic", topic).save())
    return len(bad)


def print_progress(stats: ProduceStats) -> None:
    rate = stats.records / stats.wall_s if stats.wall_s else 0.0
    print(f"[produce] {stats.records:>9,} reports sent ({stats.messages:,} Kafka records) | simulated time {stats.simulated_s:>6} s "
          f"(minute {stats.simulated_s // 60 + 1}) | {stats.wall_s:7.1f} s wall | "
          f"{rate:,.0f} reports/s | {pace(stats)}", flush=True)


def pace(stats: ProduceStats) -> str:
    """Simulated seconds per wall second so far: what --speed reached (a
    busy machine replays slower than asked)."""
    return f"x{stats.simulated_s / stats.wall_s:.1f} real time" if stats.wall_s else ""


def main(argv: list[str] | None = None) -> int:
    from caesar.examples.linear_road.generator import parse_spec
    from caesar.jobs.kafka_options import add_kafka_option_argument, spark_kafka_options
    from caesar.jobs.spark_session import spark_session
    from caesar.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default=DEFAULT_TOPIC)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--lr-file")
    source.add_argument("--generate", help="generator settings, e.g. xways=1,duration_s=600")
    parser.add_argument("--segment-fanout", action="store_true",
                        help="key by (xway, dir, pseg) and send each report to the 6 "
                             "segment partitions that need it (SPEC.md section 1)")
    parser.add_argument("--speed", type=float, default=0.0,
                        help="simulated seconds per wall second (1 = real time, 0 = max)")
    add_kafka_option_argument(parser)
    parser.add_argument("--dead-letter-topic", default=None,
                        help="topic for unusable input lines (default: CAESAR's dead letters)")
    args = parser.parse_args(argv)

    bad: list[BadLine] = []
    records = read_lr(args.lr_file, bad) if args.lr_file else generate(parse_spec(args.generate))
    spark = spark_session("caesar-lr-produce", kafka=True)
    options = spark_kafka_options(args.kafka_option)
    stats = produce(spark, position_reports(records), args.bootstrap, args.topic, args.speed,
                    print_progress, fanout=args.segment_fanout, kafka_options=options)
    dead_topic = args.dead_letter_topic or load_settings().topics.dead_letters
    dead = send_dead_letters(spark, bad, args.bootstrap, dead_topic, options)
    print(f"[produce] done: {stats.records:,} reports, {stats.simulated_s} simulated s "
          f"in {stats.wall_s:.1f} s; {dead} unusable line(s) to {dead_topic}")
    for b in bad[:5]:
        print(f"[produce]   {b.where}: {b.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
