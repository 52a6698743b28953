"""Results the matcher takes from the deriver (ExecutionPlan.imports) on a
real Kafka broker and Ray: they ride on the context-changes topic between
the deriver's changes and its progress, the router adds them to the routed
batches (an aggregate's also in batches of their own), and a deriver and
router killed mid-stream replay them without a loss or a duplicate
(integration)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from test_imports_pipeline import MODEL, STATS, jam_scene
from test_ray_kafka import wait_for_alerts

from caesar.codecs import make_codec
from caesar.language import compile_model
from caesar.services.common.config import ServiceConfig
from caesar.services.embedded.bus_pipeline import produce_inputs
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.ray_runtime.deployment import Deployment
from caesar.settings import KafkaSettings, Settings, TopicSettings

pytestmark = pytest.mark.integration


def scenes(n: int) -> list[dict]:
    """`n` jam scenes, 20 s apart, over 4 roads and 3 segments."""
    out = [{**e, "ts": e["ts"] + 20 * k, "road": k % 4, "seg": k % 3,
            "vid": e["vid"] + 10 * (k % 5)} for k in range(n) for e in jam_scene()]
    return sorted(out, key=lambda e: e["ts"])


@pytest.mark.parametrize(("model", "types"), [(MODEL, {"Behind", "Again"}),
                                               (STATS, {"Toll", "Free", "Slow"})],
                         ids=["patterns", "aggregate"])
def test_imports_on_kafka_and_ray_equal_the_matcher_deriving_them(
        model, types, kafka_bootstrap, kafka_bus, ray_session, unique_name, record_property):
    topic = unique_name("cars")
    plan = compile_model(model)
    assert plan.imports
    plan = replace(plan, event_types=tuple(replace(t, topic=topic) if t.topic else t
                                           for t in plan.event_types))
    events = scenes(60)
    baseline = compile_model(model, import_derived=False)
    expected = EmbeddedPipeline(baseline).run_values(events)
    want = sorted(a.identity() for a in expected.alerts)
    assert {a[1] for a in want} == types
    p = unique_name("caesar")
    topics = TopicSettings.under(p, partitions=2)
    settings = Settings(kafka=KafkaSettings(bootstrap_servers=kafka_bootstrap, linger_ms=2,
                                            poll_timeout_s=0.1), topics=topics)
    cfg = ServiceConfig(plan, topics, make_codec(settings), (0, 1), "test")
    dep = Deployment(plan, settings, actors_per_service=1,
                     options={"group_prefix": p, "commit_interval_s": 0.3})
    dep.start()
    try:
        half = len(events) // 2
        produce_inputs(kafka_bus, cfg, events[:half])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not dep.stats()["router"][0]["commits"]:
            time.sleep(0.5)
        for service in ("deriver", "router"):
            dep.kill(service)
        produce_inputs(kafka_bus, cfg, events[half:], end=True)
        got = wait_for_alerts(kafka_bus, cfg, set(want), timeout_s=150)
        stats = dep.stats()
    finally:
        dep.stop()
    # exactly once, and what the deriver sent the router was read again
    assert sorted(a.identity() for a in got) == want
    assert stats["deriver"][0]["restored_from"] or stats["router"][0]["restored_from"]
    record_property("figures", f"{len(got)} alerts ({len(want)} expected) after killing the "
                    "deriver and the router")
