"""CAESAR algebra (paper section 4.1) and phase 2 (section 4.2): query set ->
combined algebra plan.

Operators: Stream (input leaf, or a derived type with its producing plans),
CW (context window), FI (filter), P (pattern), AGG (windowed aggregation),
PR (projection / DERIVE) and CX (context initiation CI, termination CT, or a
switch = CI of the target plus CT of the current context).

Table 1 of the paper gives each query's individual plan; here the context
window sits on top of the processing part (Figure 6(a)), so phase 2 output
is the unoptimized plan. Plans whose output a query consumes are nested as
that Stream's producers (the combined plan). Every node is frozen data;
`qid` (which query an operator came from) does not take part in equality, so
identical sub-plans of different queries compare equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from caesar.language.checked import (
    Action,
    AggregateBody,
    CheckedQuery,
    PatternBody,
    TemporalBody,
)
from caesar.language.phase1 import QuerySet
from caesar.plans import expr as ir
from caesar.plans.aggregate import WindowKind
from caesar.plans.execution import OutputRate
from caesar.plans.pattern import PatternComponent, Skip, Strategy
from caesar.plans.temporal import TemporalConstraint


@dataclass(frozen=True)
class Stream:
    types: tuple[str, ...]
    producers: tuple[Op, ...] = ()


@dataclass(frozen=True)
class CW:
    contexts: tuple[str, ...]
    child: Op


@dataclass(frozen=True)
class FI:
    conjuncts: tuple[ir.Expr, ...]
    child: Op
    var: str | None = None  # the pattern variable whose input it filters (None: match output)
    iteration: bool = False  # a Kleene FILTER: holds for every iterated event


@dataclass(frozen=True)
class P:
    components: tuple[PatternComponent, ...]  # iteration filters live in FI(iteration=True)
    inputs: tuple[Op, ...]  # one input per component
    equivalence: tuple[str, ...] = ()
    within: int | None = None
    strategy: Strategy = "skip_till_any_match"
    qid: str = field(default="", compare=False)
    # issue 16: AND/OR alternatives (component indices), after-match skip,
    # ON TIMEOUT (type, fields), [attr] EXCEPT NOT
    alternatives: tuple[tuple[int, ...], ...] = ()
    skip: Skip = "no_skip"
    skip_var: str | None = None
    timeout: tuple[str, tuple[tuple[str, ir.Expr], ...]] | None = None
    equivalence_negated: bool = True


@dataclass(frozen=True)
class AGG:
    size: int
    slide: int
    group_by: tuple[str, ...]
    aggregates: tuple[tuple[str, ir.AggFunc, ir.Expr | None], ...]
    child: Op
    qid: str = field(default="", compare=False)
    window: WindowKind = "time"  # time | count | session (plans/aggregate.py)


@dataclass(frozen=True)
class PR:
    event_type: str
    fields: tuple[tuple[str, ir.Expr], ...]
    child: Op
    qid: str = field(default="", compare=False)
    output_rate: OutputRate | None = None  # OUTPUT ... EVERY


@dataclass(frozen=True)
class CX:
    action: Action
    context: str
    current: tuple[str, ...]  # the contexts the deriving query runs in (CT_curr of a SWITCH)
    child: Op
    qid: str = field(default="", compare=False)
    # KEYED BY: (field, expr) naming the context instance initiated/ended.
    key: tuple[tuple[str, ir.Expr], ...] = ()


@dataclass(frozen=True)
class SIT:
    """TPStream situation derivation (the deriver component, paper section
    5.1): maximal runs of `child`'s events satisfying `condition`."""

    name: str
    condition: ir.Expr
    min_duration: int | None
    max_duration: int | None
    child: Op


@dataclass(frozen=True)
class TP:
    """TPStream temporal pattern matching with earliest detection (the
    matcher component, sections 5.2-5.3): one input SIT per situation."""

    constraints: tuple[TemporalConstraint, ...]
    inputs: tuple[Op, ...]
    within: int | None = None
    emit: str = "match"
    qid: str = field(default="", compare=False)


Op = Stream | CW | FI | P | AGG | PR | CX | SIT | TP


@dataclass(frozen=True)
class ContextGroup:
    """A grouped context window (section 5.3): the interval in which exactly
    `contexts` of a set of overlapping contexts hold, with its workload."""

    gid: str
    contexts: tuple[str, ...]
    queries: tuple[str, ...]


@dataclass(frozen=True)
class AlgebraPlan:
    roots: tuple[tuple[str, Op], ...]  # (qid of the root query, plan)
    query_set: QuerySet = field(compare=False, repr=False)
    groups: tuple[ContextGroup, ...] = ()
    overlaps: tuple[tuple[str, str], ...] = ()
    # qid of a query dropped by sharing -> qid of the query that now does its work
    shared: tuple[tuple[str, str], ...] = ()
    applied: tuple[str, ...] = ()  # names of optimizer rules applied, in order

    def with_roots(self, roots: Iterable[tuple[str, Op]]) -> AlgebraPlan:
        return replace(self, roots=tuple(roots))


def children(op: Op) -> tuple[Op, ...]:
    match op:
        case Stream(producers=ps):
            return ps
        case P(inputs=ins) | TP(inputs=ins):
            return ins
        case CW(child=c) | FI(child=c) | AGG(child=c) | PR(child=c) | CX(child=c) | SIT(child=c):
            return (c,)
    raise TypeError(op)


def with_children(op: Op, new: tuple[Op, ...]) -> Op:
    match op:
        case Stream():
            return replace(op, producers=new)
        case P() | TP():
            return replace(op, inputs=new)
        case _:
            return replace(op, child=new[0])


def transform(op: Op, fn: Callable[[Op], Op]) -> Op:
    """Bottom-up rewrite: fn is applied to each node after its children."""
    kids = children(op)
    if kids:
        op = with_children(op, tuple(transform(k, fn) for k in kids))
    return fn(op)


def walk(op: Op) -> Iterator[Op]:
    yield op
    for k in children(op):
        yield from walk(k)


# ---- phase 2 ---------------------------------------------------------------


def individual_plan(q: CheckedQuery, producers: dict[str, tuple[Op, ...]]) -> Op:
    """Table 1: one query's operators, context window on top."""
    body = q.body
    if isinstance(body, TemporalBody):
        return _on_top(q, _temporal_operators(q, body, producers))
    if isinstance(body, AggregateBody):
        return CW(q.contexts, PR(q.output_type, q.output_fields,
                                 _aggregate_operators(q, body, producers), qid=q.qid,
                                 output_rate=q.output_rate))
    return _on_top(q, _pattern_operators(q, body, producers))


def _leaf(types: tuple[str, ...], producers: dict[str, tuple[Op, ...]]) -> Stream:
    """The input stream of some event types, with the plans deriving them."""
    return Stream(types, tuple(p for t in types for p in producers.get(t, ())))


def _on_top(q: CheckedQuery, node: Op) -> Op:
    """A deriving query's context transition, else its projection, under the
    context window."""
    if q.transition is not None:
        return CX(q.transition.action, q.transition.target, q.contexts,
                  CW(q.contexts, node), qid=q.qid, key=q.output_fields)
    return CW(q.contexts, PR(q.output_type, q.output_fields, node, qid=q.qid,
                             output_rate=q.output_rate))


def _temporal_operators(q: CheckedQuery, body: TemporalBody,
                        producers: dict[str, tuple[Op, ...]]) -> Op:
    """TP over one SIT per situation definition."""
    sits = tuple(SIT(s.name, s.condition, s.min_duration, s.max_duration,
                     _leaf((s.source_type,), producers)) for s in body.situations)
    return TP(body.constraints, sits, body.within, body.emit, qid=q.qid)


def _aggregate_operators(q: CheckedQuery, body: AggregateBody,
                         producers: dict[str, tuple[Op, ...]]) -> Op:
    """FI (WHERE), AGG, FI (HAVING)."""
    node: Op = _leaf(q.input_types, producers)
    if body.conjuncts:
        node = FI(tuple(c.expr for c in body.conjuncts), node)
    node = AGG(body.size, body.slide, body.group_by, body.aggregates, node, qid=q.qid,
               window=body.window)
    if body.having:
        node = FI(body.having, node)
    return node


def _pattern_operators(q: CheckedQuery, body: PatternBody,
                       producers: dict[str, tuple[Op, ...]]) -> Op:
    """P over each component's filtered stream, then FI of the conjuncts
    that span components."""
    inputs = []
    comps = []
    for comp in body.components:
        node: Op = _leaf(comp.types, producers)
        own = tuple(c.expr for c in body.conjuncts if c.component == comp.var)
        if own:
            node = FI(own, node, var=comp.var)
        if comp.iteration_filter is not None:
            node = FI((comp.iteration_filter,), node, var=comp.var, iteration=True)
        inputs.append(node)
        comps.append(replace(comp, iteration_filter=None))
    timeout = (body.timeout_type, body.timeout_fields) if body.timeout_type is not None else None
    node = P(tuple(comps), tuple(inputs), body.equivalence, body.within, body.strategy,
             qid=q.qid, alternatives=body.alternatives, skip=body.skip, skip_var=body.skip_var,
             timeout=timeout, equivalence_negated=body.equivalence_negated)
    where = tuple(c.expr for c in body.conjuncts if c.component is None)
    if where:
        node = FI(where, node)
    return node


def phase2(qs: QuerySet) -> AlgebraPlan:
    """Query set -> combined plan: a query's Stream of a derived type carries
    the plans of the queries producing it; roots are deriving queries and the
    processing queries whose output nobody consumes."""
    consumed: set[str] = set()
    for q in qs.queries:
        consumed.update(q.input_types)
    plans: dict[str, Op] = {}
    producers: dict[str, tuple[Op, ...]] = {}
    # Queries come out of semantic analysis in an order where producers of a
    # type are checked before its consumers only if written first; build in
    # dependency order instead.
    remaining = list(qs.queries)
    produced_by: dict[str, list[str]] = {}
    for q in qs.queries:
        if not q.deriving:
            produced_by.setdefault(q.output_type, []).append(q.qid)
    while remaining:
        for q in list(remaining):
            deps = [qid for t in q.input_types for qid in produced_by.get(t, ())]
            if all(d in plans for d in deps):
                plans[q.qid] = individual_plan(q, producers)
                if not q.deriving:
                    producers[q.output_type] = producers.get(q.output_type, ()) + (plans[q.qid],)
                remaining.remove(q)
    roots = tuple((q.qid, plans[q.qid]) for q in qs.queries
                  if q.deriving or q.output_type not in consumed)
    return AlgebraPlan(roots=roots, query_set=qs)


# ---- rendering -------------------------------------------------------------


def label(op: Op) -> str:
    match op:
        case Stream(types=types, producers=ps):
            name = " | ".join(types)
            return f"STREAM {name}" + (" <- derived by" if ps else "")
        case CW(contexts=cs):
            return f"CW[{', '.join(cs)}]"
        case FI(conjuncts=cs, var=var, iteration=it):
            text = " AND ".join(ir.render(c) for c in cs)
            where = f" on {var}" if var else ""
            return f"FI{'*' if it else ''}{where}[{text}]"
        case P():
            return _pattern_label(op)
        case AGG():
            return _aggregate_label(op)
        case PR():
            return _projection_label(op)
        case SIT():
            return _situation_label(op)
        case TP():
            return _temporal_label(op)
        case CX():
            return _context_label(op)
    raise TypeError(op)


def _aggregate_label(op: AGG) -> str:
    items = ", ".join(f"{f}({ir.render(a) if a is not None else '*'}) AS {n}"
                      for n, f, a in op.aggregates)
    size, slide = op.size, op.slide
    win = f"TUMBLING {size}" if size == slide else f"SLIDING {size} EVERY {slide}"
    if op.window == "count":
        win = f"COUNT {size}" + (f" EVERY {slide}" if slide != size else "")
    elif op.window == "session":
        win = f"SESSION GAP {size}"
    by = f" BY {', '.join(op.group_by)}" if op.group_by else ""
    return f"AGG {op.qid}[{items}{by} {win}]"


def _projection_label(op: PR) -> str:
    rate = op.output_rate
    every = f" OUTPUT {rate.kind.upper()} EVERY {rate.every}" if rate else ""
    fields = ", ".join(n + "=" + ir.render(e) for n, e in op.fields)
    return f"PR {op.qid}[{op.event_type}({fields}){every}]"


def _situation_label(op: SIT) -> str:
    lo, hi = op.min_duration, op.max_duration
    bounds = "" if lo is None and hi is None else \
        f" BETWEEN {lo} AND {hi}" if lo is not None and hi is not None else \
        f" AT LEAST {lo}" if lo is not None else f" AT MOST {hi}"
    return f"SIT {op.name}[{ir.render(op.condition)}{bounds}]"


def _temporal_label(op: TP) -> str:
    if not op.constraints:
        first = op.inputs[0]
        name = first.name if isinstance(first, SIT) else "?"
        text = f"{'END' if op.emit == 'end' else 'START'} OF {name}"
    else:
        text = " AND ".join(f"{c.left} {'|'.join(r.upper() for r in c.relations)} {c.right}"
                            for c in op.constraints)
    return f"TP {op.qid}[{text}" + (f" WITHIN {op.within}" if op.within is not None else "") + "]"


def _pattern_label(op: P) -> str:
    parts = []
    for c in op.components:
        t = c.types[0] if len(c.types) == 1 else f"ANY({', '.join(c.types)})"
        parts.append(("NOT " if c.negated else "") + t + _quantifier(c) + f" {c.var}")
    if op.alternatives:  # AND/OR: one sequence per alternative
        text = f"P {op.qid}[" + " | ".join(
            "SEQ(" + ", ".join(parts[i] for i in alt) + ")" for alt in op.alternatives)
    else:
        text = f"P {op.qid}[SEQ({', '.join(parts)})" if len(op.components) > 1 else \
            f"P {op.qid}[{parts[0]}"
    if op.equivalence:
        text += f" [{', '.join(op.equivalence)}]" + ("" if op.equivalence_negated else " EXCEPT NOT")
    if op.within is not None:
        text += f" WITHIN {op.within}"
    if op.strategy != "skip_till_any_match":
        text += f" {op.strategy}"
    if op.skip != "no_skip":
        text += f" skip {op.skip}" + (f" {op.skip_var}" if op.skip_var else "")
    if op.timeout is not None:
        text += f" timeout -> {op.timeout[0]}"
    return text + "]"


def _quantifier(c: PatternComponent) -> str:
    if not c.kleene:
        return ""
    bounds = {(1, None): "+", (0, None): "*", (0, 1): "?"}.get((c.min_count, c.max_count))
    if bounds is None:
        hi = "" if c.max_count is None else str(c.max_count)
        bounds = f"{{{c.min_count}}}" if c.min_count == c.max_count else f"{{{c.min_count},{hi}}}"
    return bounds + (" GREEDY" if c.greedy else "")


def _context_label(op: CX) -> str:
    by = f" KEYED BY {', '.join(ir.render(e) for _, e in op.key)}" if op.key else ""
    if op.action == "INITIATE":
        return f"CI {op.qid}[{op.context}{by}]"
    if op.action == "TERMINATE":
        return f"CT {op.qid}[{op.context}{by}]"
    return f"CI {op.qid}[{op.context}] + CT[{', '.join(op.current)}]{by}"


def render_plan(plan: AlgebraPlan, title: str = "") -> str:
    out: list[str] = [title] if title else []
    for qid, root in plan.roots:
        out.append(f"plan {qid}:")
        _render(root, "  ", "", out)
    for dropped, kept in plan.shared:
        out.append(f"shared: {dropped} is computed by {kept}")
    if plan.overlaps:
        out.append("overlapping contexts: " +
                   ", ".join(f"{a}~{b}" for a, b in plan.overlaps))
    out.extend(f"group {g.gid}: contexts {', '.join(g.contexts)}; "
               f"queries {', '.join(g.queries) or '-'}" for g in plan.groups)
    if plan.applied:
        out.append("rules: " + ", ".join(plan.applied))
    return "\n".join(out) + "\n"


def _render(op: Op, indent: str, branch: str, out: list[str]) -> None:
    out.append(indent + branch + label(op))
    kids = children(op)
    child_indent = indent + ("   " if branch.startswith("`") else "|  " if branch else "")
    for i, k in enumerate(kids):
        last = i == len(kids) - 1
        _render(k, child_indent, "`- " if last else "+- ", out)
