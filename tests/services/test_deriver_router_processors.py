"""Deriver and router on recorded transactions (no bus)."""

from hypothesis import given, settings
from hypothesis import strategies as st
from service_plans import pos, two_context_plan

from caesar.plans.execution import ContextDef, Stage
from caesar.plans.pattern import PatternComponent, PatternPlan
from caesar.services.common.messages import (
    ContextChange,
    Discard,
    Progress,
    RoutedBatch,
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


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 12), st.sampled_from(["1", "2", "3"]),
                          st.floats(0, 100, allow_nan=False)), max_size=25),
       st.lists(st.tuples(st.integers(0, 12), st.sampled_from(["1", "2", "3"]),
                          st.sampled_from([0b01, 0b10])), max_size=8),
       st.booleans())
def test_router_routes_a_whole_batch_as_it_routes_each_timestamp(
        events: list[tuple[int, str, float]], changes: list[tuple[int, str, int]],
        skips: bool) -> None:
    """The router finds a batch's transactions on its whole columns: the
    same routed transactions, active sets and discards, in the same order,
    as when the deriver's progress lets one timestamp through at a time."""
    names = {0b01: ("clear",), 0b10: ("congestion",)}
    txns = [txn(ts, pos(ts, i, int(k), spd), key=k)
            for i, (ts, k, spd) in enumerate(sorted(events, key=lambda e: e[0]))]
    ctx = [ContextChange(partition_id(k), k, ts, v, names[v])
           for ts, k, v in sorted(changes, key=lambda c: c[0])]

    def routed(r: RouterProcessor, steps: list[int]) -> tuple[list, list]:
        outs = [r.process([*txns, *ctx, Progress(20)])]
        outs += [r.process([Progress(d, "deriver")]) for d in steps]
        items = [i for o in outs for i in o.items() if not isinstance(i, Progress)]
        # the rows the matcher reads: only those of routed transactions
        rows = sorted((rec["_ts"], rec["_p"], rec["vid"]) for o in outs for b in o.routed
                      if isinstance(b, RoutedBatch) for rec in b.txns.events.records())
        return items, rows

    plan = two_context_plan()
    if skips:  # no stage of "clear": its transactions are skipped
        plan = plan.__class__(**{**plan.__dict__, "matcher_stages": tuple(
            s for s in plan.matcher_stages if "congestion" in s.contexts)})
    whole = routed(RouterProcessor(plan), [20])
    each = routed(RouterProcessor(plan), list(range(1, 21)))
    assert whole == each
    assert whole[1] == sorted((i.txn.ts, i.txn.partition, e["vid"]) for i in whole[0]
                              if isinstance(i, RoutedTransaction) for e in i.txn.events)
