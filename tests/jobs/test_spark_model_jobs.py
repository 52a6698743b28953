"""The Spark jobs for any model, for real: Spark local mode, a real Kafka broker,
the services as Ray actors (integration).

- replay (Spark, no Kafka) == embedded mode, for hospital hygiene (CSV input;
  alerts and context changes) and aggressive driving (Parquet input; Listing
  1, no contexts: one alert per matching episode of the generator);
- hospital hygiene end to end: `spark produce` -> Kafka -> services on Ray ->
  `spark consume` -> Parquet tables == embedded mode == `spark replay`, no
  dead letters, no duplicates;
- the consumer, failing after it wrote a micro-batch but before Spark
  committed it, restarted: every committed record exactly once, aborted
  transactions' records never.

One SparkSession for the module (Spark allows one per process)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from caesar.examples.aggressive_driving.generator import DrivingConfig, drive
from caesar.examples.aggressive_driving.generator import generate as driving
from caesar.examples.event_files import write_events
from caesar.examples.hospital_hygiene.generator import HygieneConfig
from caesar.examples.hospital_hygiene.generator import generate as hygiene
from caesar.jobs.consume import OutputConsumer, read_tables
from caesar.jobs.input_rows import ColumnMapping
from caesar.jobs.job_model import JobModel
from caesar.jobs.produce import produce
from caesar.jobs.replay import CONTEXT_CHANGES, DEAD_LETTERS, replay
from caesar.jobs.sources import read_source
from caesar.services.embedded.pipeline import EmbeddedPipeline, PipelineResult
from caesar.settings import KafkaSettings, Settings, TopicSettings

from .model_runs import before, closing_events, identities, renamed_model, table_identities

pytestmark = pytest.mark.integration

PARTITIONS = 4


@pytest.fixture(scope="module")
def spark():
    from caesar.jobs.spark_session import spark_session

    session = spark_session("caesar-tests-model-jobs", master="local[2]", kafka=True,
                            shuffle_partitions=2)
    yield session
    session.stop()


def embedded(model: JobModel, events: list[dict]) -> PipelineResult:
    return EmbeddedPipeline(model.plan).run_values(events)


def changes(result: PipelineResult) -> list[tuple]:
    return sorted((c.key, c.ts, tuple(sorted(c.contexts))) for c in result.context_changes)


def replayed(spark, model: JobModel, source: str, out: Path) -> tuple[list, list, int]:
    """(alert identities, context changes, dead letters) of `spark replay`."""
    import pyarrow.parquet as pq

    replay(spark, model, read_source(spark, source), ColumnMapping.parse(), str(out))
    alerts = []
    for etype in model.output_types():
        alerts += table_identities(pq.read_table(out / etype).to_pylist(), etype)
    ctx = sorted((r["partition_key"], r["ts"], tuple(sorted(r["contexts"])))
                 for r in pq.read_table(out / CONTEXT_CHANGES).to_pylist())
    return sorted(alerts), ctx, pq.read_table(out / DEAD_LETTERS).num_rows


@pytest.mark.parametrize(("example", "suffix"), [("hospital_hygiene", ".csv"),
                                                 ("aggressive_driving", ".parquet")])
def test_replay_equals_embedded(spark, tmp_path, example, suffix):
    model = JobModel.load(renamed_model(example, "replay", tmp_path))
    source = tmp_path / f"events{suffix}"
    if example == "hospital_hygiene":
        events = list(hygiene(HygieneConfig(workers=12, hours=2, seed=4)))
        want = embedded(model, events)
        assert len(want.alerts) > 50 and want.context_changes  # a run worth comparing
    else:
        episodes, events = drive(DrivingConfig(cars=20, minutes=10, seed=4))
        want = embedded(model, events)
        matching = sum(e.matches for e in episodes)
        assert len(want.alerts) == matching > 50 and not want.context_changes
    write_events(events, source)
    alerts, ctx, dead = replayed(spark, model, str(source), tmp_path / "replay")
    assert alerts == identities(want.alerts, model)
    assert ctx == changes(want)
    assert dead == 0


def deployment_settings(bootstrap: str, p: str) -> Settings:
    topics = TopicSettings.under(p, partitions=PARTITIONS)
    return Settings(kafka=KafkaSettings(bootstrap_servers=bootstrap, linger_ms=2,
                                        poll_timeout_s=0.1), topics=topics)


def test_hospital_hygiene_round_trip_equals_embedded_and_replay(
        spark, kafka_bootstrap, kafka_bus, ray_session, tmp_path, unique_name):
    from caesar.services.common.wire import CHANGE, DEAD
    from caesar.services.embedded.bus_pipeline import read_topic
    from caesar.services.ray_runtime.deployment import Deployment

    tag = unique_name("rt").replace("-", "_")
    model = JobModel.load(renamed_model("hospital_hygiene", tag, tmp_path))
    events = list(hygiene(HygieneConfig(workers=10, hours=1.5, seed=7)))
    end = events[-1]["ts"] + 2 * 3600  # after every window of the model (1 hour)
    events += closing_events(model, "ShiftEnd", "worker", end, PARTITIONS)
    source = tmp_path / "events.parquet"
    write_events(events, source)
    want = embedded(model, events)
    want_alerts = before(identities(want.alerts, model), end)
    assert len(want_alerts) > 50

    settings = deployment_settings(kafka_bootstrap, tag)
    deployment = Deployment(model.plan, settings, actors_per_service=1,
                            options={"group_prefix": tag,
                                     "commit_interval_s": 0.3})
    deployment.start()
    consumer = None
    try:
        deployment.stats()  # every actor is up
        consumer = OutputConsumer(spark, model, settings, str(tmp_path / "out"), trigger_s=0.5)
        stats = produce(spark, model, read_source(spark, str(source)), settings,
                        ColumnMapping.parse())
        assert (stats.events, stats.dead_letters) == (len(events), 0)
        deadline = time.monotonic() + 240
        while consumer.records < len(want_alerts) and time.monotonic() < deadline:
            assert consumer.query.exception() is None, consumer.query.exception()
            time.sleep(1.0)
        consumer.wait_idle(idle_s=4.0, max_s=60.0)  # then stragglers (duplicates) too
    finally:
        if consumer is not None:
            consumer.stop()
        errors = [s["error"] for ss in deployment.stop().values() for s in ss if s["error"]]
    assert not errors

    tables = read_tables(tmp_path / "out", model)
    got = sorted(i for etype in model.output_types()
                 for i in table_identities(tables.get(etype, []), etype))
    positions = [(r["kafka_topic"], r["kafka_partition"], r["kafka_offset"])
                 for rows in tables.values() for r in rows]
    assert len(positions) == len(set(positions)), "a record reached a table twice"
    assert before(got, end) == want_alerts  # as lists: equal outputs counted (BusyVisit has some)
    assert set(got) <= set(identities(want.alerts, model))
    assert "_undecodable" not in tables
    dead = read_topic(kafka_bus, settings.topics.dead_letters, PARTITIONS)
    assert [model.codec(settings).decode_as(DEAD, r.value)["detail"] for r in dead] == []
    codec = model.codec(settings)
    deployed_changes = sorted(
        (v["partition_key"], v["ts"], tuple(sorted(v["active"])))
        for r in read_topic(kafka_bus, settings.topics.context_changes, PARTITIONS)
        for s, v in [codec.decode(r.value)] if s == CHANGE)
    assert deployed_changes == changes(want)

    # The same data replayed on Spark gives what the deployment gave.
    replay_alerts, replay_changes, replay_dead = replayed(spark, model, str(source),
                                                          tmp_path / "replay")
    assert before(replay_alerts, end) == before(got, end)
    assert replay_changes == deployed_changes and replay_dead == 0


class CrashingConsumer(OutputConsumer):
    """Fails once, after writing the first micro-batch past the first that wrote
    records, but before Spark commits it (what a killed driver leaves behind).
    Not a fixed batch id: a batch may hold only an aborted transaction."""

    crash_at: int | None = None

    def write_batch(self, batch, batch_id):
        before = self.records
        super().write_batch(batch, batch_id)
        if self.crash_at is None and before > 0 and self.records > before:
            self.crash_at = batch_id
            raise RuntimeError(f"crash after writing batch {batch_id}")


def test_consumer_restart_neither_loses_nor_duplicates(spark, kafka_bootstrap, kafka_bus,
                                                       tmp_path, unique_name):
    from confluent_kafka import Producer

    from caesar.bus.records import OutRecord, TopicSpec
    from caesar.services.common.messages import Alert
    from caesar.services.common.wire import DERIVED, alert_record

    tag = unique_name("rs").replace("-", "_")
    model = JobModel.load(renamed_model("aggressive_driving", tag, tmp_path))
    settings = deployment_settings(kafka_bootstrap, tag)
    codec = model.codec(settings)
    topic = f"{model.name}.AggressiveDriver"
    kafka_bus.create_topics([TopicSpec(t, 2) for t in model.output_topics()])

    def fields(i: int) -> dict:
        """An alert's fields; `id` counts the records."""
        return {"id": i, "avg_speed": 80.5, "A_ts": i, "A_te": i + 6, "B_ts": i + 6,
                "B_te": i + 26, "C_ts": i + 17, "C_te": None if i % 2 else i + 21}

    def send(first: int, n: int) -> None:
        producer = kafka_bus.producer()
        producer.produce([OutRecord(topic, codec.encode(DERIVED, alert_record(Alert(
            "q1", "AggressiveDriver", 0, str(i % 5), i, i + 26, fields(i),
            ingest_ms=int(time.time() * 1000)))), str(i % 5).encode()) for i in range(first,
                                                                                   first + n)])
        producer.flush()

    def aborted(n: int) -> None:
        p = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"{tag}-tx"})
        p.init_transactions()
        p.begin_transaction()
        for i in range(n):
            p.produce(topic, codec.encode(DERIVED, alert_record(Alert(
                "q1", "AggressiveDriver", 0, "aborted", i, i + 26, fields(-1 - i)))))
        p.flush()
        p.abort_transaction()

    out, checkpoint = tmp_path / "out", str(tmp_path / "ckpt")
    first = CrashingConsumer(spark, model, settings, str(out), checkpoint=checkpoint,
                             trigger_s=0.3)
    try:
        send(0, 100)
        aborted(30)
        deadline = time.monotonic() + 120
        while first.records < 100 and time.monotonic() < deadline:
            time.sleep(0.3)
        send(100, 100)  # batch 1 (or later): written, then the crash
        deadline = time.monotonic() + 120
        while first.query.exception() is None and time.monotonic() < deadline:
            time.sleep(0.3)
        assert first.query.exception() is not None, "the consumer did not crash"
    finally:
        first.stop()
    rerun = first.crash_at
    send(200, 150)
    second = OutputConsumer(spark, model, settings, str(out), checkpoint=checkpoint,
                            trigger_s=0.3)
    try:
        deadline = time.monotonic() + 120
        while second.records < 150 and time.monotonic() < deadline:
            time.sleep(0.3)
        second.wait_idle(idle_s=2.0, max_s=30.0)
    finally:
        second.stop()

    rows = read_tables(out, model)["AggressiveDriver"]
    positions = [(r["kafka_partition"], r["kafka_offset"]) for r in rows]
    assert len(positions) == len(set(positions)), "a record was written twice"
    assert sorted(r["id"] for r in rows) == list(range(350)), "a record was lost or doubled"
    assert rows[0]["B_te"] == rows[0]["id"] + 26  # the declared fields, typed
    assert all(r["partition_key"] != "aborted" for r in rows)  # read_committed
    assert rerun in {r["batch_id"] for r in rows}  # the crashed batch, written again


def test_streaming_source_is_produced_in_order(spark, kafka_bootstrap, kafka_bus, tmp_path,
                                               unique_name):
    """`produce --streaming`: every file landing in the directory is a micro-batch,
    converted, keyed and written in event-time order per Kafka partition; a bad
    row goes to the dead-letter path."""
    from caesar.jobs.produce import produce_stream
    from caesar.services.embedded.bus_pipeline import read_topic
    from caesar.services.scheduler.runner import WATERMARK_HEADER

    tag = unique_name("st").replace("-", "_")
    model = JobModel.load(renamed_model("aggressive_driving", tag, tmp_path))
    settings = deployment_settings(kafka_bootstrap, tag)
    events = list(driving(DrivingConfig(cars=4, minutes=1, seed=3)))
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    half = len(events) // 2
    # Out of order inside a file: the job sorts.
    write_events(list(reversed(events[:half])), incoming / "a.json")
    write_events([*events[half:], {"type": "CarSensor", "ts": "soon", "car_id": 1}],
                 incoming / "b.json")
    frame = read_source(spark, str(incoming), "json", streaming=True)
    query = produce_stream(spark, model, frame, settings, ColumnMapping.parse(),
                           checkpoint=str(tmp_path / "ckpt"), available_now=True,
                           dead_letter_path=str(tmp_path / "dead"))
    query.awaitTermination(180)
    assert query.exception() is None
    codec = model.codec(settings)
    [topic] = model.input_topics()
    records = read_topic(kafka_bus, topic, PARTITIONS)
    assert len([r for r in records if r.value is not None]) == len(events)
    by_partition: dict[int, list[int]] = {}
    for r in records:
        if r.value is not None:
            by_partition.setdefault(r.partition, []).append(codec.decode(r.value)[1]["ts"])
    # After each write, an input watermark (a record without value) on every
    # partition, at least the write's last event time.
    marks = {(r.partition, int(r.header(WATERMARK_HEADER) or b"-1"))
             for r in records if r.value is None}
    assert {p for p, _ in marks} == set(range(PARTITIONS))
    assert max(m for _, m in marks) > max(e["ts"] for e in events)
    # Each micro-batch is sorted; a batch per file here, and b's times follow a's.
    assert all(ts == sorted(ts) for ts in by_partition.values())
    dead = spark.read.json(str(tmp_path / "dead")).collect()
    assert [(d.reason, d.event_type) for d in dead] == [("schema", "CarSensor")]
