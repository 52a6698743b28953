"""Matcher processor on recorded routed transactions (no bus)."""

from service_plans import SCHEMAS, pos, two_context_plan

from caesar.plans.execution import Stage
from caesar.plans.expr import Attr
from caesar.plans.pattern import Output, OutputField, PatternComponent, PatternPlan
from caesar.services.common.messages import (
    Progress,
    RoutedTransaction,
    Transaction,
    partition_id,
)
from caesar.services.matcher.processor import MatcherProcessor
from caesar.services.matcher.reference import ReferenceEngine

P7 = partition_id("7")


def routed(ts, vid, active, discard=()):
    return RoutedTransaction(Transaction(P7, "7", ts, (pos(ts, vid, 7, 50.0),)), active, discard)


def seq_plan():
    seq = PatternPlan("pair", (PatternComponent("a", ("Pos",)), PatternComponent("b", ("Pos",))),
                      output=Output("Pair", (OutputField("first", Attr("a", "vid")),
                                             OutputField("second", Attr("b", "vid")))),
                      schemas=SCHEMAS, within=100)
    plan = two_context_plan()
    return plan.__class__(**{**plan.__dict__,
                             "matcher_stages": (Stage(seq, ("congestion",), output_topic="pairs"),)})


def test_discard_drops_partial_matches_of_an_ended_window():
    m = MatcherProcessor(seq_plan(), ReferenceEngine)
    out = m.process([routed(1, 1, ("pair",)), routed(2, 2, ("pair",)), Progress(3, "router")])
    assert [(a.fields["first"], a.fields["second"]) for a in out.alerts] == [(1, 2)]
    assert out.progress == Progress(3, "matcher")
    # a new window starts: what the old one began must not complete now
    out = m.process([routed(7, 3, ("pair",), discard=("pair",))])
    assert out.alerts == []
    out = m.process([routed(8, 4, ("pair",))])
    assert [(a.fields["first"], a.fields["second"], a.key, a.topic) for a in out.alerts] == [
        (3, 4, "7", "pairs")]


def test_stage_outputs_feed_later_stages_in_the_same_step():
    m = MatcherProcessor(two_context_plan(), ReferenceEngine)
    txn = Transaction(P7, "7", 3, (pos(3, 1, 7, 10.0), pos(3, 2, 7, 30.0)))
    out = m.process([RoutedTransaction(txn, ("slow_toll", "toll"))])
    assert sorted((a.event_type, a.fields["vid"]) for a in out.alerts) == [
        ("SlowToll", 1), ("Toll", 1), ("Toll", 2)]
    # a stage that is not active receives nothing, even when fed by an active one
    out = m.process([RoutedTransaction(Transaction(P7, "7", 4, (pos(4, 3, 7, 10.0),)), ("toll",))])
    assert [(a.event_type, a.fields["vid"]) for a in out.alerts] == [("Toll", 3)]


def test_snapshot_restore_keeps_partial_matches():
    a = MatcherProcessor(seq_plan(), ReferenceEngine)
    a.process([routed(1, 1, ("pair",))])
    b = MatcherProcessor(seq_plan(), ReferenceEngine)
    b.graph.restore(a.graph.snapshot([P7]))
    out = b.process([routed(2, 2, ("pair",))])
    assert [(x.fields["first"], x.fields["second"]) for x in out.alerts] == [(1, 2)]
