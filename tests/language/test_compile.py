"""Compiler behaviour: what phases, rules and physical planning produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from caesar.examples import model_path
from caesar.language import RULES, compile_model, compile_phases
from caesar.language.optimizer import optimize
from caesar.language.optimizer.context_window_grouping import UserWindow, listing1
from caesar.language.physical import physical_plan
from caesar.plans import expr as ir
from caesar.plans.aggregate import AggregatePlan
from caesar.plans.pattern import PatternPlan

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
MODELS = [HERE / "data" / "figure3.caesar", HERE / "data" / "overlap.caesar"] + [
    model_path(name)
    for name in ("linear_road", "hospital_hygiene", "aggressive_driving")]

BASE = """MODEL t
TIME UNIT MILLISECONDS
EVENT R(ts INT, vid INT, seg INT, spd INT) FROM TOPIC "r"
EVENT S(ts INT, vid INT, seg INT) FROM TOPIC "s"
"""


def _stages(plan):
    return {s.plan.plan_id: s for s in plan.deriver_stages + plan.matcher_stages}


def test_figure3_queries_compile_into_the_congestion_context() -> None:
    plan = compile_model(HERE / "data" / "figure3.caesar")
    stages = _stages(plan)
    assert stages["q1"].contexts == ("congestion",)
    assert stages["q2"].contexts == ("congestion",)
    assert stages["q2"].feeds == ("NewTravelingCar",)
    assert stages["q1"].output_topic == "figure3.TollNotification"
    (t,) = plan.transitions
    assert (t.action, t.context, t.stage.contexts) == ("INITIATE", "accident", ("congestion",))
    q2 = stages["q2"].plan
    assert isinstance(q2, PatternPlan)
    assert [c.negated for c in q2.components] == [True, False]
    assert q2.within == 31
    assert {c.name: c.bit for c in plan.contexts} == {"accident": 0, "clear": 1, "congestion": 2}


def test_push_down_narrows_a_producer_to_its_consumers_contexts() -> None:
    text = BASE + """
DERIVE Slow(r.vid AS car) PATTERN R r WHERE r.spd < 10
DEFAULT CONTEXT calm { SWITCH CONTEXT jam PATTERN S s }
CONTEXT jam {
  SWITCH CONTEXT calm PATTERN S s
  DERIVE Toll(w.car) PATTERN Slow w
}
"""
    compiled = compile_phases(text)
    optimized = _stages(compiled.execution)
    unoptimized = _stages(compiled.unoptimized_execution())
    assert unoptimized["q1"].contexts == ("calm", "jam")
    assert optimized["q1"].contexts == ("jam",)
    assert optimized["q4"].contexts == ("jam",)


@pytest.mark.parametrize("path", MODELS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_optimizer_keeps_every_predicate(path: Path) -> None:
    """Against the plan with its views merged (view merging changes what a
    reader reads; tests/language/test_view_merging.py checks it on streams)."""
    compiled = compile_phases(path)
    before = _stages(physical_plan(optimize(compiled.unoptimized, RULES[:1])))
    assert RULES[0][0] == "view_merging"
    after = _stages(compiled.execution)
    for qid, stage in after.items():
        plan = stage.plan
        old = before[qid].plan
        assert type(plan) is type(old)
        if isinstance(plan, PatternPlan):
            assert set(plan.where) == set(old.where)
            assert plan.components == old.components
            assert plan.output == old.output
        else:
            assert plan == old
        # Push-down never widens a stage's contexts; sharing widens it to the
        # contexts of the queries it computes.
        allowed = set(before[qid].contexts)
        for dropped, kept in compiled.execution.shared.items():
            if kept == qid:
                allowed |= set(before[dropped].contexts)
        assert set(stage.contexts) <= allowed


@pytest.mark.parametrize("path", MODELS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_conjuncts_read_at_most_one_negated_variable(path: Path) -> None:
    plan = compile_model(path)
    for stage in plan.matcher_stages + plan.deriver_stages + tuple(t.stage for t in
                                                                   plan.transitions):
        if isinstance(stage.plan, PatternPlan):
            negated = {c.var for c in stage.plan.negated}
            for conj in stage.plan.where:
                assert len(ir.variables(conj) & negated) <= 1


def test_kleene_filter_and_aggregates() -> None:
    text = BASE + """
DERIVE Crawl(a.vid, count(r) AS n, avg(r.spd) AS mean)
PATTERN SEQ(S a, R+ r FILTER(r.vid = a.vid AND r.spd < 5))
WHERE count(r) >= 3 AND max(r.spd) < 4 AND a.seg = 1
WITHIN 2 SECONDS
"""
    (stage,) = compile_model(text).matcher_stages
    plan = stage.plan
    assert isinstance(plan, PatternPlan)
    kleene = plan.components[1]
    assert kleene.kleene
    assert kleene.iteration_filter == ir.Binary(
        "AND", ir.Binary("=", ir.Attr("r", "vid"), ir.Attr("a", "vid")),
        ir.Binary("<", ir.Attr("r", "spd"), ir.Const(5)))
    assert ir.Binary(">=", ir.Agg("count", "r", None), ir.Const(3)) in plan.where
    assert ir.Binary("<", ir.Agg("max", "r", ir.Attr("r", "spd")), ir.Const(4)) in plan.where
    assert plan.within == 2000
    assert plan.output.fields[2].expr == ir.Agg("avg", "r", ir.Attr("r", "spd"))


def test_negated_predicates_are_separated() -> None:
    text = BASE + """
DERIVE Gap(a.vid) PATTERN SEQ(R a, NOT S x, R b)
WHERE [vid] AND x.seg = a.seg AND a.spd < b.spd
"""
    (stage,) = compile_model(text).matcher_stages
    assert stage.plan.equivalence == ("vid",)
    assert set(stage.plan.where) == {
        ir.Binary("=", ir.Attr("x", "seg"), ir.Attr("a", "seg")),
        ir.Binary("<", ir.Attr("a", "spd"), ir.Attr("b", "spd"))}


def test_aggregation_plan() -> None:
    text = BASE + """
DERIVE SegStats(seg, count(DISTINCT vid) AS cars, avg(spd) AS lav)
  FROM R r WHERE r.spd > 0 GROUP BY seg WINDOW SLIDING 5 SECONDS EVERY 1 SECONDS HAVING cars > 50
"""
    (stage,) = compile_model(text).matcher_stages
    plan = stage.plan
    assert isinstance(plan, AggregatePlan)
    assert (plan.size, plan.slide, plan.group_by) == (5000, 1000, ("seg",))
    assert [(a.name, a.func, a.arg) for a in plan.aggregates] == [
        ("cars", "count_distinct", ir.Attr(None, "vid")), ("lav", "avg", ir.Attr(None, "spd"))]
    assert plan.where == (ir.Binary(">", ir.Attr(None, "spd"), ir.Const(0)),)
    assert plan.having == (ir.Binary(">", ir.Attr(None, "cars"), ir.Const(50)),)
    assert stage.output_topic == "t.SegStats"


def test_listing1_on_figure7_windows() -> None:
    groups = listing1([UserWindow("c1", 0, 10, ("q1",)), UserWindow("c2", 5, 15, ("q1", "q2")),
                       UserWindow("c3", 20, 30, ("q3",))])
    got = {(g.start, g.end, g.contexts, g.queries) for g in groups}
    assert got == {(20, 30, ("c3",), ("q3",)), (0, 5, ("c1",), ("q1",)),
                   (5, 10, ("c1", "c2"), ("q1", "q2")), (10, 15, ("c2",), ("q1", "q2"))}


def test_grouping_and_sharing_of_overlapping_contexts() -> None:
    compiled = compile_phases(HERE / "data" / "overlap.caesar")
    opt = compiled.optimized
    assert opt.overlaps == (("busy", "storm"),)
    assert {g.gid for g in opt.groups} == {"calm", "busy", "busy+storm", "storm"}
    assert dict(opt.shared) == {"q7": "q5"}
    plan = compiled.execution
    stages = _stages(plan)
    assert "q7" not in stages
    assert stages["q5"].contexts == ("busy", "storm")
    assert plan.context_groups["busy"] == ("busy", "busy+storm")
    assert plan.groups["busy+storm"] == ("busy", "storm")
    # Without the sharing rule both copies run.
    assert "q7" in _stages(compiled.unoptimized_execution())


SWITCH_ONLY = BASE + """
DEFAULT CONTEXT clear { SWITCH CONTEXT congestion PATTERN R r WHERE r.spd < 40 }
CONTEXT congestion {
  SWITCH CONTEXT clear PATTERN R r WHERE r.spd >= 40
  SWITCH CONTEXT accident PATTERN S s
}
CONTEXT accident { SWITCH CONTEXT clear PATTERN R r WHERE r.spd > 0 }
"""


def test_switch_only_contexts_do_not_overlap() -> None:
    compiled = compile_phases(SWITCH_ONLY)
    assert compiled.optimized.overlaps == ()
    assert {g.gid for g in compiled.optimized.groups} == {"clear", "congestion", "accident"}


def test_linear_road_contexts_switch_per_minute() -> None:
    """The validator-faithful model (SPEC.md) switches each segment's context
    once per minute (clear, congestion or accident, keyed by the segment):
    no INITIATE, so the optimizer sees no overlapping contexts."""
    compiled = compile_phases(model_path("linear_road"))
    assert compiled.optimized.overlaps == ()
    plan = compiled.execution
    assert [c.name for c in plan.contexts if c.keyed] == ["accident"]
    keyed = sorted((t.action, t.context, t.key_fields) for t in plan.transitions
                   if t.key_fields)
    assert keyed == [("SWITCH", c, ("key1",)) for c in ("accident", "clear", "congestion")]


def test_model_without_contexts_has_an_implicit_default() -> None:
    plan = compile_model(BASE + "DERIVE A(r.vid) PATTERN R r\n")
    assert [(c.name, c.default) for c in plan.contexts] == [("default", True)]
    assert plan.matcher_stages[0].contexts == ("default",)


def test_time_units_convert_to_ticks() -> None:
    text = BASE.replace("MILLISECONDS", "MINUTES") + \
        "DERIVE A(r.vid) PATTERN SEQ(R r, S s) WITHIN 2 HOURS\n"
    assert compile_model(text).matcher_stages[0].plan.within == 120


def test_declared_output_topic() -> None:
    text = BASE + """EVENT Toll(vid INT, toll INT) TO TOPIC "tolls"
DERIVE Toll(r.vid, 0 AS toll) PATTERN R r
"""
    (stage,) = compile_model(text).matcher_stages
    assert stage.output_topic == "tolls"


def test_linear_road_outputs_go_to_the_spec_topics() -> None:
    plan = compile_model(model_path("linear_road"))
    topics = {s.plan.output.event_type: s.output_topic for s in plan.matcher_stages
              if s.output_topic is not None}
    assert topics == {"TollNotification": "lr-tolls", "TollCharge": "lr-toll-charges",
                      "AccidentAlert": "lr-accident-alerts"}
    inputs = {t.name: t.topic for t in plan.event_types if t.topic}
    assert inputs == {"PositionReport": "lr-position-reports"}
    assert plan.partition_by == ("xway", "dir", "pseg")


def test_push_down_drops_a_producer_that_never_meets_its_consumer() -> None:
    text = BASE + """
DEFAULT CONTEXT a {
  DERIVE X(r.vid) PATTERN R r
  SWITCH CONTEXT b PATTERN S s
}
CONTEXT b {
  DERIVE X(r.vid) PATTERN R r WHERE r.spd > 2
  DERIVE Y(x.vid) PATTERN X x
  SWITCH CONTEXT a PATTERN S s
}
"""
    compiled = compile_phases(text)
    assert set(_stages(compiled.unoptimized_execution())) == {"q1", "q3", "q4"}
    optimized = _stages(compiled.execution)
    assert set(optimized) == {"q3", "q4"}
    assert all(s.contexts == ("b",) for s in optimized.values())


def test_a_model_from_text_without_a_model_line_gets_a_topic_safe_name() -> None:
    # The name prefixes Kafka topics (`<name>.<EventType>`): "<model>" is not one.
    assert compile_model("EVENT A(ts INT, x INT)\n").model == "model"
