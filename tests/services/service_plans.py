"""Execution plans built by hand (as the compiler would emit them), so the
service tests do not depend on the language front end."""

from __future__ import annotations

from caesar.plans.aggregate import AggregatePlan, AggregateSpec
from caesar.plans.execution import ContextDef, EventTypeDef, ExecutionPlan, Stage, TransitionStage
from caesar.plans.expr import Attr, Binary, Const
from caesar.plans.pattern import Output, OutputField, PatternComponent, PatternPlan

POS_FIELDS = {"vid": "int", "seg": "int", "spd": "float", "ts": "int"}
SCHEMAS = {"Pos": POS_FIELDS}


def _single(plan_id: str, var: str, where, out_type: str, fields: dict) -> PatternPlan:
    return PatternPlan(
        plan_id=plan_id,
        components=(PatternComponent(var, ("Pos",)),),
        where=(where,) if where is not None else (),
        output=Output(out_type, tuple(OutputField(k, v) for k, v in fields.items())),
        schemas=SCHEMAS,
    )


def two_context_plan(*, with_aggregate: bool = False, topic: str = "pos") -> ExecutionPlan:
    """Contexts: clear (default) and congestion, per road segment.

    - INITIATE congestion when a car reports spd < 40 (runs in clear), or, with
      `with_aggregate`, when the segment's 10-tick average speed is < 40.
    - TERMINATE congestion when a car reports spd > 60 (runs in congestion).
    - matcher: Toll(vid) for every report while congested; Fast(vid) for
      reports with spd > 80 while clear; SlowToll(vid) fed by Toll when spd < 20.
    """
    p = lambda name: Attr("p", name)  # noqa: E731
    deriver_stages: tuple[Stage, ...] = ()
    if with_aggregate:
        agg = AggregatePlan(plan_id="avg_speed", source_type="Pos", output_type="SegSpeed",
                            size=10, slide=10, group_by=("seg",),
                            aggregates=(AggregateSpec("avg_spd", "avg", Attr(None, "spd")),
                                        AggregateSpec("cars", "count_distinct", Attr(None, "vid"))))
        deriver_stages = (Stage(agg, ("clear",), feeds=("SegSpeed",)),)
        start = PatternPlan(
            plan_id="start_congestion",
            components=(PatternComponent("s", ("SegSpeed",)),),
            where=(Binary("<", Attr("s", "avg_spd"), Const(40.0)),),
            output=Output("StartCongestion", ()),
            schemas={"SegSpeed": {"seg": "int", "avg_spd": "float", "cars": "int"}})
    else:
        start = _single("start_congestion", "p", Binary("<", p("spd"), Const(40.0)),
                        "StartCongestion", {})
    stop = _single("stop_congestion", "p", Binary(">", p("spd"), Const(60.0)), "StopCongestion", {})
    toll = _single("toll", "p", None, "Toll", {"vid": p("vid"), "spd": p("spd")})
    fast = _single("fast", "p", Binary(">", p("spd"), Const(80.0)), "Fast", {"vid": p("vid")})
    slow_toll = PatternPlan(
        plan_id="slow_toll",
        components=(PatternComponent("t", ("Toll",)),),
        where=(Binary("<", Attr("t", "spd"), Const(20.0)),),
        output=Output("SlowToll", (OutputField("vid", Attr("t", "vid")),)),
        schemas={"Toll": {"vid": "int", "spd": "float"}})
    return ExecutionPlan(
        model="two_contexts",
        partition_by=("seg",),
        event_types=(EventTypeDef("Pos", POS_FIELDS, "ts", topic, None),),
        contexts=(ContextDef("clear", 0, True), ContextDef("congestion", 1, False)),
        deriver_stages=deriver_stages,
        transitions=(TransitionStage(Stage(start, ("clear",)), "INITIATE", "congestion"),
                     TransitionStage(Stage(stop, ("congestion",)), "TERMINATE", "congestion")),
        matcher_stages=(Stage(toll, ("congestion",), feeds=("Toll",), output_topic="tolls"),
                        Stage(fast, ("clear",), output_topic="fast"),
                        Stage(slow_toll, ("congestion",), output_topic="slow_tolls")),
        context_groups={},
    )


def pos(ts: int, vid: int, seg: int, spd: float) -> dict:
    return {"type": "Pos", "ts": ts, "vid": vid, "seg": seg, "spd": spd}
