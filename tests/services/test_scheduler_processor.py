"""Scheduler: recorded input records -> expected transactions, progress and
dead letters (TopologyTestDriver style, no bus)."""

from service_plans import pos, two_context_plan

from caesar.services.common.messages import (
    InputRecord,
    Progress,
    Transaction,
    TxnBatch,
    partition_id,
)
from caesar.services.scheduler.processor import SchedulerProcessor


def records(values, topic="pos", partition=0):
    return [InputRecord(topic, partition, i, v) for i, v in enumerate(values)]


def expand(items):
    """Released batches as transactions, one at a time."""
    out = []
    for i in items:
        out += i.transactions() if isinstance(i, TxnBatch) else [i]
    return out


def summary(items):
    return [(i.ts, i.key, tuple(e["vid"] for e in i.events)) if isinstance(i, Transaction)
            else ("progress", i.watermark) for i in expand(items)]


def test_orders_by_time_and_groups_transactions_within_allowance():
    s = SchedulerProcessor(two_context_plan(), allowance=2)
    out = s.process(records([pos(5, 1, 7, 0.0), pos(4, 2, 8, 0.0), pos(5, 3, 7, 0.0),
                             pos(3, 4, 7, 0.0), pos(8, 5, 7, 0.0)]))
    # watermark = 8 - 2 = 6: everything below 6 is released in ts order.
    assert summary(out.transactions) == [(3, "7", (4,)), (4, "8", (2,)), (5, "7", (1, 3)),
                                         ("progress", 6)]
    assert out.dead_letters == []
    txn = expand(out.transactions)[0]
    assert txn.partition == partition_id("7")
    assert summary(s.flush().transactions) == [(8, "7", (5,)), ("progress", 2**62)]


def test_late_undecodable_and_schema_breaking_records_are_dead_lettered():
    s = SchedulerProcessor(two_context_plan(), allowance=1)
    s.process(records([pos(10, 1, 7, 0.0)]))
    bad = [InputRecord("pos", 0, 1, pos(5, 2, 7, 0.0)),                       # late
           InputRecord("pos", 0, 2, None, b"\x00garbage", "not avro"),         # undecodable
           InputRecord("pos", 0, 3, {"type": "Pos", "ts": 11, "vid": "x", "seg": 7}),
           InputRecord("pos", 0, 4, {"type": "Pos", "ts": "11", "vid": 1, "seg": 7}),
           InputRecord("other", 0, 5, {"ts": 11, "vid": 1}),                   # unknown type
           InputRecord("pos", 0, 6, pos(11, 3, 7, 1.0))]
    out = s.process(bad)
    assert [(d.reason, d.offset) for d in out.dead_letters] == [
        ("late", 1), ("undecodable", 2), ("schema", 3), ("schema", 4), ("schema", 5)]
    assert "below the watermark 9" in out.dead_letters[0].detail
    assert "Pos.vid: expected int" in out.dead_letters[2].detail
    assert out.dead_letters[1].raw == b"\x00garbage"
    # the stream goes on (ts 10 is released once the watermark passes it)
    assert summary(out.transactions) == [("progress", 10)]
    assert summary(s.flush().transactions) == [(10, "7", (1,)), (11, "7", (3,)),
                                               ("progress", 2**62)]


def test_watermark_is_the_minimum_over_source_partitions():
    s = SchedulerProcessor(two_context_plan(), allowance=0)
    s.register_source("pos", 1)
    out = s.process(records([pos(5, 1, 7, 0.0)], partition=0))
    assert out.transactions == []  # partition 1 has not spoken yet
    out = s.process(records([pos(3, 2, 8, 0.0)], partition=1))
    assert summary(out.transactions) == [("progress", 3)]
    out = s.process(records([pos(9, 3, 8, 0.0)], partition=1))
    assert summary(out.transactions) == [(3, "8", (2,)), ("progress", 5)]
    assert isinstance(out.transactions[-1], Progress)
