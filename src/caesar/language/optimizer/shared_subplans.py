"""Shared sub-plans: identical query plans that run in contexts of one
grouped window (or in the same contexts) are computed once. Plans are
compared with their context windows erased; the kept plan's context windows
become the union, and the dropped query is recorded as computed by the kept
one. Applies to root plans and to the producers of a derived stream.

Sharing is only sound for plans whose contexts can hold together or are
identical: then the grouped window runs one instance (Listing 1, lines
20-22). Plans in contexts that never overlap stay separate, because each
context window drops its partial matches when it ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from caesar.language.algebra import (
    CW,
    PR,
    AlgebraPlan,
    Op,
    P,
    Stream,
    children,
    transform,
    walk,
    with_children,
)


def _erase(op: Op) -> Op:
    return transform(op, lambda n: replace(n, contexts=()) if isinstance(n, CW) else n)


def _own(op: Op) -> Iterator[Op]:
    """The operators of this query itself: no descent into the plans of the
    streams it reads (those are other queries, with their own windows)."""
    yield op
    if not isinstance(op, Stream):
        for k in children(op):
            yield from _own(k)


def _contexts(op: Op) -> frozenset[str]:
    return frozenset(c for n in _own(op) if isinstance(n, CW) for c in n.contexts)


def _widen(op: Op, ctxs: frozenset[str], order: dict[str, int]) -> Op:
    wide = tuple(sorted(ctxs, key=order.__getitem__))

    def visit(n: Op) -> Op:
        if isinstance(n, CW):
            return replace(n, contexts=wide, child=visit(n.child))
        if isinstance(n, Stream):
            return n
        return with_children(n, tuple(visit(k) for k in children(n)))

    return visit(op)


def _qid(op: Op) -> str:
    for n in walk(op):
        if isinstance(n, P | PR) or hasattr(n, "qid"):
            qid = getattr(n, "qid", "")
            if qid:
                return qid
    return ""


def share_subplans(plan: AlgebraPlan) -> AlgebraPlan:
    order = {c.name: i for i, c in enumerate(plan.query_set.model.contexts)}
    groups = [frozenset(g.contexts) for g in plan.groups]
    shared: list[tuple[str, str]] = list(plan.shared)

    def together(a: frozenset[str], b: frozenset[str]) -> bool:
        return a == b or any(g & a and g & b for g in groups)

    def dedup(ops: list[tuple[str, Op]]) -> list[tuple[str, Op]]:
        kept: list[tuple[str, Op, Op, frozenset[str]]] = []
        for qid, op in ops:
            key, ctxs = _erase(op), _contexts(op)
            for i, (kqid, kop, kkey, kctxs) in enumerate(kept):
                if kkey == key and together(kctxs, ctxs):
                    union = kctxs | ctxs
                    kept[i] = (kqid, _widen(kop, union, order), kkey, union)
                    if (qid, kqid) not in shared:
                        shared.append((qid, kqid))
                    break
            else:
                kept.append((qid, op, key, ctxs))
        return [(q, o) for q, o, _, _ in kept]

    def visit(op: Op) -> Op:
        if isinstance(op, Stream) and len(op.producers) > 1:
            producers = dedup([(_qid(p), p) for p in op.producers])
            return Stream(op.types, tuple(p for _, p in producers))
        return op

    roots = [(qid, transform(root, visit)) for qid, root in plan.roots]
    roots = dedup(roots)
    return replace(plan, roots=tuple(roots), shared=tuple(shared))
