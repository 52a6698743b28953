from __future__ import annotations

import threading
import time

import pytest

from caesar.bus import (
    BusError,
    InMemoryBus,
    OutRecord,
    TopicPartition,
    TopicSpec,
    UnknownTopicError,
    partition_for_key,
)


def drain(consumer, want, timeout_s=2.0):
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got += consumer.poll(100, 0.05)
    return got


@pytest.fixture
def bus():
    b = InMemoryBus()
    b.create_topics([TopicSpec("in", 4), TopicSpec("ctx", 2, config={"cleanup.policy": "compact"})])
    return b


def test_keys_partition_like_kafka_and_offsets_are_dense(bus):
    p = bus.producer()
    p.produce([OutRecord("in", b"v%d" % i, key=b"car-%d" % (i % 10)) for i in range(100)])
    p.flush()
    records = bus.records("in")
    assert len(records) == 100
    for r in records:
        assert r.partition == partition_for_key(r.key, 4)
    for part in range(4):
        offs = [r.offset for r in records if r.partition == part]
        assert offs == list(range(len(offs)))
    assert sum(bus.end_offsets([TopicPartition("in", i) for i in range(4)]).values()) == 100


def test_per_key_order_and_explicit_partition(bus):
    p = bus.producer()
    p.produce([OutRecord("in", b"%d" % i, key=b"k") for i in range(20)])
    p.produce([OutRecord("in", b"x", partition=3)])
    recs = [r for r in bus.records("in") if r.key == b"k"]
    assert [int(r.value) for r in recs] == list(range(20))
    assert [r.partition for r in bus.records("in") if r.value == b"x"] == [3]
    with pytest.raises(UnknownTopicError):
        p.produce([OutRecord("in", b"x", partition=9)])


def test_group_members_split_partitions_and_rebalance(bus):
    a = bus.consumer("g")
    a.subscribe(["in"])
    assert sorted(tp.partition for tp in a.assignment()) == [0, 1, 2, 3]
    b = bus.consumer("g")
    b.subscribe(["in"])
    pa = {tp.partition for tp in a.assignment()}
    pb = {tp.partition for tp in b.assignment()}
    assert pa.isdisjoint(pb) and pa | pb == {0, 1, 2, 3} and len(pa) == 2
    b.close()
    assert len(a.assignment()) == 4


def test_commit_and_resume_from_committed(bus):
    p = bus.producer()
    p.produce([OutRecord("in", b"%d" % i, partition=0) for i in range(10)])
    c = bus.consumer("g")
    c.subscribe(["in"])
    first = c.poll(4, 0.1)
    assert [r.offset for r in first] == [0, 1, 2, 3]
    c.commit()
    assert c.committed([TopicPartition("in", 0)]) == {TopicPartition("in", 0): 4}
    c.poll(100, 0.1)  # consumed but not committed
    c.close()
    again = bus.consumer("g")
    again.subscribe(["in"])
    rest = drain(again, 6)
    assert [r.offset for r in rest] == [4, 5, 6, 7, 8, 9]


def test_explicit_commit_seek_and_manual_assign(bus):
    p = bus.producer()
    p.produce([OutRecord("in", b"%d" % i, partition=1) for i in range(5)])
    c = bus.consumer("m")
    tp = TopicPartition("in", 1)
    c.assign([tp], {tp: 2})
    assert [r.offset for r in c.poll(10, 0.1)] == [2, 3, 4]
    c.seek(tp, 0)
    assert [r.offset for r in c.poll(2, 0.1)] == [0, 1]
    c.commit({tp: 5})
    assert c.committed([tp])[tp] == 5
    with pytest.raises(BusError, match="not assigned"):
        c.seek(TopicPartition("in", 0), 0)


def test_latest_reset_skips_existing(bus):
    bus.producer().produce([OutRecord("in", b"old", partition=0)])
    c = bus.consumer("late", auto_offset_reset="latest")
    c.subscribe(["in"])
    assert c.poll(10, 0.05) == []
    bus.producer().produce([OutRecord("in", b"new", partition=0)])
    assert [r.value for r in c.poll(10, 0.5)] == [b"new"]


def test_poll_waits_for_data_from_another_thread(bus):
    c = bus.consumer("w")
    c.subscribe(["in"])
    timer = threading.Timer(0.1, lambda: bus.producer().produce([OutRecord("in", b"late", key=b"a")]))
    timer.start()
    started = time.monotonic()
    got = c.poll(10, 5.0)
    assert [r.value for r in got] == [b"late"]
    assert time.monotonic() - started < 4.0
    timer.join()


def test_max_records_and_fair_rotation(bus):
    p = bus.producer()
    for part in range(4):
        p.produce([OutRecord("in", b"x", partition=part) for _ in range(50)])
    c = bus.consumer("f")
    c.subscribe(["in"])
    batch = c.poll(30, 0.1)
    assert len(batch) == 30
    assert len(drain(c, 170)) == 170


def test_auto_create_on_produce_and_admin(bus):
    bus.producer().produce([OutRecord("fresh", b"v", key=b"k")])
    assert bus.list_topics()["fresh"] == 1
    assert bus.create_topics([TopicSpec("fresh", 3), TopicSpec("n", 2)]) == ["n"]
    assert bus.topic_config("ctx") == {"cleanup.policy": "compact"}
    bus.delete_topics(["n"])
    assert "n" not in bus.list_topics()
    with pytest.raises(UnknownTopicError):
        bus.topic_config("n")


def test_headers_and_timestamps_kept(bus):
    bus.producer().produce([OutRecord("in", b"v", key=b"k", headers=(("h", b"1"),), timestamp_ms=123)])
    r = bus.records("in")[0]
    assert r.header("h") == b"1" and r.timestamp_ms == 123 and r.header("x") is None


# ------------------------------------------------------------ transactions
# The in-memory bus behaves as Kafka's transactions do (what the services'
# exactly-once loop relies on in embedded mode and in the unit tests).

def _txn_setup(bus):
    consumer = bus.consumer("svc")
    tp = TopicPartition("in", 0)
    bus.producer().produce([OutRecord("in", b"x%d" % i, partition=0) for i in range(3)])
    consumer.assign([tp], {tp: 0})
    return consumer, tp


def test_committed_transaction_shows_outputs_and_offsets_at_once(bus):
    consumer, tp = _txn_setup(bus)
    p = bus.producer(transactional_id="svc-0")
    reader = bus.consumer("reader")
    reader.assign([TopicPartition("ctx", 0)], {TopicPartition("ctx", 0): 0})
    p.begin_transaction()
    p.produce([OutRecord("ctx", b"out1", b"k", partition=0), OutRecord("ctx", b"out2", b"k",
                                                                        partition=0)])
    p.send_offsets_to_transaction({tp: 3}, consumer)
    assert reader.poll(10, 0.05) == []  # read_committed: nothing before the commit
    assert consumer.committed([tp])[tp] is None
    assert bus.end_offsets([TopicPartition("ctx", 0)])[TopicPartition("ctx", 0)] == 0
    p.commit_transaction()
    assert [r.value for r in drain(reader, 2)] == [b"out1", b"out2"]
    assert consumer.committed([tp])[tp] == 3


def test_aborted_transaction_is_never_read_and_its_offsets_not_committed(bus):
    consumer, tp = _txn_setup(bus)
    p = bus.producer(transactional_id="svc-0")
    p.begin_transaction()
    p.produce([OutRecord("ctx", b"lost", partition=0)])
    p.send_offsets_to_transaction({tp: 3}, consumer)
    p.abort_transaction()
    p.begin_transaction()
    p.produce([OutRecord("ctx", b"kept", partition=0)])
    p.commit_transaction()
    reader = bus.consumer("reader")
    reader.assign([TopicPartition("ctx", 0)], {TopicPartition("ctx", 0): 0})
    assert [r.value for r in drain(reader, 1)] == [b"kept"]
    assert reader.poll(10, 0.05) == []
    assert consumer.committed([tp])[tp] is None
    uncommitted = bus.consumer("dirty", read_committed=False)
    uncommitted.assign([TopicPartition("ctx", 0)], {TopicPartition("ctx", 0): 0})
    assert [r.value for r in drain(uncommitted, 2)] == [b"lost", b"kept"]


def test_a_new_producer_fences_the_zombie_and_aborts_its_transaction(bus):
    from caesar.bus.errors import ProducerFencedError

    consumer, tp = _txn_setup(bus)
    zombie = bus.producer(transactional_id="svc-0")
    zombie.begin_transaction()
    zombie.produce([OutRecord("ctx", b"zombie", partition=0)])
    successor = bus.producer(transactional_id="svc-0")  # the restarted actor
    with pytest.raises(ProducerFencedError):
        zombie.produce([OutRecord("ctx", b"late zombie", partition=0)])
    with pytest.raises(ProducerFencedError):
        zombie.commit_transaction()
    successor.begin_transaction()
    successor.produce([OutRecord("ctx", b"successor", partition=0)])
    successor.send_offsets_to_transaction({tp: 1}, consumer)
    successor.commit_transaction()
    reader = bus.consumer("reader")
    reader.assign([TopicPartition("ctx", 0)], {TopicPartition("ctx", 0): 0})
    assert [r.value for r in drain(reader, 1)] == [b"successor"]
    assert consumer.committed([tp])[tp] == 1


def test_an_open_transaction_holds_back_later_committed_records(bus):
    """Kafka's last stable offset: read_committed readers stop at the first
    open transaction, so they see records in offset order."""
    a = bus.producer(transactional_id="a")
    b = bus.producer(transactional_id="b")
    a.begin_transaction()
    a.produce([OutRecord("ctx", b"a1", partition=0)])
    b.begin_transaction()
    b.produce([OutRecord("ctx", b"b1", partition=0)])
    b.commit_transaction()
    tp = TopicPartition("ctx", 0)
    reader = bus.consumer("reader")
    reader.assign([tp], {tp: 0})
    assert reader.poll(10, 0.05) == []
    assert bus.end_offsets([tp])[tp] == 0
    a.commit_transaction()
    assert [r.value for r in drain(reader, 2)] == [b"a1", b"b1"]
