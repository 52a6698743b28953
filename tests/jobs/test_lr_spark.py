"""Spark side of Linear Road, for real (local mode): the Spark SQL validator agrees
exactly with the Python oracle of SPEC.md, and detects what is wrong with actual
alerts; producer -> real Kafka broker -> streaming consumer -> Parquet round trip.

One SparkSession for the module (Spark allows one per process), with the Kafka
connector jars on it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from caesar.examples.linear_road import expected_sql, oracle
from caesar.examples.linear_road.avro import (
    ACCIDENT_ALERT,
    SPARK_DDL,
    TOLL_NOTIFICATION,
    encode,
)
from caesar.examples.linear_road.generator import GeneratorConfig, generate
from caesar.examples.linear_road.partitioning import fanout_segments
from caesar.examples.linear_road.validate import (
    reports_from_lr_file,
    reports_from_topic,
    validate,
)

pytestmark = pytest.mark.integration

# 3 accidents per direction: some overlap near one segment (nearest acc_seg).
SHORT = GeneratorConfig(duration_s=600, cars_per_direction=300, seed=5,
                        accidents_per_direction=3)


@pytest.fixture(scope="module")
def spark():
    from caesar.jobs.spark_session import spark_session

    session = spark_session("caesar-tests-jobs", kafka=True, shuffle_partitions=1)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def short_run():
    return list(generate(SHORT))


def test_spark_sql_equals_oracle_and_validator_finds_differences(spark, short_run, tmp_path):
    lr_file = tmp_path / "run.lr"
    lr_file.write_text("".join(r.to_lr_line() + "\n" for r in short_run))
    reference = oracle.expected_outputs(short_run)
    # The run is a meaningful check: positive tolls, alerts and an accident that clears.
    assert any(t.toll > 0 for t in reference.tolls) and reference.alerts
    assert any(a.cleared != oracle.INF for a in reference.accidents)

    # "Actual" outputs = the oracle's, corrupted: one toll dropped, one changed, one
    # duplicated; one alert added.
    tolls = [t._asdict() for t in reference.tolls]
    alerts = [a._asdict() for a in reference.alerts]
    changed = next(t for t in tolls if t["toll"] > 0)
    changed["toll"] += 2
    tolls = tolls[1:] + [dict(tolls[5])]
    alerts.append({**alerts[0], "time": alerts[0]["time"] + 1})
    for name, rows, schema in (("TollNotification", tolls, TOLL_NOTIFICATION),
                               ("AccidentAlert", alerts, ACCIDENT_ALERT)):
        spark.createDataFrame([{**r, "ingest_ms": 0} for r in rows], SPARK_DDL[schema]) \
            .write.parquet(str(tmp_path / name))
    result = validate(spark, reports_from_lr_file(spark, lr_file), tmp_path)

    # Spark SQL (views of that validate call) == Python oracle, exactly.
    assert sorted(tuple(r) for r in spark.table("lr_expected_tolls").collect()) \
        == sorted(reference.tolls)
    assert sorted(tuple(r) for r in spark.table("lr_expected_alerts").collect()) \
        == sorted(reference.alerts)
    assert sorted((r.xway, r.dir, r.lane, r.pos, r.td, r.tc)
                  for r in expected_sql.accidents(spark).collect()) == sorted(
        (a.xway, a.dir, a.lane, a.pos, a.detected, None if a.cleared == oracle.INF else a.cleared)
        for a in reference.accidents)

    toll_cmp, alert_cmp = result.types
    assert (toll_cmp.expected, toll_cmp.actual) == (len(reference.tolls), len(tolls))
    assert (toll_cmp.missing, toll_cmp.extra, toll_cmp.duplicates, toll_cmp.different) \
        == (1, 0, 1, 1)
    assert toll_cmp.examples["different (expected, actual)"][0]["toll"] \
        == (changed["toll"] - 2, changed["toll"])
    assert (alert_cmp.missing, alert_cmp.extra, alert_cmp.duplicates, alert_cmp.different) \
        == (0, 1, 0, 0)
    assert not result.ok and "DIFFERENCES FOUND" in result.summary()
    assert result.positive_tolls == sum(t.toll > 0 for t in reference.tolls)
    assert result.accidents == len(reference.accidents)


def _create_topics(bootstrap: str, *names: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, num_partitions=2, replication_factor=1)
                                   for n in names])
    for future in futures.values():
        future.result(30)


def test_produce_then_consume_round_trip(spark, kafka_bootstrap, unique_name, tmp_path: Path):
    from confluent_kafka import Producer

    from caesar.examples.linear_road.consume_alerts import AlertConsumer
    from caesar.examples.linear_road.produce import produce

    reports = list(generate(GeneratorConfig(duration_s=240, cars_per_direction=40, seed=5)))
    input_topic, toll_topic, alert_topic = (unique_name("lr-in"), unique_name("lr-toll"),
                                            unique_name("lr-acc"))
    _create_topics(kafka_bootstrap, input_topic, toll_topic, alert_topic)
    seen = []
    stats = produce(spark, reports, kafka_bootstrap, input_topic, speed=240.0,
                    progress=seen.append, fanout=True)
    assert stats.records == len(reports) and stats.simulated_s == reports[-1].time + 1
    fanned = sum(len(fanout_segments(r.seg, r.dir)) for r in reports)
    assert stats.messages == fanned > 5 * len(reports)
    assert len(seen) == stats.slices >= 2
    # The input topic holds the fanned-out reports keyed by (xway, dir, pseg), Avro-decodable
    # by Spark; read back once each (own copies).
    keyed = spark.read.format("kafka").option("kafka.bootstrap.servers", kafka_bootstrap) \
        .option("subscribe", input_topic).option("startingOffsets", "earliest") \
        .option("includeHeaders", "true").load()
    keys = {(r.key.decode()) for r in keyed.where("key IS NOT NULL").select("key").distinct()
            .collect()}
    # keyed by the model's PARTITION BY xway, dir, pseg (the stream partition key)
    assert keys == {f"0|{r.dir}|{p}" for r in reports for p in fanout_segments(r.seg, r.dir)}
    # after each slice, an input watermark (its last report time + 1) on each partition
    marks = keyed.where("key IS NULL").collect()
    assert len(marks) == 2 * stats.slices and {m.partition for m in marks} == {0, 1}
    assert all(m.headers[0].key == "caesar.watermark" for m in marks)
    assert max(int(m.headers[0].value) for m in marks) == reports[-1].time + 1
    back = reports_from_topic(spark, kafka_bootstrap, input_topic)
    assert sorted(tuple(r) for r in back.collect()) == sorted(reports)

    # Alerts as the pipeline would publish them: the oracle's outputs for this input,
    # carrying the input's Kafka timestamp; plus one garbage record.
    reference = oracle.expected_outputs(reports)
    now_ms = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    tolls = [{**t._asdict(), "ingest_ms": now_ms - 1000} for t in reference.tolls]
    alerts = [{**a._asdict(), "ingest_ms": now_ms - 2000} for a in reference.alerts]
    for value in encode(TOLL_NOTIFICATION, tolls):
        producer.produce(toll_topic, value, key=b"0:0")
    for value in encode(ACCIDENT_ALERT, alerts):
        producer.produce(alert_topic, value, key=b"0:0")
    producer.produce(toll_topic, b"not avro", key=b"0:0")
    producer.flush(30)

    out = tmp_path / "alerts"
    consumer = AlertConsumer(spark, kafka_bootstrap, out,
                             {TOLL_NOTIFICATION: toll_topic, ACCIDENT_ALERT: alert_topic},
                             trigger_s=0.5)
    try:
        consumer.wait_idle(idle_s=3, max_s=120, min_records=len(tolls) + len(alerts))
    finally:
        consumer.stop()
    summary = consumer.summary()
    counts = {t.name: t.count for t in summary.types}
    assert counts == {"TollNotification": len(tolls), "AccidentAlert": len(alerts)}
    assert summary.undecodable == 1
    toll_summary = summary.types[0]
    assert 1000 <= toll_summary.p50_ms <= toll_summary.p99_ms <= toll_summary.max_ms
    assert summary.overall.count == len(tolls) + len(alerts)
    assert summary.overall.max_ms >= 2000
    assert "p99 ms" in summary.render()
    # The validator, reading the input back from Kafka, finds the consumed alerts right.
    result = validate(spark, back, out)
    assert result.ok, result.summary()
    assert [t.actual for t in result.types] == [len(tolls), len(alerts)]
