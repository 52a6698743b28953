"""Filter push-down: a WHERE conjunct that reads one non-Kleene pattern
variable (and no aggregate) moves below the pattern onto that variable's
input stream, so events that can never bind the variable are dropped before
the pattern sees them (SASE section 4: predicate push-down). With AND/OR
alternatives this is the same condition: in an alternative that does not
bind the variable it does not apply (PatternPlan.expanded)."""

from __future__ import annotations

from dataclasses import replace

from caesar.language.algebra import FI, AlgebraPlan, Op, P, transform
from caesar.plans import expr as ir


def _has_agg(e: ir.Expr) -> bool:
    match e:
        case ir.Agg():
            return True
        case ir.Unary(operand=o):
            return _has_agg(o)
        case ir.Binary(left=left, right=right):
            return _has_agg(left) or _has_agg(right)
        case ir.Call(args=args):
            return any(_has_agg(a) for a in args)
    return False


def _push(op: Op) -> Op:
    if not (isinstance(op, FI) and op.var is None and isinstance(op.child, P)):
        return op
    pattern = op.child
    index = {c.var: i for i, c in enumerate(pattern.components)}
    moved: dict[int, list[ir.Expr]] = {}
    kept: list[ir.Expr] = []
    for conj in op.conjuncts:
        read = ir.variables(conj)
        if len(read) == 1 and not _has_agg(conj):
            (var,) = read
            i = index[var]
            if not pattern.components[i].kleene:
                moved.setdefault(i, []).append(conj)
                continue
        kept.append(conj)
    if not moved:
        return op
    inputs = list(pattern.inputs)
    for i, conjs in moved.items():
        inputs[i] = FI(tuple(conjs), inputs[i], var=pattern.components[i].var)
    new_pattern = replace(pattern, inputs=tuple(inputs))
    return FI(tuple(kept), new_pattern) if kept else new_pattern


def push_down_filters(plan: AlgebraPlan) -> AlgebraPlan:
    return plan.with_roots((qid, transform(root, _push)) for qid, root in plan.roots)
