"""Execution plans as plain JSON data, and their fingerprints.

A deployment keeps every plan version it ran in Kafka (the plans topic) so a
restarted actor can rebuild the plan that wrote its state; fingerprints say
whether a query's state can carry over to a new version of the model.
Decoding builds only the plan classes listed here (never arbitrary types),
so a record of the plans topic is data, not code.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from caesar.errors import PlanError
from caesar.plans import expr as ir
from caesar.plans.aggregate import AggregatePlan, AggregateSpec
from caesar.plans.execution import (
    ContextDef,
    EventTypeDef,
    ExecutionPlan,
    FieldCheck,
    OutputRate,
    Stage,
    TransitionStage,
)
from caesar.plans.functions import Function
from caesar.plans.pattern import Output, OutputField, PatternComponent, PatternPlan
from caesar.plans.tables import AcepPlan, ActionPlan, ActorPlan, TableRead, TableSchema
from caesar.plans.temporal import SituationSpec, TemporalConstraint, TemporalPlan

# 2: maps in their order (pairs). An event type's fields are ordered (they
# make its generated Avro schema); format 1 sorted them by name, so a plan read
# back from the plans topic wrote and read another schema than the original.
PLAN_FORMAT = 2
_READABLE_FORMATS = (1, 2)
_CLASSES: dict[str, type] = {c.__name__: c for c in (
    ExecutionPlan, EventTypeDef, FieldCheck, ContextDef, Stage, TransitionStage, PatternPlan,
    PatternComponent, Output, OutputField, AggregatePlan, AggregateSpec, TemporalPlan,
    SituationSpec, TemporalConstraint, OutputRate, AcepPlan, ActionPlan, ActorPlan, TableRead,
    TableSchema, ir.Const, ir.Attr, ir.Unary, ir.Binary, ir.Call, ir.Agg)}


def to_data(value: Any, ordered: bool = False) -> Any:
    """Plan objects -> JSON-able data (dataclasses tagged by class name).
    `ordered`: maps as lists of pairs, which keep their order through a JSON
    text written with sorted keys (the plans topic); fingerprints use the
    unordered form, so they are the same as before format 2."""
    if isinstance(value, Function):
        # by import path only, never code; a function of this process only
        # (target None) is fingerprinted by its signature and cannot be loaded
        return {"$f": {"name": value.name, "params": list(value.params),
                       "returns": value.returns, "target": value.target}}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if _CLASSES.get(name) is not type(value):
            raise PlanError(f"cannot serialize a {name} in a plan")
        return {"$": name, **{f.name: to_data(getattr(value, f.name), ordered)
                              for f in dataclasses.fields(value)}}
    if isinstance(value, tuple):
        return {"$t": [to_data(v, ordered) for v in value]}
    if isinstance(value, frozenset):
        return {"$s": sorted((to_data(v, ordered) for v in value), key=_canonical)}
    if isinstance(value, list):
        return [to_data(v, ordered) for v in value]
    if isinstance(value, dict):
        return _map(value, ordered)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise PlanError(f"cannot serialize a {type(value).__name__} in a plan")


def _map(value: dict[Any, Any], ordered: bool) -> Any:
    if not all(isinstance(k, str) for k in value):
        raise PlanError("plan maps must have string keys")
    if ordered:
        return {"$p": [[k, to_data(v, ordered)] for k, v in value.items()]}
    return {"$m": {k: to_data(v) for k, v in value.items()}}


def from_data(data: Any) -> Any:
    if isinstance(data, list):
        return [from_data(v) for v in data]
    if isinstance(data, dict):
        if "$t" in data:
            return tuple(from_data(v) for v in data["$t"])
        if "$s" in data:
            return frozenset(from_data(v) for v in data["$s"])
        if "$f" in data:
            return _function(data["$f"])
        if "$m" in data:
            return {k: from_data(v) for k, v in data["$m"].items()}
        if "$p" in data:
            pairs = data["$p"]
            if not isinstance(pairs, list) or not all(
                    isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
                raise PlanError("a plan map must be a list of [name, value] pairs")
            return {k: from_data(v) for k, v in pairs}
        cls = _CLASSES.get(data.get("$", ""))
        if cls is None:
            raise PlanError(f"not a plan class: {str(data.get('$'))[:80]!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: from_data(v) for k, v in data.items() if k in names})
    return data


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _function(data: Any) -> Function:
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise PlanError("a plan's function needs a name")
    target = data.get("target")
    if target is None:
        raise PlanError(f"function {data['name']} was local to the process that compiled the "
                        "model: name it as 'package.module:function' to deploy it")
    return Function(data["name"], tuple(data.get("params", ())), str(data.get("returns", "")),
                    str(target))


def plan_json(plan: ExecutionPlan) -> str:
    return json.dumps({"format": PLAN_FORMAT, "plan": to_data(plan, ordered=True)}, sort_keys=True,
                      separators=(",", ":"))


def plan_from_json(text: str | bytes) -> ExecutionPlan:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise PlanError(f"not a plan: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") not in _READABLE_FORMATS:
        raise PlanError(f"unknown plan format {doc.get('format') if isinstance(doc, dict) else '?'}")
    plan = from_data(doc["plan"])
    if not isinstance(plan, ExecutionPlan):
        raise PlanError("the plan record does not hold an execution plan")
    return plan


def _digest(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def plan_version(plan: ExecutionPlan) -> str:
    """Fingerprint of a whole execution plan (a deployment's model version)."""
    return _digest(to_data(plan))


def state_fingerprint(plan: PatternPlan | AggregatePlan | TemporalPlan) -> str:
    """Fingerprint of what a query's state depends on: its compiled plan
    without its id (a renamed but unchanged query keeps its state)."""
    # (schemas included: they fix the column layout of the events it stores)
    return _digest(to_data(dataclasses.replace(plan, plan_id="")))


def stage_identity(stage: Stage) -> str:
    """The query's stable identity (its name, or a content fingerprint)."""
    return stage.identity or stage.plan.plan_id
