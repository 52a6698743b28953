"""Dead letters on the real broker (issue 11): they keep the original key and
headers (0 of 2,761 did), and a record too large to dead-letter whole (1 MB:
the scheduler crashed and restarted 35 times) is cut with a marker while the
pipeline goes on, every other alert intact and nothing repeated."""

from __future__ import annotations

import random

import pytest
from service_plans import pos, two_context_plan

from caesar.bus.records import OutRecord
from caesar.codecs import make_codec
from caesar.services.common.config import ServiceConfig
from caesar.services.common.wire import TRUNCATED_HEADER
from caesar.services.embedded.bus_pipeline import (
    BusPipeline,
    produce_end,
    produce_inputs,
    read_alerts,
    read_dead_letters,
)
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.reference import ReferenceEngine
from caesar.settings import TopicSettings

pytestmark = pytest.mark.integration


def test_dead_letters_keep_key_and_headers_and_a_1mb_record_is_cut_not_a_crash_loop(
        kafka_bus, unique_name):
    rnd = random.Random(4)
    events = [pos(t // 3, rnd.randrange(40), rnd.randrange(3), float(rnd.randrange(100)))
              for t in range(300)]
    plan = two_context_plan(topic=unique_name("pos"))
    p = unique_name("dl")
    topics = TopicSettings.under(p, partitions=2, changelog_prefix=f"{p}.cl.")
    cfg = ServiceConfig(plan, topics, make_codec(), (0, 1), "t", engine_factory=ReferenceEngine)
    expected = EmbeddedPipeline(plan, engine_factory=ReferenceEngine).run_values(events)
    pipe = BusPipeline(cfg, kafka_bus, commit_interval_s=0.1, poll_timeout_s=0.05)
    try:
        topic = cfg.input_topics()[0]
        produce_inputs(kafka_bus, cfg, events[:150])
        big = b"\xc3\x01" + rnd.randbytes(1_000_000 - 200)  # as large as the producer allows
        producer = kafka_bus.producer()
        producer.produce([
            OutRecord(topic, b"\xc3\x01garbage", b"key-1", partition=0,
                      headers=(("trace", b"t-1"), ("tenant", b"acme"))),
            OutRecord(topic, big, b"key-big", partition=1, headers=(("trace", b"t-2"),))])
        producer.flush()
        produce_inputs(kafka_bus, cfg, events[150:])
        produce_end(kafka_bus, cfg)
        pipe.run_until_quiet(quiet_s=1.5, timeout_s=180)
        got = read_alerts(kafka_bus, cfg)
        assert sorted(a.identity() for a in got) == sorted(a.identity() for a in expected.alerts)
        dead = sorted(read_dead_letters(kafka_bus, cfg), key=lambda d: d["partition"])
        assert [(d["reason"], d["key"]) for d in dead] == [("UNDECODABLE", b"key-1"),
                                                           ("UNDECODABLE", b"key-big")]
        small, cut = dead
        assert small["headers"] == {"trace": b"t-1", "tenant": b"acme"}
        assert small["value"] == b"\xc3\x01garbage"
        assert cut["headers"]["trace"] == b"t-2"
        assert cut["headers"][TRUNCATED_HEADER] == f"value {len(big)} bytes".encode()
        assert cut["value"] == big[:len(cut["value"])] and len(cut["value"]) < len(big)
        assert "truncated to fit a dead letter" in cut["detail"]
        scheduler = pipe.loops["scheduler"].stats
        assert scheduler.recoveries == 0 and scheduler.aborts == 0, "no crash or rewind"
    finally:
        pipe.close()
