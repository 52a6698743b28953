"""A TemporalPlan -> the tables the Cython runner (core.pyx) works from:
situations by index with their source types and duration bounds, the
aggregates the output reads (one accumulator each), constraint masks by
ordered pair, and the join order the matcher starts from for each trigger
situation (section 5.4: cost model with the paper's initial selectivity
estimates, Table 3; the runner adapts it to measured statistics)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from caesar.errors import PlanError
from caesar.plans.expr import Agg, Attr, Expr, nodes
from caesar.plans.temporal import INVERSE, TemporalPlan, mask_of

MAX_SITUATIONS = 16
# func codes (keep in sync with core.pyx)
AGG_CODES = {"count": 0, "sum": 1, "avg": 2, "min": 3, "max": 4, "first": 5, "last": 6}
NONE = -(2**63)  # "no value" in int64 tables (no bound, not running, not visible)

# Table 3 of the paper: initial selectivity estimates (mirror relations equal).
SELECTIVITY = {
    "before": 0.445, "after": 0.445, "during": 0.03, "contains": 0.03,
    "overlaps": 0.01, "overlapped_by": 0.01, "starts": 0.01, "started_by": 0.01,
    "finishes": 0.0049, "finished_by": 0.0049, "meets": 0.0049, "met_by": 0.0049,
    "equals": 0.0006,
}


@dataclass(frozen=True)
class AggSpec:
    situation: int
    func: str
    arg: Expr | None
    out_type: str  # "int" | "float" | "string" | "bool"


@dataclass
class CompiledPlan:
    plan: TemporalPlan
    names: list[str]
    index: dict[str, int]
    sources: list[str]  # per situation: its event type
    min_duration: list[int]  # NONE = no bound
    max_duration: list[int]
    aggs: list[AggSpec]
    agg_of: dict[Agg, int]
    # mask[i][j]: relations (bits of plans.temporal.ALLEN) allowed for i R j, 0 = unconstrained
    mask: list[list[int]]
    within: int  # NONE = no WITHIN
    emit_end: bool
    orders: list[list[int]] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.names)


def _arg_type(arg: Expr | None, schema: dict[str, str]) -> str:
    if isinstance(arg, Attr):
        return schema.get(arg.name, "float")
    return "float"


def compile_plan(plan: TemporalPlan) -> CompiledPlan:
    _check_shape(plan)
    names = [s.name for s in plan.situations]
    index = {n: i for i, n in enumerate(names)}
    if len(index) != len(names):
        raise PlanError(f"temporal plan {plan.plan_id}: duplicate situation names {names}")
    n = len(names)
    mask = _relation_masks(plan, index)
    nodes, aggs = _aggregates(plan, index)
    compiled = CompiledPlan(
        plan=plan, names=names, index=index, sources=[s.source_type for s in plan.situations],
        min_duration=[s.min_duration if s.min_duration is not None else NONE
                      for s in plan.situations],
        max_duration=[s.max_duration if s.max_duration is not None else NONE
                      for s in plan.situations],
        aggs=aggs, agg_of={node: k for k, node in enumerate(nodes)}, mask=mask,
        within=plan.within if plan.within is not None else NONE, emit_end=plan.emit == "end")
    compiled.orders = [best_order(compiled, k, [1.0] * n, default_selectivity(compiled))
                       for k in range(n)]
    return compiled


def _check_shape(plan: TemporalPlan) -> None:
    """What the runner supports: 1 to MAX_SITUATIONS situations, ON END OF on
    one, a WITHIN bound on several."""
    if not plan.situations:
        raise PlanError(f"temporal plan {plan.plan_id} has no situation")
    if len(plan.situations) > MAX_SITUATIONS:
        raise PlanError(f"temporal plan {plan.plan_id}: at most {MAX_SITUATIONS} situations")
    if plan.emit == "end" and len(plan.situations) != 1:
        raise PlanError(f"temporal plan {plan.plan_id}: ON END OF takes one situation")
    if len(plan.situations) > 1 and plan.within is None:
        raise PlanError(f"temporal plan {plan.plan_id}: several situations need WITHIN")


def _relation_masks(plan: TemporalPlan, index: dict[str, int]) -> list[list[int]]:
    """mask[i][j]: the relations allowed between situations i and j (0: no
    constraint); constraints on one pair intersect, each sets its inverse."""
    n = len(index)
    mask = [[0] * n for _ in range(n)]
    for c in plan.constraints:
        i, j = index[c.left], index[c.right]
        m = mask_of(c.relations)
        inv = mask_of(tuple(INVERSE[r] for r in c.relations))
        mask[i][j] = m if mask[i][j] == 0 else mask[i][j] & m
        mask[j][i] = inv if mask[j][i] == 0 else mask[j][i] & inv
        if mask[i][j] == 0:
            raise PlanError(f"temporal plan {plan.plan_id}: the constraints between {c.left} "
                            f"and {c.right} allow no relation")
    return mask


def _aggregates(plan: TemporalPlan, index: dict[str, int]) -> tuple[list[Agg], list[AggSpec]]:
    """The distinct aggregate nodes of the output fields and their specs."""
    found: list[Agg] = []
    if plan.output is not None:
        for f in plan.output.fields:
            for node in nodes(f.expr, into_aggregates=False):
                if isinstance(node, Agg) and node not in found:
                    found.append(node)
    aggs = []
    for node in found:
        src = plan.situations[index[node.var]].source_type
        typ = _arg_type(node.arg, plan.schemas.get(src, {}))
        aggs.append(AggSpec(index[node.var], node.func, node.arg, typ))
    return found, aggs


def default_selectivity(cp: CompiledPlan) -> list[list[float]]:
    """Selectivity of each pair's constraint: the sum over its relations (eq. 4)."""
    out = [[1.0] * cp.n for _ in range(cp.n)]
    for i in range(cp.n):
        for j in range(cp.n):
            m = cp.mask[i][j]
            if m:
                out[i][j] = min(1.0, sum(SELECTIVITY[r] for r, s in SELECTIVITY.items()
                                         if m >> _bit(r) & 1))
    return out


def _bit(relation: str) -> int:
    from caesar.plans.temporal import BIT

    return BIT[relation]


def order_cost(cp: CompiledPlan, order: list[int], sizes: list[float],
               sel: list[list[float]]) -> float | None:
    """Eq. 2-3: sum of the estimated intermediate results of a join order
    starting from one trigger situation; None if a step has no constraint
    to the situations before it (a cross product)."""
    rows = 1.0
    cost = 0.0
    for step in range(1, len(order)):
        j = order[step]
        s = 1.0
        linked = False
        for i in order[:step]:
            if cp.mask[i][j]:
                linked = True
                s *= sel[i][j]
        if not linked:
            return None
        rows = rows * max(sizes[j], 1e-9) * s
        cost += rows
    return cost


def best_order(cp: CompiledPlan, trigger: int, sizes: list[float],
               sel: list[list[float]]) -> list[int]:
    """The cheapest join order that starts with `trigger` (all permutations of
    the others are enumerated when they are few, greedily otherwise)."""
    others = [j for j in range(cp.n) if j != trigger]
    if len(others) <= 6:
        best: tuple[float, list[int]] | None = None
        for perm in itertools.permutations(others):
            order = [trigger, *perm]
            cost = order_cost(cp, order, sizes, sel)
            if cost is not None and (best is None or cost < best[0]):
                best = (cost, order)
        if best is not None:
            return best[1]
    order = [trigger]
    rest = set(others)
    while rest:
        def step_cost(j: int) -> float:
            linked = [sel[i][j] for i in order if cp.mask[i][j]]
            if not linked:
                return float("inf")
            s = 1.0
            for x in linked:
                s *= x
            return max(sizes[j], 1e-9) * s

        nxt = min(rest, key=step_cost)
        order.append(nxt)
        rest.remove(nxt)
    return order
