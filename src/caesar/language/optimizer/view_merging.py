"""View merging: a pattern that reads a derived type which is only a
filtered copy of another type reads that type through the view's filter
instead, so the view's events are never made, routed and stored.

A view here is `DERIVE V(e.a, e.b, ...) PATTERN T e WHERE <reads e only>`:
the only query deriving V, in every context, V leaving to no topic, each
field an attribute of `e` under its own name (so a reader's `x.a` means
the same on T), and V carrying the partition and context key attributes
exactly when T does (so both are routed to the same partitions). A V event
is then a T event that passed the filter, with the same timestamp (a
one-event match is detected at its event). Its readers must bind it
through a plain (not Kleene) component of a skip-till-any/next-match
pattern: there an event that fails a component's filter is never seen,
while contiguity strategies would see a T event V never had. Events of one
timestamp never follow each other in a sequence, so that T and V sort
differently among the types of one timestamp changes no match.

This is view merging of relational optimizers (a select-project view
folded into the query reading it), and SASE's predicate push-down
(section 4) carried across one derivation. In Linear Road, EnteringCar
(`SegmentEntry e WHERE e.lane != 4`) is read by SpeedBefore (twice) and
AccidentAhead, which then read SegmentEntry: one stage fewer per entry.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from caesar.language.algebra import CW, FI, PR, AlgebraPlan, Op, P, Stream, transform
from caesar.language.checked import CheckedModel
from caesar.plans import expr as ir

# Strategies under which a component's filter hides an event from the pattern.
_SKIPPING = ("skip_till_any_match", "skip_till_next_match")


@dataclass(frozen=True)
class _View:
    var: str  # the view's pattern variable
    conjuncts: tuple[ir.Expr, ...]  # its filter, reading `var` only
    source: Stream  # the stream of T it filters


def _chain_filters(op: Op, var: str) -> tuple[list[ir.Expr], Op] | None:
    """The conjuncts of the plain filters on `var` down to a stream."""
    conj: list[ir.Expr] = []
    while isinstance(op, FI):
        if op.iteration or op.var not in (None, var) or \
                any(ir.variables(c) - {var} for c in op.conjuncts):
            return None
        conj.extend(op.conjuncts)
        op = op.child
    return conj, op


def _view(stream: Stream, model: CheckedModel, everywhere: set[str]) -> _View | None:
    if len(stream.types) != 1 or len(stream.producers) != 1:
        return None
    declared = model.event_types.get(stream.types[0])
    if declared is None or declared.topic is not None or declared.output_topic is not None:
        return None
    producer = stream.producers[0]
    if not (isinstance(producer, CW) and set(producer.contexts) == everywhere
            and isinstance(producer.child, PR) and producer.child.output_rate is None):
        return None
    projection = producer.child
    found = _one_event(projection.child)
    if found is None:
        return None
    var, conjuncts, source = found
    base = model.event_types.get(source.types[0])
    if base is None:
        return None
    for name, expr in projection.fields:
        if expr != ir.Attr(var, name) or base.fields.get(name) != declared.fields.get(name):
            return None
    for key in (*model.partition_by, *model.context_key):
        if (key in declared.fields) != (key in base.fields):
            return None
    return _View(var, conjuncts, source)


def _one_event(op: Op) -> tuple[str, tuple[ir.Expr, ...], Stream] | None:
    """A pattern binding one plain event of one type, with filters reading
    only it: (its variable, the filters, the type's stream)."""
    above: list[ir.Expr] = []
    if isinstance(op, FI):  # a WHERE above the pattern (before push-down)
        if op.var is not None or op.iteration:
            return None
        above = list(op.conjuncts)
        op = op.child
    if not (isinstance(op, P) and len(op.components) == 1 and not op.alternatives
            and op.timeout is None and op.skip == "no_skip"):
        return None
    comp = op.components[0]
    if comp.negated or comp.kleene or len(comp.types) != 1:
        return None
    chained = _chain_filters(op.inputs[0], comp.var)
    if chained is None or not isinstance(chained[1], Stream) or chained[1].types != comp.types:
        return None
    if any(ir.variables(c) - {comp.var} for c in above):
        return None
    return comp.var, tuple(chained[0]) + tuple(above), chained[1]


def _rename(e: ir.Expr, old: str, new: str) -> ir.Expr:
    match e:
        case ir.Attr(var=v, name=n):
            return ir.Attr(new, n) if v == old else e
        case ir.Unary(op=op, operand=o):
            return ir.Unary(op, _rename(o, old, new))
        case ir.Binary(op=op, left=left, right=right):
            return ir.Binary(op, _rename(left, old, new), _rename(right, old, new))
        case ir.Call(func=f, args=args, udf=udf):
            return ir.Call(f, tuple(_rename(a, old, new) for a in args), udf)
    return e  # constants; a view's filter reads no Kleene variable (no Agg)


def _bottom(op: Op) -> Stream | None:
    while isinstance(op, FI):
        op = op.child
    return op if isinstance(op, Stream) else None


def _replace_bottom(op: Op, new: Op) -> Op:
    if isinstance(op, FI):
        return replace(op, child=_replace_bottom(op.child, new))
    return new


def merge_views(plan: AlgebraPlan) -> AlgebraPlan:
    model = plan.query_set.model
    everywhere = set(model.context_names())

    def merge(op: Op) -> Op:
        if not isinstance(op, P) or op.strategy not in _SKIPPING:
            return op
        comps = list(op.components)
        inputs = list(op.inputs)
        merged = False
        for i, (comp, inp) in enumerate(zip(op.components, op.inputs, strict=True)):
            stream = _bottom(inp)
            if comp.kleene or stream is None:
                continue
            view = _view(stream, model, everywhere)
            if view is None:
                continue
            source: Op = view.source
            if view.conjuncts:
                source = FI(tuple(_rename(c, view.var, comp.var) for c in view.conjuncts),
                            source, var=comp.var)
            inputs[i] = _replace_bottom(inp, source)
            comps[i] = replace(comp, types=view.source.types)
            merged = True
        if not merged:
            return op
        return replace(op, components=tuple(comps), inputs=tuple(inputs))

    return plan.with_roots((qid, transform(root, merge)) for qid, root in plan.roots)
