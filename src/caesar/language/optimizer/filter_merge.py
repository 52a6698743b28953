"""Filter merge: adjacent filters on the same stream become one filter with
the conjunction of their predicates (duplicates dropped). Kleene iteration
filters only merge with each other: they hold per iterated event."""

from __future__ import annotations

from caesar.language.algebra import FI, AlgebraPlan, Op, transform


def _merge(op: Op) -> Op:
    if isinstance(op, FI) and isinstance(op.child, FI) and op.child.var == op.var \
            and op.child.iteration == op.iteration:
        inner = op.child
        conjuncts = tuple(dict.fromkeys(inner.conjuncts + op.conjuncts))
        return FI(conjuncts, inner.child, var=op.var, iteration=op.iteration)
    return op


def merge_filters(plan: AlgebraPlan) -> AlgebraPlan:
    return plan.with_roots((qid, transform(root, _merge)) for qid, root in plan.roots)
