"""Context window push-down (CAESAR paper section 5.2, Theorem 1).

Every CW operator moves to the bottom of its combined plan, directly above
the streams (input streams, and derived streams a consumer reads), so no
operator of the plan runs while none of its contexts holds. A producer nested
under a consumer gets the consumer's contexts intersected with its own when
it is stateless (one event in, one out): a filter declared for every context
that only feeds a congestion query now runs only during congestion. A
stateful producer (sequence, negation, Kleene, aggregation) keeps its own
contexts, because its matches may start before the consumer's context does
(an accident detected in `clear` feeds warnings in `accident`); its output
still reaches the consumer only inside the consumer's window. A producer
whose contexts never meet its consumer's is dropped from that consumer's
plan (its events could never reach it).
"""

from __future__ import annotations

from caesar.language.algebra import (
    AGG,
    CW,
    TP,
    AlgebraPlan,
    Op,
    P,
    Stream,
    children,
    with_children,
)


def _own_contexts(op: Op) -> frozenset[str]:
    """Contexts of the topmost context window of a (not yet pushed) plan."""
    while not isinstance(op, CW):
        kids = children(op)
        if len(kids) != 1:
            return frozenset()
        op = kids[0]
    return frozenset(op.contexts)


def _stateless(op: Op) -> bool:
    """A producer whose result for an event depends on that event alone (one
    positive, non-Kleene component): narrowing its window cannot change what
    its consumer sees. A stateful one (sequence, negation, Kleene,
    aggregation) may combine events from before the consumer's context
    started, so it keeps its own contexts."""
    while not isinstance(op, P | AGG | TP):  # TP: situations span many events
        kids = children(op)
        if len(kids) != 1:
            return False
        op = kids[0]
    return isinstance(op, P) and len(op.components) == 1 \
        and not op.components[0].negated and not op.components[0].kleene


def push_down_context_windows(plan: AlgebraPlan) -> AlgebraPlan:
    order = {c.name: i for i, c in enumerate(plan.query_set.model.contexts)}

    def push(op: Op, ctx: frozenset[str] | None) -> Op:
        if isinstance(op, CW):
            here = frozenset(op.contexts)
            return push(op.child, here if ctx is None else ctx & here)
        if isinstance(op, Stream):
            if op.producers:
                # The consumer keeps a window on the derived stream too, and the
                # producers get the same (narrowed) window on their own inputs.
                # A producer whose contexts never meet the consumer's cannot
                # feed it: it is dropped from this stream.
                live = [p for p in op.producers
                        if ctx is None or ctx & _own_contexts(p) or not _own_contexts(p)]
                op = Stream(op.types, tuple(push(p, ctx if _stateless(p) else None)
                                            for p in live))
            if ctx is None:
                return op
            return CW(tuple(sorted(ctx, key=order.__getitem__)), op)
        return with_children(op, tuple(push(k, ctx) for k in children(op)))

    return plan.with_roots((qid, push(root, None)) for qid, root in plan.roots)
