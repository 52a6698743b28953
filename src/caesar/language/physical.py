"""Physical planning (pipeline step 5): algebra plan -> ExecutionPlan.

Each query of the algebra plan becomes one Stage holding a PatternPlan or an
AggregatePlan: filters on a pattern's inputs and above it become its `where`
conjuncts, Kleene iteration filters its `iteration_filter`, the projection
its `output`. A stage runs in the contexts of the context windows that guard
it: after push-down those sit on its input streams (possibly narrowed to the
consumers' contexts); before push-down, the CW above the query.

The deriver gets the deriving queries (as transitions) and every stage they
depend on; the matcher gets the processing queries the deriving queries do
not need, plus the stages those depend on. A stage needed by both runs in
both services.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from caesar.language.algebra import AGG, CW, CX, FI, PR, SIT, TP, AlgebraPlan, Op, P, Stream
from caesar.language.checked import Action, CheckedModel, marker_type
from caesar.language.errors import LanguageError, ModelStructureError
from caesar.language.identity import query_identities
from caesar.language.semantics import UNIT_MS
from caesar.plans import expr as ir
from caesar.plans.aggregate import AggregatePlan, AggregateSpec
from caesar.plans.execution import (
    ContextDef,
    EventTypeDef,
    ExecutionPlan,
    OutputRate,
    Stage,
    TransitionStage,
    plan_reads,
)
from caesar.plans.pattern import Output, OutputField, PatternPlan
from caesar.plans.temporal import SituationSpec, TemporalPlan


@dataclass
class _Query:
    qid: str
    plan: PatternPlan | AggregatePlan | TemporalPlan
    contexts: set[str]
    output_type: str
    deps: list[str] = field(default_factory=list)
    transition: tuple[Action, str] | None = None
    key_fields: tuple[str, ...] = ()  # KEYED BY of a transition: its output fields
    output_rate: OutputRate | None = None  # OUTPUT ... EVERY of its projection


def output_topic(model: CheckedModel, event_type: str) -> str:
    """Kafka topic for a derived event type that leaves the service: its
    `TO TOPIC` if declared, else `<model>.<EventType>`."""
    declared = model.event_types.get(event_type)
    if declared is not None and declared.output_topic is not None:
        return declared.output_topic
    return f"{model.name}.{event_type}"


class _Extractor:
    def __init__(self, model: CheckedModel) -> None:
        self.model = model
        self.queries: dict[str, _Query] = {}
        self.all_contexts = set(model.context_names())

    def schemas(self, types: Iterable[str]) -> dict[str, dict[str, str]]:
        return {t: dict(self.model.event_types[t].fields) for t in types
                if t in self.model.event_types}

    def query(self, op: Op) -> str:
        """Extract the query rooted at op; return its qid."""
        above, leaf = _above(op)
        inputs = _Inputs()
        plan: PatternPlan | AggregatePlan | TemporalPlan
        if isinstance(leaf, P):
            plan = self._pattern_plan(leaf, above, inputs)
        elif isinstance(leaf, TP):
            plan = self._temporal_plan(leaf, above, inputs)
        else:
            plan = self._aggregate_plan(leaf, above, inputs)
        if above.contexts is not None:
            contexts = above.contexts
        elif inputs.saw_cw:
            contexts = inputs.contexts
        else:
            contexts = set(self.all_contexts)
        self._record(leaf.qid, plan, contexts, inputs.deps, above.cx)
        self.queries[leaf.qid].output_rate = above.pr.output_rate if above.pr else None
        return leaf.qid

    def _record(self, qid: str, plan: PatternPlan | AggregatePlan | TemporalPlan,
                contexts: set[str],
                deps: list[str], cx: CX | None) -> None:
        """Keep the query; one reached again (shared) runs in both places."""
        existing = self.queries.get(qid)
        if existing is not None:
            existing.contexts |= contexts
            existing.deps = list(dict.fromkeys(existing.deps + deps))
            return
        out_type = plan.output.event_type \
            if isinstance(plan, PatternPlan | TemporalPlan) and plan.output \
            else getattr(plan, "output_type", "")
        self.queries[qid] = _Query(qid, plan, contexts, out_type, deps,
                                   (cx.action, cx.context) if cx is not None else None,
                                   tuple(n for n, _ in cx.key) if cx is not None else ())

    def _chain(self, inp: Op, inputs: _Inputs) -> tuple[list[ir.Expr], list[ir.Expr], Stream]:
        """Down one input to its stream: (conjuncts, iteration filters, stream);
        the queries deriving the stream are extracted first."""
        conj: list[ir.Expr] = []
        iteration: list[ir.Expr] = []
        while not isinstance(inp, Stream):
            if isinstance(inp, FI):
                (iteration if inp.iteration else conj)[:0] = list(inp.conjuncts)
            elif isinstance(inp, CW):
                inputs.saw_cw = True
                inputs.contexts.update(inp.contexts)
            else:
                raise TypeError(f"unexpected operator on a pattern input: {inp!r}")
            inp = inp.child
        inputs.deps.extend(self.query(producer) for producer in inp.producers)
        return conj, iteration, inp

    def _pattern_plan(self, node: P, above: _Above, inputs: _Inputs) -> PatternPlan:
        comps = []
        where: list[ir.Expr] = []
        types: list[str] = []
        for comp, inp in zip(node.components, node.inputs, strict=True):
            conj, iteration, stream = self._chain(inp, inputs)
            types.extend(stream.types)
            where.extend(conj)
            it = None
            for e in iteration:
                it = e if it is None else ir.Binary("AND", it, e)
            comps.append(replace(comp, iteration_filter=it))
        where.extend(above.conjuncts)
        if above.cx is not None:
            cx = above.cx
            output = Output(marker_type(cx.action, cx.context),
                            tuple(OutputField(n, e) for n, e in cx.key) +
                            self._key_fields(node, cx))
        else:
            assert above.pr is not None
            pr = above.pr
            output = Output(pr.event_type, tuple(OutputField(n, e) for n, e in pr.fields))
        timeout = None
        if node.timeout is not None:
            timeout = Output(node.timeout[0],
                             tuple(OutputField(n, e) for n, e in node.timeout[1]))
        return PatternPlan(
            plan_id=node.qid, components=tuple(comps), where=tuple(dict.fromkeys(where)),
            equivalence=node.equivalence, within=node.within, strategy=node.strategy,
            output=output, schemas=self.schemas(dict.fromkeys(types)),
            alternatives=node.alternatives, skip=node.skip, skip_var=node.skip_var,
            timeout=timeout, equivalence_negated=node.equivalence_negated)

    def _key_fields(self, node: P, cx: CX) -> tuple[OutputField, ...]:
        """CONTEXTS PER: a transition applies to the key of its last event;
        its output carries that key."""
        last = next(c for c in reversed(node.components) if not c.negated)
        keyed_by = {n for n, _ in cx.key}
        out = []
        for a in self.model.context_key:
            missing = [t for t in last.types if a not in self.model.event_types[t].fields]
            if missing:
                raise self.key_error(
                    node.qid, f"context deriving query {node.qid} ends with "
                    f"{'/'.join(missing)} {last.var}, which has no attribute {a}: with "
                    f"CONTEXTS PER {', '.join(self.model.context_key)} a transition applies "
                    "to the key of its last event",
                    found=f"{'/'.join(missing)} without {a}",
                    expected=f"a last event type with attribute {a}")
            if a not in keyed_by:
                out.append(OutputField(a, ir.Attr(last.var, a)))
        return tuple(out)

    def key_error(self, qid: str, message: str, found: str, expected: str) -> LanguageError:
        q = next((q for q in self.model.queries if q.qid == qid), None)
        pos = q.source.pos if q is not None else self.model.source.context_key_pos
        return ModelStructureError(message, pos, self.model.source.source, found=found,
                                   expected=expected)

    def _temporal_plan(self, node: TP, above: _Above, inputs: _Inputs) -> TemporalPlan:
        specs = []
        for sit in node.inputs:
            assert isinstance(sit, SIT)
            _, _, stream = self._chain(sit.child, inputs)
            specs.append(SituationSpec(sit.name, stream.types[0], sit.condition,
                                       sit.min_duration, sit.max_duration))
        if above.cx is not None:
            cx = above.cx
            output = Output(marker_type(cx.action, cx.context),
                            tuple(OutputField(n, e) for n, e in cx.key))
        else:
            assert above.pr is not None
            output = Output(above.pr.event_type,
                            tuple(OutputField(n, e) for n, e in above.pr.fields))
        return TemporalPlan(
            plan_id=node.qid, situations=tuple(specs), constraints=node.constraints,
            within=node.within, emit="end" if node.emit == "end" else "match", output=output,
            schemas=self.schemas(dict.fromkeys(s.source_type for s in specs)))

    def _aggregate_plan(self, node: AGG, above: _Above, inputs: _Inputs) -> AggregatePlan:
        conj, _, stream = self._chain(node.child, inputs)
        assert above.pr is not None
        return AggregatePlan(
            plan_id=node.qid, source_type=stream.types[0], output_type=above.pr.event_type,
            size=node.size, slide=node.slide, group_by=node.group_by,
            aggregates=tuple(AggregateSpec(n, f, a) for n, f, a in node.aggregates),
            where=tuple(conj), having=tuple(above.conjuncts), window=node.window)


@dataclass
class _Above:
    """The operators above a query's P or AGG: its context transition or
    projection, the filters over its output (WHERE of a pattern, HAVING of an
    aggregation), the contexts of the windows over it (None: no window)."""

    cx: CX | None = None
    pr: PR | None = None
    conjuncts: list[ir.Expr] = field(default_factory=list)
    contexts: set[str] | None = None


@dataclass
class _Inputs:
    """What the inputs below a P or AGG hold: the contexts of their windows
    (whether there are any) and the queries that derive their streams."""

    contexts: set[str] = field(default_factory=set)
    saw_cw: bool = False
    deps: list[str] = field(default_factory=list)


def _above(op: Op) -> tuple[_Above, P | AGG | TP]:
    above = _Above()
    node = op
    while not isinstance(node, P | AGG | TP):
        if isinstance(node, CX):
            above.cx = node
        elif isinstance(node, CW):
            above.contexts = set(node.contexts) if above.contexts is None else \
                above.contexts & set(node.contexts)
        elif isinstance(node, PR):
            above.pr = node
        elif isinstance(node, FI):
            above.conjuncts = list(node.conjuncts) + above.conjuncts
        else:
            raise TypeError(f"unexpected operator above a pattern: {node!r}")
        node = node.child
    return above, node


def physical_plan(plan: AlgebraPlan) -> ExecutionPlan:
    qs = plan.query_set
    model = qs.model
    ex = _Extractor(model)
    root_ids = [ex.query(root) for _, root in plan.roots]
    order = [c.name for c in model.contexts]
    # Contexts per service: a helper stage in the deriver runs only where the
    # transitions need it, in the matcher only where the processing queries do.
    by_service: dict[str, _Extractor] = {"deriver": _Extractor(model), "matcher": _Extractor(model)}
    for _, root in plan.roots:
        service = "deriver" if isinstance(root, CX) else "matcher"
        by_service[service].query(root)

    def ctx_tuple(ctxs: set[str]) -> tuple[str, ...]:
        return tuple(c for c in order if c in ctxs)

    def closure(start: list[str]) -> list[str]:
        seen: list[str] = []

        def visit(q: str) -> None:
            if q in seen:
                return
            for d in ex.queries[q].deps:
                visit(d)
            seen.append(q)

        for q in start:
            visit(q)
        return seen

    deriving = [q for q in root_ids if ex.queries[q].transition is not None]
    processing = [q for q in root_ids if ex.queries[q].transition is None]
    deriver_ids = [q for q in closure(deriving) if ex.queries[q].transition is None]
    matcher_ids = closure(processing)
    consumed = {t for q in ex.queries.values() for d in q.deps for t in [ex.queries[d].output_type]}

    identities = query_identities(qs.queries, model.source.source)

    def stage(qid: str, members: list[str], service: str) -> Stage:
        q = by_service[service].queries[qid]
        feeds_here = any(qid in ex.queries[m].deps for m in members)
        # Leaves the service when nothing consumes it, or when its type names its
        # topic (`TO TOPIC`): then also when a query consumes it, from the matcher
        # if the matcher runs the query, else from the deriver (never both).
        declared = model.event_types.get(q.output_type)
        to_topic = declared is not None and declared.output_topic is not None
        external = q.transition is None and (
            q.output_type not in consumed
            or (to_topic and (service == "matcher" or qid not in matcher_ids)))
        plan = q.plan
        timeout = plan.timeout if isinstance(plan, PatternPlan) else None
        return Stage(plan=plan, contexts=ctx_tuple(q.contexts),
                     feeds=(q.output_type,) if feeds_here else (),
                     output_topic=output_topic(model, q.output_type) if external else None,
                     identity=identities.get(qid, qid), output_rate=q.output_rate,
                     timeout_topic=output_topic(model, timeout.event_type) if timeout else None)

    deriver_members = deriver_ids + deriving
    transitions = []
    for qid in deriving:
        q = ex.queries[qid]
        assert q.transition is not None
        transitions.append(TransitionStage(stage(qid, deriver_members, "deriver"),
                                           q.transition[0],
                                           q.transition[1], key_fields=q.key_fields))
    groups = {g.gid: g.contexts for g in plan.groups} or {c: (c,) for c in order}
    context_groups = {c: tuple(gid for gid, cs in groups.items() if c in cs) for c in order}
    event_types = tuple(
        EventTypeDef(name=t.name, fields=dict(t.fields), ts_field=t.ts_field, topic=t.topic,
                     schema_file=t.schema_file, schema_json=t.schema_json,
                     checks=dict(t.checks))
        for t in model.event_types.values())
    bits = sorted(order)  # the paper keeps the bit vector sorted by context name
    contexts = tuple(ContextDef(c.name, bits.index(c.name), c.default, c.keyed)
                     for c in model.contexts)
    result = ExecutionPlan(
        model=model.name, partition_by=model.partition_by, event_types=event_types,
        contexts=contexts,
        deriver_stages=tuple(stage(q, deriver_members, "deriver") for q in deriver_ids),
        transitions=tuple(transitions),
        matcher_stages=tuple(stage(q, matcher_ids, "matcher") for q in matcher_ids),
        context_groups=context_groups, groups=groups,
        shared=dict(plan.shared), context_key=model.context_key,
        time_unit_ms=UNIT_MS.get(model.time_unit, 1))
    _check_context_key(ex, model, result)
    return result


def _check_context_key(ex: _Extractor, model: CheckedModel, plan: ExecutionPlan) -> None:
    """CONTEXTS PER: a stage that does not run in every context sees only the
    events of its key, so every type it reads must have the key attributes."""
    if not model.context_key:
        return
    every = set(model.context_names())
    stages = list(plan.deriver_stages) + [t.stage for t in plan.transitions] + \
        list(plan.matcher_stages)
    for stage in stages:
        if set(stage.contexts) >= every:
            continue
        p = stage.plan
        for t in plan_reads(p):
            fields = model.event_types[t].fields if t in model.event_types else {}
            missing = [a for a in model.context_key if a not in fields]
            if missing:
                raise ex.key_error(
                    p.plan_id, f"query {p.plan_id} runs in {', '.join(stage.contexts)} only and "
                    f"reads {t}, which has no attribute {', '.join(missing)}: with CONTEXTS PER "
                    f"{', '.join(model.context_key)} it sees the events of one key only",
                    found=f"{t} without {', '.join(missing)}",
                    expected=f"event types with {', '.join(model.context_key)}, or the query "
                             "in every context")
