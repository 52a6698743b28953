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
        ("late", 1), ("undecodable", 2), ("schema", 3), ("schema", 4), ("unknown_type", 5)]
    assert "below the partition's watermark 9" in out.dead_letters[0].detail
    assert "Pos.vid: expected int" in out.dead_letters[2].detail
    assert out.dead_letters[1].raw == b"\x00garbage"
    # the stream goes on (ts 10 is released once the watermark passes it)
    assert summary(out.transactions) == [("progress", 10)]
    assert summary(s.flush().transactions) == [(10, "7", (1,)), (11, "7", (3,)),
                                               ("progress", 2**62)]


def test_lateness_is_decided_record_by_record_not_by_batch():
    """The issue's batch-size bug: ts 9 then ts 3 (allowance 2) makes ts 3 late
    whether the two records come in one batch or two."""
    values = [pos(9, 1, 7, 0.0), pos(3, 2, 7, 0.0), pos(8, 3, 7, 0.0), pos(6, 4, 8, 0.0)]
    whole = SchedulerProcessor(two_context_plan(), allowance=2)
    one = whole.process(records(values))
    single = SchedulerProcessor(two_context_plan(), allowance=2)
    many = [single.process([r]) for r in records(values)]
    assert [d.offset for d in one.dead_letters] == [1, 3]
    assert [d.offset for m in many for d in m.dead_letters] == [1, 3]
    released = [t for m in many + [single.flush()] for t in m.transactions
                if isinstance(t, Transaction)]
    assert summary(released) == summary(
        [t for t in one.transactions + whole.flush().transactions if isinstance(t, Transaction)])


def test_input_watermark_releases_and_makes_older_events_late():
    s = SchedulerProcessor(two_context_plan(), allowance=5)
    out = s.process(records([pos(10, 1, 7, 0.0)]))
    assert out.transactions == [Progress(5, "scheduler")]
    out = s.process([InputRecord("pos", 0, 1, None, watermark=11)])
    assert summary(out.transactions) == [(10, "7", (1,)), ("progress", 11)]
    out = s.process(records([pos(10, 2, 7, 0.0)]))
    assert [d.reason for d in out.dead_letters] == ["late"]


def test_a_far_future_event_is_dead_lettered_instead_of_moving_the_watermark():
    s = SchedulerProcessor(two_context_plan(), allowance=0, max_ahead=100, ahead_confirm=3)
    values = [pos(1, 1, 7, 0.0), pos(10**12, 2, 7, 0.0), pos(2, 3, 7, 0.0), pos(3, 4, 7, 0.0)]
    out = s.process(records(values))
    assert [(d.reason, d.offset) for d in out.dead_letters] == [("ahead", 1)]
    assert "more than 100 ahead" in out.dead_letters[0].detail
    assert summary(out.transactions) == [(1, "7", (1,)), (2, "7", (3,)), ("progress", 3)]


def test_a_run_of_far_ahead_events_is_a_real_jump_and_is_accepted():
    s = SchedulerProcessor(two_context_plan(), allowance=0, max_ahead=100, ahead_confirm=3)
    values = [pos(1, 1, 7, 0.0), pos(5000, 2, 7, 0.0), pos(5001, 3, 7, 0.0), pos(5002, 4, 7, 0.0),
              pos(5003, 5, 7, 0.0)]
    out = s.process(records(values))
    assert out.dead_letters == []
    assert summary(out.transactions)[-1] == ("progress", 5003)


def test_values_are_checked_against_the_model_and_the_type():
    from dataclasses import replace

    from caesar.plans.execution import FieldCheck

    plan = two_context_plan()
    pos_type = replace(plan.event_types[0], checks={"spd": FieldCheck(True, 0, 100),
                                                    "vid": FieldCheck(not_null=True)})
    s = SchedulerProcessor(replace(plan, event_types=(pos_type,)))
    values = [pos(1, 1, 7, 140.0), {"type": "Pos", "ts": 1, "seg": 7, "spd": 1.0},
              pos(1, 2**64, 7, 1.0), {"type": "Toll", "ts": 1, "vid": 1, "seg": 7},
              {"type": "Pos", "ts": 2**70, "vid": 1, "seg": 7}, pos(1, 3, 7, 50.0)]
    out = s.process(records(values))
    assert [(d.reason, d.offset) for d in out.dead_letters] == [
        ("schema", 0), ("schema", 1), ("schema", 2), ("unknown_type", 3), ("schema", 4)]
    details = [d.detail for d in out.dead_letters]
    assert "Pos.spd: 140.0 is above 100" in details[0]
    assert "Pos.vid: is null (declared NOT NULL)" in details[1]
    assert "does not fit a 64-bit int" in details[2]
    assert "Toll" in details[3]
    assert summary(s.flush().transactions) == [(1, "7", (3,)), ("progress", 2**62)]


def test_state_survives_the_state_format_mid_stream():
    from caesar.services.store.state_format import pack, unpack

    values = [pos(t // 2, t, t % 3, float(t)) for t in range(40)] + [pos(99, 0, 1, 0.0)]
    straight = SchedulerProcessor(two_context_plan(), allowance=3, max_ahead=20, ahead_confirm=5)
    want = straight.process(records(values)).transactions + straight.flush().transactions
    first = SchedulerProcessor(two_context_plan(), allowance=3, max_ahead=20, ahead_confirm=5)
    got = first.process(records(values[:25])).transactions
    second = SchedulerProcessor(two_context_plan(), allowance=3, max_ahead=20, ahead_confirm=5)
    second.restore(unpack(pack(first.snapshot())))
    got += second.process(records(values)[25:]).transactions + second.flush().transactions
    flat = [t for t in got if isinstance(t, Transaction)]
    assert summary(flat) == summary([t for t in want if isinstance(t, Transaction)])


def test_each_input_topic_has_its_own_watermark_and_the_slowest_holds_the_release():
    """Two input topics in one Kafka partition: one topic's records all
    arriving before the other's makes nothing late (lateness is judged against
    the record's own topic), and nothing is released before both have spoken."""
    from dataclasses import replace

    plan = two_context_plan()
    pos_type = plan.event_types[0]
    plan = replace(plan, event_types=(replace(pos_type, topic="a"),
                                      replace(pos_type, name="Pos2", topic="b")))

    def recs(topic, stamps, first=0):
        return [InputRecord(topic, 0, first + i, {k: v for k, v in pos(t, i, 7, 1.0).items()
                                                  if k != "type"})
                for i, t in enumerate(stamps)]

    s = SchedulerProcessor(plan, allowance=0)
    out = s.process(recs("a", [1, 2, 3, 9]))
    assert out.dead_letters == [] and not [t for t in out.transactions if not isinstance(
        t, Progress)], "topic b has not spoken: nothing is released"
    out = s.process(recs("b", [1, 4, 2], first=10))  # 2 after 4: late within b
    assert [(d.reason, d.offset) for d in out.dead_letters] == [("late", 12)]
    released = sorted({int(t) for b in out.transactions if not isinstance(b, Progress)
                       for t in b.timestamps()})
    assert released == [1, 2, 3]  # below min(9, 4)
