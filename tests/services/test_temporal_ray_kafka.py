"""TPStream on the real deployment: the Listing 1 example plus a context that
follows a situation, as Ray actors on a real Kafka broker, give exactly the
alerts of embedded mode (`caesar run`) -- integration."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from caesar.codecs import make_codec
from caesar.examples import model_path
from caesar.language import compile_model
from caesar.services.common.config import ServiceConfig
from caesar.services.embedded.bus_pipeline import (
    produce_inputs,
    read_alerts,
    read_dead_letters,
    read_topic,
)
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.ray_runtime.deployment import Deployment
from caesar.settings import KafkaSettings, Settings, TopicSettings

pytestmark = pytest.mark.integration

EXAMPLE = model_path("aggressive_driving")
# Listing 1 as in the example, plus a context following a model-level situation
# (its start and end run in the deriver) with a temporal query inside it.
EXTRA = """
SITUATION Speeding AS CarSensor.speed > 70 AT LEAST 3 SECONDS
DEFAULT CONTEXT normal {
  INITIATE CONTEXT speeding ON START OF Speeding
}
CONTEXT speeding {
  TERMINATE CONTEXT speeding ON END OF Speeding
  DERIVE HardBrake(min(C.accel) AS hardest, count(C) AS readings)
    DEFINE C AS CarSensor.accel < -9 AT LEAST 2 SECONDS
    PATTERN C
}
"""


def test_temporal_queries_on_kafka_and_ray_equal_embedded(
        kafka_bootstrap, kafka_bus, ray_session, unique_name) -> None:
    text = EXAMPLE.read_text() + EXTRA
    events = [{"type": "CarSensor", **json.loads(line)} for line in
              (EXAMPLE.parent / "data" / "car_sensors.jsonl").read_text().splitlines()]
    plan = compile_model(text, "aggressive_driving.caesar")
    expected = EmbeddedPipeline(plan).run_values(events)
    kinds = {a.event_type for a in expected.alerts}
    assert kinds == {"AggressiveDriver", "HardBrake"} and len(expected.alerts) == 32
    assert any(a.fields["C_te"] is None for a in expected.alerts)  # open ends on the wire

    p = unique_name("tp")
    topic = unique_name("cars")
    out_topic = unique_name("aggressive")
    plan = replace(plan, event_types=tuple(replace(t, topic=topic) if t.topic else t
                                           for t in plan.event_types),
                   matcher_stages=tuple(replace(s, output_topic=out_topic)
                                        if s.output_topic and "Aggressive" in s.output_topic
                                        else s for s in plan.matcher_stages))
    topics = TopicSettings.under(p, partitions=2)
    settings = Settings(kafka=KafkaSettings(bootstrap_servers=kafka_bootstrap, linger_ms=2,
                                            poll_timeout_s=0.1), topics=topics)
    cfg = ServiceConfig(plan, topics, make_codec(settings), (0, 1), "test")
    dep = Deployment(plan, settings, actors_per_service=1,
                     options={"group_prefix": p, "commit_interval_s": 0.3})
    want = sorted(a.identity() for a in expected.alerts)
    dep.start()
    try:
        produce_inputs(kafka_bus, cfg, events, end=True)
        deadline = time.monotonic() + 120
        got: list = []
        while time.monotonic() < deadline:
            got = read_alerts(kafka_bus, cfg)
            if {a.identity() for a in got} >= set(want):
                time.sleep(1.0)  # stragglers (duplicates) would show up now
                got = read_alerts(kafka_bus, cfg)
                break
            time.sleep(0.5)
        assert sorted(a.identity() for a in got) == want
        assert read_dead_letters(kafka_bus, cfg) == []
        # the model's own output topic carries the Listing 1 matches
        own = [cfg.codec.decode(r.value)[1] for r in read_topic(kafka_bus, out_topic, 2)]
        assert sorted(r["fields"]["id"] for r in own) == list(range(1, 17))
    finally:
        stats = dep.stop()
    assert all(s["error"] is None for ss in stats.values() for s in ss)
