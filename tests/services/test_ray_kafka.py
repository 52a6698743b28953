"""The services as Ray actors on a real Kafka broker (integration)."""

from __future__ import annotations

import itertools
import random
import time

import pytest
from service_plans import pos, two_context_plan

from caesar.bus.records import OutRecord
from caesar.codecs import make_codec
from caesar.services.common.config import ServiceConfig
from caesar.services.embedded.bus_pipeline import produce_inputs, read_alerts, read_dead_letters
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.reference import ReferenceEngine
from caesar.services.ray_runtime.deployment import Deployment
from caesar.settings import KafkaSettings, Settings, TopicSettings

pytestmark = pytest.mark.integration


def stream(n, segs=4, seed=3):
    rnd = random.Random(seed)
    return [pos(t // 4, rnd.randrange(100), rnd.randrange(segs), float(rnd.randrange(0, 100)))
            for t in range(n)]


def setup(kafka_bootstrap, unique_name, partitions, actors=None):
    plan = two_context_plan(topic=unique_name("pos"))
    p = unique_name("caesar")
    topics = TopicSettings.under(p, partitions=partitions)
    settings = Settings(kafka=KafkaSettings(bootstrap_servers=kafka_bootstrap, linger_ms=2,
                                            poll_timeout_s=0.1), topics=topics)
    cfg = ServiceConfig(plan, topics, make_codec(settings), tuple(range(partitions)), "test")
    dep = Deployment(plan, settings, actors_per_service=1, actors=actors,
                     options={"engine_factory": ReferenceEngine,
                              "group_prefix": p, "commit_interval_s": 0.3})
    return plan, cfg, dep


def wait_for_alerts(bus, cfg, expected, timeout_s=90.0):
    deadline = time.monotonic() + timeout_s
    got = []
    while time.monotonic() < deadline:
        got = read_alerts(bus, cfg)
        if {a.identity() for a in got} >= expected:
            time.sleep(1.0)  # let stragglers (duplicates) arrive before counting
            return read_alerts(bus, cfg)
        time.sleep(0.5)
    return got


def test_two_contexts_on_kafka_and_ray_equal_embedded_with_dead_letter(
        kafka_bootstrap, kafka_bus, ray_session, unique_name):
    """Also: two matcher actors (one partition each) beside one of every other service."""
    plan, cfg, dep = setup(kafka_bootstrap, unique_name, partitions=2, actors={"matcher": 2})
    events = stream(1200)
    expected = EmbeddedPipeline(plan, engine_factory=ReferenceEngine).run_values(events)
    want = {a.identity() for a in expected.alerts}
    dep.start()
    try:
        produce_inputs(kafka_bus, cfg, events[:600])
        p = kafka_bus.producer()
        p.produce([OutRecord(cfg.input_topics()[0], b"\xc3\x01not-avro", b"1", partition=1)])
        p.flush()
        produce_inputs(kafka_bus, cfg, events[600:], end=True)
        got = wait_for_alerts(kafka_bus, cfg, want)
        assert {a.identity() for a in got} == want
        assert len(got) == len(want), "no duplicates in a run without failures"
        dead = read_dead_letters(kafka_bus, cfg)
        assert [(d["reason"], d["partition"]) for d in dead] == [("UNDECODABLE", 1)]
        assert dead[0]["value"] == b"\xc3\x01not-avro" and dead[0]["detail"]
    finally:
        stats = dep.stop()
    assert all(s["error"] is None for ss in stats.values() for s in ss)
    assert [len(stats[s]) for s in ("scheduler", "deriver", "router", "matcher")] == [1, 1, 1, 2]
    assert all(s["records_in"] for s in stats["matcher"]), "each matcher read its partition"
    for s in stats["matcher"] + stats["deriver"]:  # what a state's writes cost, and how often
        assert s["checkpoints"] and s["checkpoint_s"] > 0, s
        assert s["checkpoint_interval_s"] >= 10.0 and isinstance(s["gc_pauses"], list), s


def test_killed_actor_is_restarted_and_alerts_are_complete(
        kafka_bootstrap, kafka_bus, ray_session, unique_name, record_property):
    plan, cfg, dep = setup(kafka_bootstrap, unique_name, partitions=2)
    events = stream(1600, seed=5)
    expected = EmbeddedPipeline(plan, engine_factory=ReferenceEngine).run_values(events)
    want = {a.identity() for a in expected.alerts}
    dep.start()
    try:
        produce_inputs(kafka_bus, cfg, events[:800])
        # Kill only once the matcher has committed a transaction (an alert is
        # visible to read-committed readers only then, with the changelog of
        # its partition): then the restart has a checkpoint to restore.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                read_alerts(kafka_bus, cfg) and dep.stats()["matcher"][0]["commits"]):
            time.sleep(0.5)
        assert dep.stats()["matcher"][0]["commits"], "the matcher committed nothing in 60 s"
        for service in ("matcher", "deriver"):
            dep.kill(service)
        produce_inputs(kafka_bus, cfg, events[800:], end=True)
        got = wait_for_alerts(kafka_bus, cfg, want, timeout_s=120)
        assert {a.identity() for a in got} == want, "alerts missing after the restart"
        stats = dep.stats()
        assert stats["matcher"][0]["restored_from"], "the restarted matcher restored a checkpoint"
        record_property("figures", f"{len(got)} alerts, {len(expected.alerts)} expected, "
                        f"{len(got) - len(expected.alerts)} duplicates")
        # exactly once: what the killed actors had produced but not committed
        # was aborted, and read-committed consumers never saw it
        assert sorted(a.identity() for a in got) == sorted(a.identity() for a in expected.alerts)
    finally:
        dep.stop()


def test_linear_road_model_embedded_equals_kafka_ray(
        kafka_bootstrap, kafka_bus, ray_session, unique_name):
    """The compiled Linear Road model (three contexts, aggregates feeding
    patterns, the Cython engine) gives the same derived events both ways."""
    from dataclasses import replace
    from pathlib import Path

    from caesar.examples.linear_road.records import SAMPLE
    from caesar.language import compile_model

    root = Path(__file__).resolve().parents[2]
    lr = compile_model(root / "src/caesar/examples/linear_road/model.caesar")
    events = lr_events(lr, SAMPLE, until_s=240)
    expected = EmbeddedPipeline(lr).run_values(events)
    assert len(expected.alerts) > 100 and not expected.dead_letters
    want = [a.identity() for a in expected.alerts]
    plan, cfg, dep = setup(kafka_bootstrap, unique_name, partitions=2)
    topic = unique_name("lr")
    tolls_topic = unique_name("lr-tolls")
    lr = replace(lr, event_types=tuple(replace(t, topic=topic) if t.topic else t
                                       for t in lr.event_types),
                 matcher_stages=tuple(replace(st, output_topic=tolls_topic)
                                      if st.output_topic == "lr-tolls" else st
                                      for st in lr.matcher_stages))
    cfg = replace(cfg, plan=lr)
    dep.plan = lr
    dep.options.pop("engine_factory")
    dep.start()
    try:
        produce_inputs(kafka_bus, cfg, events, end=True)
        got = wait_for_alerts(kafka_bus, cfg, set(want), timeout_s=180)
        assert sorted(a.identity() for a in got) == sorted(want)
        # the model's own output topic carries the tolls in the Linear Road schema
        from caesar.services.embedded.bus_pipeline import read_topic

        tolls = [cfg.codec.decode(r.value) for r in read_topic(kafka_bus, tolls_topic, 2)]
        assert {name for name, _ in tolls} == {"caesar.linear_road.TollNotification"}
        assert len(tolls) == sum(a.event_type == "TollNotification" for a in expected.alerts)
        assert all(rec["ingest_ms"] > 0 for _, rec in tolls)
    finally:
        dep.stop()


def lr_events(plan, path, until_s):
    """The model's input events as the Linear Road producer sends them."""
    from caesar.examples.linear_road.partitioning import model_inputs
    from caesar.examples.linear_road.records import position_reports, read_lr

    return model_inputs(plan, itertools.takewhile(lambda r: r.time < until_s,
                                                  position_reports(read_lr(path))))
