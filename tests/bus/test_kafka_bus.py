"""KafkaBus on the real broker, and InMemoryBus parity with it."""

from __future__ import annotations

import time

import pytest

from caesar.bus import (
    InMemoryBus,
    OutRecord,
    TopicPartition,
    TopicSpec,
    partition_for_key,
    topic_specs,
)
from caesar.settings import TopicSettings

pytestmark = pytest.mark.integration


def drain(consumer, want, timeout_s=30.0):
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got += consumer.poll(1000, 0.5)
    return got


def test_produce_consume_commit_resume(kafka_bus, unique_name):
    topic = unique_name("io")
    assert kafka_bus.create_topics([TopicSpec(topic, 3)]) == [topic]
    assert kafka_bus.create_topics([TopicSpec(topic, 3)]) == []  # idempotent
    producer = kafka_bus.producer()
    producer.produce([OutRecord(topic, b"v%d" % i, key=b"k%d" % (i % 7),
                                headers=(("n", b"%d" % i),), timestamp_ms=1_000 + i)
                      for i in range(300)])
    producer.flush()
    group = unique_name("g")
    consumer = kafka_bus.consumer(group)
    consumer.subscribe([topic])
    first = drain(consumer, 300)
    assert len(first) == 300
    by_value = {r.value: r for r in first}
    assert by_value[b"v5"].header("n") == b"5" and by_value[b"v5"].timestamp_ms == 1_005
    # per-key order preserved
    for k in range(7):
        values = [int(r.value[1:]) for r in first if r.key == b"k%d" % k]
        assert values == sorted(values)
    consumer.commit()
    tps = [TopicPartition(topic, p) for p in range(3)]
    ends = kafka_bus.end_offsets(tps)
    assert consumer.committed(tps) == ends
    assert sum(ends.values()) == 300
    consumer.close()
    # a new member of the group sees only new records
    producer.produce([OutRecord(topic, b"after", key=b"k1")])
    producer.flush()
    again = kafka_bus.consumer(group)
    again.subscribe([topic])
    got = drain(again, 1)
    assert [r.value for r in got] == [b"after"]
    assert again.poll(100, 0.5) == []
    again.close()


def test_seek_and_explicit_commit(kafka_bus, unique_name):
    topic = unique_name("seek")
    kafka_bus.create_topics([TopicSpec(topic, 1)])
    producer = kafka_bus.producer()
    producer.produce([OutRecord(topic, b"%d" % i) for i in range(10)])
    producer.flush()
    tp = TopicPartition(topic, 0)
    c = kafka_bus.consumer(unique_name("g"))
    c.assign([tp], {tp: 4})
    got = drain(c, 6)
    assert [r.offset for r in got] == [4, 5, 6, 7, 8, 9]
    c.seek(tp, 1)
    assert [r.offset for r in drain(c, 2)][:2] == [1, 2]
    c.commit({tp: 7})
    assert c.committed([tp]) == {tp: 7}
    c.close()


def test_compacted_topic_creation_from_settings(kafka_bus, unique_name):
    prefix = unique_name("dep") + "."
    topics = TopicSettings(
        input_prefix=prefix + "in.", transactions=prefix + "tx", context_changes=prefix + "ctx",
        progress=prefix + "progress", alerts=prefix + "alerts", derived=prefix + "derived",
        dead_letters=prefix + "dlq", checkpoints=prefix + "ckpt", changelog_prefix=prefix + "cl.",
        plans=prefix + "plans", partitions=3, partitions_by_topic={prefix + "dlq": 1})
    specs = topic_specs(topics, event_types=["Pos"], stores=["contexts"])
    created = kafka_bus.create_topics(specs)
    assert sorted(created) == sorted(s.name for s in specs)
    listed = kafka_bus.list_topics()
    assert listed[prefix + "in.Pos"] == 3 and listed[prefix + "dlq"] == 1
    for name in (prefix + "ctx", prefix + "ckpt", prefix + "cl.contexts", prefix + "plans"):
        assert kafka_bus.topic_config(name)["cleanup.policy"] == "compact"
    assert kafka_bus.topic_config(prefix + "tx")["cleanup.policy"] == "delete"
    kafka_bus.delete_topics([s.name for s in specs])


def test_two_group_members_share_partitions(kafka_bus, unique_name):
    topic = unique_name("grp")
    kafka_bus.create_topics([TopicSpec(topic, 4)])
    group = unique_name("g")
    a, b = kafka_bus.consumer(group), kafka_bus.consumer(group)
    a.subscribe([topic])
    b.subscribe([topic])
    producer = kafka_bus.producer()
    producer.produce([OutRecord(topic, b"x", key=b"%d" % i) for i in range(200)])
    producer.flush()
    got_a, got_b = [], []
    deadline = time.monotonic() + 40
    while len(got_a) + len(got_b) < 200 and time.monotonic() < deadline:
        got_a += a.poll(500, 0.2)
        got_b += b.poll(500, 0.2)
    assert len(got_a) + len(got_b) == 200
    parts_a = {r.partition for r in got_a}
    parts_b = {r.partition for r in got_b}
    assert parts_a.isdisjoint(parts_b)
    a.close()
    b.close()


@pytest.mark.parametrize("partitions", [1, 3, 8])
def test_in_memory_partitioning_matches_kafka(kafka_bus, unique_name, partitions):
    """Keys land on the same partitions (and in the same order) on the embedded bus
    as on the real broker, so embedded mode behaves like Kafka."""
    topic = unique_name("parity")
    kafka_bus.create_topics([TopicSpec(topic, partitions)])
    keys = [f"car-{i}".encode() for i in range(150)] + [b"", "zoë".encode(), b"\x00\xff\x10"]
    records = [OutRecord(topic, b"%d" % i, key=k) for i, k in enumerate(keys)]
    producer = kafka_bus.producer()
    producer.produce(records)
    producer.flush()
    consumer = kafka_bus.consumer(unique_name("g"))
    consumer.subscribe([topic])
    from_kafka = drain(consumer, len(records))
    consumer.close()
    memory = InMemoryBus()
    memory.create_topics([TopicSpec(topic, partitions)])
    memory.producer().produce(records)
    from_memory = memory.records(topic)

    def layout(rs):
        return sorted((r.partition, r.offset, r.key, r.value) for r in rs)

    assert len(from_kafka) == len(records)
    assert layout(from_kafka) == layout(from_memory)
    assert all(r.partition == partition_for_key(r.key, partitions) for r in from_kafka)


def test_poll_returns_what_is_ready_without_waiting_out_the_timeout(kafka_bus, unique_name):
    """A poll must not hold ready records back until max_records or the timeout
    (librdkafka's consume() would): each hop of the pipeline would add the timeout."""
    topic = unique_name("ready")
    kafka_bus.create_topics([TopicSpec(topic, 1)])
    producer = kafka_bus.producer()
    producer.produce([OutRecord(topic, b"%d" % i) for i in range(5)])
    producer.flush()
    c = kafka_bus.consumer(unique_name("g"))
    tp = TopicPartition(topic, 0)
    c.assign([tp], {tp: 0})
    got = drain(c, 5)
    assert len(got) == 5
    producer.produce([OutRecord(topic, b"more")])
    producer.flush()
    started = time.monotonic()
    got = c.poll(10_000, 60.0)
    assert [r.value for r in got] == [b"more"]
    assert time.monotonic() - started < 30.0  # far below the 60 s timeout
    c.close()


def test_undeliverable_records_raise_bus_errors(kafka_bus, unique_name):
    from caesar.bus import BusError

    topic = unique_name("bad")
    kafka_bus.create_topics([TopicSpec(topic, 1)])
    producer = kafka_bus.producer()
    with pytest.raises(BusError, match=topic):
        producer.produce([OutRecord(topic, b"x", partition=7)])
        producer.flush(30)
