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

from caesar.language.checked import Action, AggregateBody, CheckedQuery, TemporalBody
from caesar.language.phase1 import QuerySet
from caesar.plans import expr as ir
from caesar.plans.pattern import PatternComponent, Strategy
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


@dataclass(frozen=True)
class AGG:
    size: int
    slide: int
    group_by: tuple[str, ...]
    aggregates: tuple[tuple[str, ir.AggFunc, ir.Expr | None], ...]
    child: Op
    qid: str = field(default="", compare=False)


@dataclass(frozen=True)
class PR:
    event_type: str
    fields: tuple[tuple[str, ir.Expr], ...]
    child: Op
    qid: str = field(default="", compare=False)


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
    def leaf(types: tuple[str, ...]) -> Op:
        return Stream(types, tuple(p for t in types for p in producers.get(t, ())))

    body = q.body
    if isinstance(body, TemporalBody):
        sits = tuple(SIT(s.name, s.condition, s.min_duration, s.max_duration,
                         leaf((s.source_type,))) for s in body.situations)
        tp = TP(body.constraints, sits, body.within, body.emit, qid=q.qid)
        if q.transition is not None:
            return CX(q.transition.action, q.transition.target, q.contexts,
                      CW(q.contexts, tp), qid=q.qid, key=q.output_fields)
        return CW(q.contexts, PR(q.output_type, q.output_fields, tp, qid=q.qid))
    if isinstance(body, AggregateBody):
        node: Op = leaf(q.input_types)
        if body.conjuncts:
            node = FI(tuple(c.expr for c in body.conjuncts), node)
        node = AGG(body.size, body.slide, body.group_by, body.aggregates, node, qid=q.qid)
        if body.having:
            node = FI(body.having, node)
        node = PR(q.output_type, q.output_fields, node, qid=q.qid)
        return CW(q.contexts, node)
    inputs = []
    comps = []
    for comp in body.components:
        node = leaf(comp.types)
        own = tuple(c.expr for c in body.conjuncts if c.component == comp.var)
        if own:
            node = FI(own, node, var=comp.var)
        if comp.iteration_filter is not None:
            node = FI((comp.iteration_filter,), node, var=comp.var, iteration=True)
        inputs.append(node)
        comps.append(replace(comp, iteration_filter=None))
    node = P(tuple(comps), tuple(inputs), body.equivalence, body.within, body.strategy,
             qid=q.qid)
    where = tuple(c.expr for c in body.conjuncts if c.component is None)
    if where:
        node = FI(where, node)
    if q.transition is not None:
        return CX(q.transition.action, q.transition.target, q.contexts,
                  CW(q.contexts, node), qid=q.qid, key=q.output_fields)
    node = PR(q.output_type, q.output_fields, node, qid=q.qid)
    return CW(q.contexts, node)


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
        case AGG(size=size, slide=slide, group_by=gb, aggregates=aggs, qid=qid):
            items = ", ".join(f"{f}({ir.render(a) if a is not None else '*'}) AS {n}"
                              for n, f, a in aggs)
            win = f"TUMBLING {size}" if size == slide else f"SLIDING {size} EVERY {slide}"
            by = f" BY {', '.join(gb)}" if gb else ""
            return f"AGG {qid}[{items}{by} {win}]"
        case PR(event_type=t, fields=fs, qid=qid):
            return f"PR {qid}[{t}({', '.join(n + '=' + ir.render(e) for n, e in fs)})]"
        case SIT(name=name, condition=cond, min_duration=lo, max_duration=hi):
            bounds = "" if lo is None and hi is None else \
                f" BETWEEN {lo} AND {hi}" if lo is not None and hi is not None else \
                f" AT LEAST {lo}" if lo is not None else f" AT MOST {hi}"
            return f"SIT {name}[{ir.render(cond)}{bounds}]"
        case TP(constraints=cs, inputs=ins, within=w, emit=emit, qid=qid):
            if not cs:
                name = ins[0].name if isinstance(ins[0], SIT) else "?"
                text = f"{'END' if emit == 'end' else 'START'} OF {name}"
            else:
                text = " AND ".join(
                    f"{c.left} {'|'.join(r.upper() for r in c.relations)} {c.right}" for c in cs)
            return f"TP {qid}[{text}" + (f" WITHIN {w}" if w is not None else "") + "]"
        case CX():
            return _context_label(op)
    raise TypeError(op)


def _pattern_label(op: P) -> str:
    parts = []
    for c in op.components:
        t = c.types[0] if len(c.types) == 1 else f"ANY({', '.join(c.types)})"
        parts.append(("NOT " if c.negated else "") + t + ("+" if c.kleene else "") + f" {c.var}")
    text = f"P {op.qid}[SEQ({', '.join(parts)})" if len(op.components) > 1 else \
        f"P {op.qid}[{parts[0]}"
    if op.equivalence:
        text += f" [{', '.join(op.equivalence)}]"
    if op.within is not None:
        text += f" WITHIN {op.within}"
    if op.strategy != "skip_till_any_match":
        text += f" {op.strategy}"
    return text + "]"


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
