"""Deriver and router on recorded transactions (no bus)."""

from service_plans import pos, two_context_plan

from caesar.plans.execution import ContextDef, Stage
from caesar.plans.pattern import PatternComponent, PatternPlan
from caesar.services.common.messages import (
    ContextChange,
    Discard,
    Progress,
    RoutedTransaction,
    Transaction,
    partition_id,
)
from caesar.services.deriver.processor import DeriverProcessor
from caesar.services.matcher.reference import ReferenceEngine
from caesar.services.router.processor import RouterProcessor

P7 = partition_id("7")


def txn(ts, *events, key="7"):
    return Transaction(partition_id(key), key, ts, tuple(events))


def test_deriver_keeps_bit_vector_with_half_open_windows():
    d = DeriverProcessor(two_context_plan(), ReferenceEngine)
    assert d.vector(P7) == 0b01  # default context "clear"
    out = d.process([txn(1, pos(1, 1, 7, 90.0)), txn(2, pos(2, 2, 7, 30.0)),
                     txn(3, pos(3, 3, 7, 20.0)), txn(4, pos(4, 4, 7, 65.0)), Progress(5)])
    assert [(c.ts, c.vector, c.contexts) for c in out.changes] == [
        (2, 0b10, ("congestion",)), (4, 0b01, ("clear",))]
    assert out.progress == Progress(5, "deriver")
    # the initiating query runs only in "clear": a slow car while congested changes nothing
    assert d.process([txn(6, pos(6, 5, 7, 10.0))]).changes == [
        ContextChange(P7, "7", 6, 0b10, ("congestion",))]


def test_deriver_aggregate_feeds_transition_when_window_closes():
    d = DeriverProcessor(two_context_plan(with_aggregate=True), ReferenceEngine)
    out = d.process([txn(1, pos(1, 1, 7, 30.0)), txn(5, pos(5, 2, 7, 35.0)),
                     txn(12, pos(12, 3, 7, 50.0))])
    # window [0, 10) closes before ts 12: its average 32.5 starts congestion at
    # its last tick 9 (emit_ts window_last), so it holds for ts 10 on
    assert [(c.ts, c.contexts) for c in out.changes] == [(9, ("congestion",))]
    # more transactions at 12 may follow: D stays 12 until the scheduler says more
    assert out.progress == Progress(12, "deriver")
    assert d.process([Progress(13)]).progress == Progress(13, "deriver")


def test_router_waits_for_deriver_progress_and_routes_by_context():
    r = RouterProcessor(two_context_plan())
    t3, t5 = txn(3, pos(3, 1, 7, 10.0)), txn(5, pos(5, 2, 7, 10.0))
    out = r.process([t3, t5, Progress(6)])
    assert out.items() == []  # nothing known about derivation yet
    out = r.process([ContextChange(P7, "7", 2, 0b10, ("congestion",)), Progress(3, "deriver")])
    # the default context "clear" ended at 2: "fast" drops its partial matches
    assert out.items() == [RoutedTransaction(t3, ("slow_toll", "toll"), ("fast",)),
                          Progress(3, "router")]
    out = r.process([ContextChange(P7, "7", 4, 0b01, ("clear",)), Progress(6, "deriver")])
    # the congestion window (2, 4] ended before 5: its plans drop their partial matches
    assert out.items() == [RoutedTransaction(t5, ("fast",), ("toll", "slow_toll")),
                          Progress(6, "router")]
    assert r.skipped_events == {"fast": 1, "toll": 1, "slow_toll": 1}


def test_router_skips_transactions_no_active_plan_wants():
    plan = two_context_plan()
    only_congestion = tuple(s for s in plan.matcher_stages if "congestion" in s.contexts)
    plan = plan.__class__(**{**plan.__dict__, "matcher_stages": only_congestion})
    r = RouterProcessor(plan)
    out = r.process([ContextChange(P7, "7", 1, 0b10, ("congestion",)),
                     ContextChange(P7, "7", 2, 0b01, ("clear",)),
                     txn(3, pos(3, 1, 7, 10.0)), Progress(4), Progress(4, "deriver")])
    assert out.items() == [Discard(P7, 3, ("toll", "slow_toll")), Progress(4, "router")]
    assert r.skipped_transactions == 1


def test_grouped_windows_keep_partial_matches_of_their_original_context():
    plan = two_context_plan()
    q = PatternPlan("q", (PatternComponent("p", ("Pos",)),))
    plan = plan.__class__(**{
        **plan.__dict__,
        "contexts": (ContextDef("clear", 0, True), ContextDef("a", 1, False),
                     ContextDef("b", 2, False)),
        "matcher_stages": (Stage(q, ("g1", "g2")),),
        "context_groups": {"a": ("g1", "g2"), "b": ("g2", "g3")}})
    r = RouterProcessor(plan)
    out = r.process([ContextChange(P7, "7", 1, 0b010, ("a",)),
                     ContextChange(P7, "7", 2, 0b110, ("a", "b")),
                     txn(3, pos(3, 1, 7, 1.0)),
                     ContextChange(P7, "7", 3, 0b010, ("a",)),   # b ends, a goes on
                     txn(4, pos(4, 1, 7, 1.0)),
                     ContextChange(P7, "7", 4, 0b100, ("b",)),   # a ends
                     txn(5, pos(5, 1, 7, 1.0)),
                     Progress(6), Progress(6, "deriver")])
    routed = [(i.txn.ts, i.active, i.discard) for i in out.items()
              if isinstance(i, RoutedTransaction)]
    assert routed == [(3, ("q",), ()), (4, ("q",), ())]
    assert out.items()[2] == Discard(P7, 5, ("q",))
