"""`caesar spark produce|consume|replay MODEL ...`: the Spark jobs for any model
(caesar/jobs/). A built-in command group, not an entry point: the jobs are part
of the core package (only pyspark is an extra), and `caesar spark --help`
should be there to say how to install what is missing. The Spark operator runs
the same commands (`python -m caesar.cli.main spark ...`, helm/caesar)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from caesar.errors import CaesarError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from caesar.jobs.input_rows import ColumnMapping
    from caesar.jobs.job_model import JobModel
    from caesar.settings import Settings

err = Console(stderr=True)

ModelArg = Annotated[Path, typer.Argument(help="model file (.caesar)")]
SettingsOpt = Annotated[Path | None, typer.Option(
    "--config", "-c", "--settings",
    help="settings file (.yaml/.toml: topics, Kafka security, Schema Registry); default "
         "$CAESAR_CONFIG")]
BootstrapOpt = Annotated[str | None, typer.Option(
    help="Kafka bootstrap servers (default: from the settings)")]
KafkaOpt = Annotated[list[str] | None, typer.Option(
    "--kafka-option", metavar="KEY=VALUE",
    help="Kafka Java client setting for Spark's Kafka source/sink (repeatable)")]
MasterOpt = Annotated[str | None, typer.Option(
    help="Spark master (default: $CAESAR_SPARK_MASTER, spark-submit's, else local[2])")]
FromOpt = Annotated[str, typer.Option(
    "--from", help="Parquet/CSV/JSON file, directory or glob, or table:NAME")]
FormatOpt = Annotated[str, typer.Option(
    "--format", help="source format: auto | parquet | csv | json | table")]
TypeColumnOpt = Annotated[str | None, typer.Option(
    help="column naming each row's event type (default: `type` if there is one)")]
EventTypeOpt = Annotated[str | None, typer.Option(
    help="every row is an event of this type")]
MapOpt = Annotated[list[str] | None, typer.Option(
    "--map", metavar="FIELD=COLUMN",
    help="read FIELD (or TYPE.FIELD) from COLUMN (repeatable)")]
MapTypeOpt = Annotated[list[str] | None, typer.Option(
    "--map-type", metavar="VALUE=TYPE",
    help="a type column's VALUE means event type TYPE (repeatable)")]
SparkConfOpt = Annotated[list[str] | None, typer.Option(
    "--spark-conf", metavar="KEY=VALUE",
    help="Spark setting, e.g. spark.jars.packages=io.delta:delta-spark_2.13:4.2.0 "
         "(repeatable)")]
SourceOpt = Annotated[list[str] | None, typer.Option(
    "--source-option", metavar="KEY=VALUE",
    help="Spark reader option, e.g. sep=; for CSV (repeatable)")]


def register(app: typer.Typer) -> None:
    spark_app = typer.Typer(
        name="spark", no_args_is_help=True,
        help="Spark jobs for any model: feed its input topics from a table, land its "
             "outputs in tables, replay it over history (needs the spark extra of caesar-cep).")
    spark_app.command()(produce)
    spark_app.command()(consume)
    spark_app.command()(replay)
    app.add_typer(spark_app, name="spark")


def produce(
    model: ModelArg,
    source: FromOpt,
    fmt: FormatOpt = "auto",
    type_column: TypeColumnOpt = None,
    event_type: EventTypeOpt = None,
    maps: MapOpt = None,
    type_maps: MapTypeOpt = None,
    source_options: SourceOpt = None,
    speed: Annotated[float, typer.Option(
        help="event time per wall time (1 = real time, 10 = ten times faster, "
             "0 = as fast as possible)")] = 0.0,
    slice_units: Annotated[int | None, typer.Option(
        "--slice", help="send in slices of this much event time (default: by --speed; "
                        "everything at once at speed 0)")] = None,
    dead_letter_path: Annotated[str | None, typer.Option(
        help="write rows that are not valid events here (JSON) instead of the "
             "dead-letter topic")] = None,
    streaming: Annotated[bool, typer.Option(
        help="read --from as a Structured Streaming source (a directory new files "
             "land in, or a table)")] = False,
    checkpoint: Annotated[str | None, typer.Option(
        help="checkpoint directory of the streaming form")] = None,
    trigger: Annotated[float, typer.Option(help="micro-batch interval (s), streaming")] = 5.0,
    available_now: Annotated[bool, typer.Option(
        help="streaming: process what is there now, then stop")] = False,
    settings_file: SettingsOpt = None,
    bootstrap: BootstrapOpt = None,
    kafka_option: KafkaOpt = None,
    master: MasterOpt = None,
    spark_conf: SparkConfOpt = None,
) -> None:
    """Send the rows of a table to MODEL's input topics, as its events."""
    from caesar.jobs.produce import produce as run_produce
    from caesar.jobs.produce import produce_stream
    from caesar.jobs.sources import read_source, resolve_format

    job, settings = _model(model, settings_file)
    mapping = _mapping(type_column, event_type, maps, type_maps)
    resolve_format(source, fmt)  # a wrong --from fails before Spark starts
    spark = _spark(f"caesar-produce-{job.name}", master, kafka=True,
                   conf=_pairs(spark_conf))
    kafka = _kafka_options(kafka_option, settings)
    try:
        frame = read_source(spark, source, fmt, options=_pairs(source_options),
                            streaming=streaming)
        if streaming:
            if checkpoint is None:
                raise CaesarError("--streaming needs --checkpoint DIR (where Spark keeps "
                                  "the progress of the stream)")
            query = produce_stream(spark, job, frame, settings, mapping,
                                   checkpoint=checkpoint, bootstrap=bootstrap,
                                   kafka_options=kafka, dead_letter_path=dead_letter_path,
                                   trigger_s=trigger, available_now=available_now,
                                   progress=lambda s: err.print(s.render(), markup=False),
                                   source=source)
            err.print(f"[produce] streaming {source} -> {', '.join(job.input_topics())}")
            try:
                query.awaitTermination()
            except KeyboardInterrupt:
                query.stop()
            return
        err.print(f"[produce] {source} -> {', '.join(job.input_topics())} "
                  f"(speed {speed or 'max'})")
        stats = run_produce(spark, job, frame, settings, mapping, bootstrap=bootstrap,
                            kafka_options=kafka, dead_letter_path=dead_letter_path,
                            speed=speed, slice_units=slice_units, source=source,
                            progress=lambda s: err.print(s.render(), markup=False))
        dead_to = dead_letter_path or f"topic {settings.topics.dead_letters}"
        err.print(f"[produce] done: {stats.events:,} events, {stats.dead_letters:,} dead "
                  f"letters ({dead_to}) in {stats.wall_s:.1f} s")
    finally:
        spark.stop()

def consume(
    model: ModelArg,
    to: Annotated[str, typer.Option(
        "--to", help="directory (parquet, delta) or catalog namespace (iceberg)")],
    fmt: Annotated[str, typer.Option(
        "--format", help="parquet | delta | iceberg")] = "parquet",
    writer: Annotated[str, typer.Option(
        help="parquet writer: arrow (driver, local paths) | spark (any file system); "
             "default arrow for local paths")] = "auto",
    checkpoint: Annotated[str | None, typer.Option(
        help="Spark checkpoint (default: <to>/_checkpoint)")] = None,
    topics: Annotated[list[str] | None, typer.Option(
        "--topic", help="read these topics (default: every output topic of MODEL)")] = None,
    trigger: Annotated[float, typer.Option(help="micro-batch interval (s)")] = 1.0,
    idle_stop: Annotated[float, typer.Option(
        help="stop after this many seconds without new outputs (0 = run until "
             "interrupted)")] = 0.0,
    max_seconds: Annotated[float, typer.Option(help="stop after this long")] = 86_400.0,
    fresh: Annotated[bool, typer.Option(help="delete --to and the checkpoint first")] = False,
    hops: Annotated[bool, typer.Option(
        help="at the end, the latency per hop read back from the topics")] = False,
    max_records_per_batch: Annotated[int, typer.Option(
        help="records per micro-batch at most (the driver holds one batch)")] = 200_000,
    settings_file: SettingsOpt = None,
    bootstrap: BootstrapOpt = None,
    kafka_option: KafkaOpt = None,
    master: MasterOpt = None,
    spark_conf: SparkConfOpt = None,
) -> None:
    """Land MODEL's outputs (every output topic) in one table per output type."""
    from caesar.jobs.consume import OutputConsumer

    job, settings = _model(model, settings_file)
    if fmt not in ("parquet", "delta", "iceberg"):
        raise CaesarError(f"unknown --format {fmt!r} (parquet, delta or iceberg)")
    kind = fmt if fmt != "parquet" else (
        writer if writer != "auto" else ("spark" if "://" in to else "arrow"))
    spark = _spark(f"caesar-consume-{job.name}", master, kafka=True,
                   conf=_pairs(spark_conf))
    consumer = None
    try:
        consumer = OutputConsumer(spark, job, settings, to, writer=kind, bootstrap=bootstrap,
                                  kafka_options=_kafka_options(kafka_option, settings),
                                  checkpoint=checkpoint, trigger_s=trigger, fresh=fresh,
                                  topics=topics, max_records_per_batch=max_records_per_batch)
        err.print(f"[consume] {', '.join(consumer.topics)} -> {to} ({kind}); "
                  f"checkpoint {consumer.checkpoint}")
        try:
            if idle_stop > 0:
                consumer.wait_idle(idle_stop, max_seconds)
            else:
                consumer.wait_idle(max_seconds + 1, max_seconds)
        except KeyboardInterrupt:
            pass
        consumer.stop()
        typer.echo(consumer.summary().render())
        if hops:
            from caesar.jobs.hops import hop_table

            typer.echo(hop_table(job, settings, bootstrap, consumer).render())
    finally:
        if consumer is not None:
            consumer.stop()
        spark.stop()

def replay(
    model: ModelArg,
    source: FromOpt,
    to: Annotated[str, typer.Option("--to", help="output directory (overwritten)")],
    fmt: FormatOpt = "auto",
    type_column: TypeColumnOpt = None,
    event_type: EventTypeOpt = None,
    maps: MapOpt = None,
    type_maps: MapTypeOpt = None,
    source_options: SourceOpt = None,
    partitions: Annotated[int | None, typer.Option(
        help="Spark partitions the stream partitions are spread over (default: the "
             "cores Spark has)")] = None,
    engine: Annotated[str, typer.Option(help="auto | reference")] = "auto",
    master: MasterOpt = None,
    spark_conf: SparkConfOpt = None,
) -> None:
    """Run MODEL over historical data on Spark, without Kafka, into tables under --to."""
    from caesar.jobs.job_model import JobModel
    from caesar.jobs.replay import replay as run_replay
    from caesar.jobs.sources import read_source, resolve_format

    if engine not in ("auto", "reference"):
        raise CaesarError(f"unknown --engine {engine!r} (auto or reference)")
    job = JobModel.load(model)
    mapping = _mapping(type_column, event_type, maps, type_maps)
    resolve_format(source, fmt)  # a wrong --from fails before Spark starts
    spark = _spark(f"caesar-replay-{job.name}", master, kafka=False,
                   conf=_pairs(spark_conf))
    try:
        frame = read_source(spark, source, fmt, options=_pairs(source_options))
        stats = run_replay(spark, job, frame, mapping, to, partitions=partitions,
                           engine=engine)
        err.print(stats.render(), markup=False)
        err.print(f"[replay] tables in {to}: {', '.join(job.output_types())}, "
                  "_context_changes, _dead_letters")
    finally:
        spark.stop()


def _model(model: Path, settings_file: Path | None) -> tuple[JobModel, Settings]:
    from caesar.jobs.job_model import JobModel
    from caesar.settings import load_settings

    return JobModel.load(model), load_settings(settings_file)


def _mapping(type_column: str | None, event_type: str | None, maps: list[str] | None,
             type_maps: list[str] | None) -> ColumnMapping:
    from caesar.jobs.input_rows import ColumnMapping

    return ColumnMapping.parse(type_column=type_column, event_type=event_type,
                               maps=maps or (), type_maps=type_maps or ())


def _pairs(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CaesarError(f"expected KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _kafka_options(pairs: list[str] | None, settings: Settings) -> dict[str, str]:
    from caesar.jobs.kafka_options import spark_kafka_options

    return spark_kafka_options(pairs or (), settings=settings)


def _spark(name: str, master: str | None, *, kafka: bool,
           conf: dict[str, str] | None = None) -> SparkSession:
    try:
        from caesar.jobs.spark_session import ensure_spark_jars, spark_session
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise CaesarError("the Spark jobs need pyspark: pip install 'caesar-cep[spark]'") from exc
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise CaesarError("the Spark jobs need pyspark: pip install 'caesar-cep[spark]'") from exc
    if kafka:
        ensure_spark_jars()
    started = time.monotonic()
    session = spark_session(name, master=master, kafka=kafka, conf=conf)
    err.print(f"[spark] {session.sparkContext.master} up in {time.monotonic() - started:.1f} s",
              markup=False)
    return session
