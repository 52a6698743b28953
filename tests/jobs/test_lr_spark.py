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
from caesar.examples.linear_road.records import position_reports, read_historical, read_lr
from caesar.examples.linear_road.validate import (
    ALL,
    SHORT_NAMES,
    inputs_from_lr_file,
    inputs_from_records,
    inputs_from_topic,
    validate,
)

from .test_lr_model_exact import SAMPLE

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spark():
    from caesar.jobs.spark_session import spark_session

    session = spark_session("caesar-tests-jobs", kafka=True, shuffle_partitions=1)
    yield session
    session.stop()


def _rows(spark, view: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(view).collect())


def test_spark_sql_equals_oracle_and_validator_finds_differences(spark, tmp_path):
    # The committed standard-load slice with a few bad lines added (dead letters).
    lr_file = tmp_path / "run.lr"
    lr_file.write_text(SAMPLE.read_text() + "0,1,2,3\n0,9,9,30,0,7,0,0,100,-1,-1,-1,-1,-1,-1\n")
    records = list(read_lr(SAMPLE))
    historical = read_historical(f"{SAMPLE}.tolls.dat")
    reference = oracle.expected_outputs(records, historical)
    assert reference.positive_tolls and reference.alerts and reference.charges
    assert any(a.cleared is not None for a in reference.accidents)
    assert any(b.balance > 0 for b in reference.balances) and reference.expenditures

    # "Actual" outputs = the oracle's, corrupted: one toll dropped, one changed, one
    # duplicated; one alert added; one balance changed; the rest as expected.
    actual = {
        "TollNotification": [t._asdict() for t in reference.tolls],
        "AccidentAlert": [a._asdict() for a in reference.alerts],
        "TollCharge": [{**c._asdict(), "ts": 0} for c in reference.charges],
        "AccountBalance": [b._asdict() for b in reference.balances],
        "DailyExpenditure": [e._asdict() for e in reference.expenditures]}
    tolls = actual["TollNotification"]
    changed = next(t for t in tolls if t["toll"] > 0)
    changed["toll"] += 2
    actual["TollNotification"] = tolls[1:] + [dict(tolls[5])]
    alerts = actual["AccidentAlert"]
    alerts.append({**alerts[0], "time": alerts[0]["time"] + 1})
    positive = next(b for b in actual["AccountBalance"] if b["balance"] > 0)
    positive["balance"] -= 1
    for schema in ALL:
        name = SHORT_NAMES[schema]
        fields = [f.split()[0] for f in SPARK_DDL[schema].split(", ")]
        rows = [{f: r.get(f, 0) for f in fields} for r in actual[name]]
        spark.createDataFrame(rows, SPARK_DDL[schema]).write.parquet(str(tmp_path / name))
    result = validate(spark, inputs_from_lr_file(spark, lr_file, f"{SAMPLE}.tolls.dat"),
                      tmp_path, ALL)

    # Spark SQL (views of that validate call) == Python oracle, exactly, every type.
    assert _rows(spark, "lr_expected_tolls") == sorted(reference.tolls)
    assert _rows(spark, "lr_expected_alerts") == sorted(reference.alerts)
    assert _rows(spark, "lr_expected_charges") == sorted(reference.charges)
    assert _rows(spark, "lr_expected_balances") == sorted(reference.balances)
    assert _rows(spark, "lr_expected_expenditures") == sorted(reference.expenditures)
    assert sorted((r.xway, r.dir, r.lane, r.pos, r.td, r.tc, r.car1, r.car2)
                  for r in expected_sql.accidents(spark).collect()) == sorted(
        (a.xway, a.dir, a.lane, a.pos, a.detected, a.cleared, *a.cars)
        for a in reference.accidents)

    by_name = {t.name: t for t in result.types}
    toll_cmp, alert_cmp = by_name["TollNotification"], by_name["AccidentAlert"]
    assert (toll_cmp.missing, toll_cmp.extra, toll_cmp.duplicates, toll_cmp.different) \
        == (1, 0, 1, 1)
    assert toll_cmp.examples["different (expected, actual)"][0]["toll"] \
        == (changed["toll"] - 2, changed["toll"])
    assert (alert_cmp.missing, alert_cmp.extra, alert_cmp.duplicates, alert_cmp.different) \
        == (0, 1, 0, 0)
    assert by_name["AccountBalance"].different == 1 and by_name["AccountBalance"].missing == 0
    assert by_name["TollCharge"].ok and by_name["DailyExpenditure"].ok
    assert not result.ok and "DIFFERENCES FOUND" in result.summary()
    assert result.positive_tolls == reference.positive_tolls
    assert result.accidents == len(reference.accidents) and result.dead_letters == 2


def test_spark_sql_equals_oracle_on_the_validator_rules(spark):
    # The hand-made scenarios of test_lr_oracle (LAV at x.5, zone minutes, a third
    # car, charges): Spark SQL gives the same answers.
    from .test_lr_oracle import accident_scenario, charge_scenario, lav_scenario

    for records, historical in (lav_scenario(40), lav_scenario(39),
                                accident_scenario(third=True), charge_scenario()):
        reference = oracle.expected_outputs(records, historical)
        outputs = expected_sql.expected_outputs(
            spark, *_frames(inputs_from_records(spark, records, historical)))
        assert sorted(tuple(r) for r in outputs["TollNotification"].collect()) \
            == sorted(reference.tolls)
        assert sorted(tuple(r) for r in outputs["AccidentAlert"].collect()) \
            == sorted(reference.alerts)
        assert sorted(tuple(r) for r in outputs["TollCharge"].collect()) \
            == sorted(reference.charges)
        assert sorted(tuple(r) for r in outputs["AccountBalance"].collect()) \
            == sorted(reference.balances)


def _frames(inputs):
    return inputs.reports, inputs.queries


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

    # An accident at segment 51 (direction 0) from t = 122 s, so that the
    # stretch upstream of it gets accident alerts as well as tolls.
    reports = list(position_reports(generate(GeneratorConfig(
        duration_s=300, seed=7, segments=(47, 52), first_accident_s=(5, 10),
        accident_length_s=(250, 280)))))
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
    # after each slice, two input watermarks on each partition: its last report's
    # ts + 1 (generic producer) and the end of its last second (LR: ms 1000 (t + 1))
    marks = keyed.where("key IS NULL").collect()
    assert len(marks) == 2 * 2 * stats.slices and {m.partition for m in marks} == {0, 1}
    assert all(m.headers[0].key == "caesar.watermark" for m in marks)
    assert max(int(m.headers[0].value) for m in marks) == (reports[-1].time + 1) * 1000
    back = inputs_from_topic(spark, kafka_bootstrap, input_topic)
    assert sorted(tuple(r)[:8] for r in back.reports.collect()) == sorted(reports)

    # Alerts as the pipeline would publish them: the oracle's outputs for this input,
    # carrying the input's Kafka timestamp; plus one garbage record.
    reference = oracle.expected_outputs(reports)
    # both output types, or the latency checks below would not see the alerts' 2 s
    assert reference.tolls and reference.alerts
    now_ms = int(time.time() * 1000)
    steady_ms = time.monotonic() * 1000  # the wall clock of a VM can step back
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
    # the types it read are summarized; TollCharge's topic is not read here, so
    # it is not listed (a 0 would read as outputs lost)
    assert counts == {"TollNotification": len(tolls), "AccidentAlert": len(alerts)}
    assert summary.undecodable == 1
    # at least the 1 s / 2 s the outputs were stamped back, less any step the
    # wall clock (the only clock shared with Kafka's timestamps) took meanwhile
    stepped_ms = min(0.0, (time.time() * 1000 - now_ms) - (time.monotonic() * 1000 - steady_ms))
    toll_summary = summary.types[0]
    assert 1000 + stepped_ms - 1 <= toll_summary.p50_ms <= toll_summary.p99_ms \
        <= toll_summary.max_ms
    assert summary.overall.count == len(tolls) + len(alerts)
    assert summary.overall.max_ms >= 2000 + stepped_ms - 1
    assert "p99 ms" in summary.render()
    # The validator, reading the input back from Kafka, finds the consumed alerts right.
    result = validate(spark, back, out)
    assert result.ok, result.summary()
    assert [t.actual for t in result.types] == [len(tolls), len(alerts)]
