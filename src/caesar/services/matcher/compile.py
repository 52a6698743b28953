"""Compiles a PatternPlan into the flat tables the Cython engine runs.

Expressions become postfix instruction arrays (4 int32 per instruction) over
a constant table; nothing is ever eval'ed. Conjuncts are split SASE-style:
- pushed-down filters: read one non-Kleene component only (checked at scan,
  before an event enters a stack);
- per-level checks: checked in sequence construction as soon as every
  component they read is bound (a Kleene component counts as bound once it
  is closed, i.e. when the next component binds or the match completes);
- negation checks: read one negated variable (plus positives), applied to the
  candidate negative events.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from caesar.errors import PlanError
from caesar.plans.expr import Agg, Attr, Binary, Call, Const, Expr, Unary, nodes, render, variables
from caesar.plans.functions import Function
from caesar.plans.pattern import PatternPlan
from caesar.services.matcher.expr_eval import MISSING, aggregate, failures, holds
from caesar.services.matcher.reference import validate_plan

MAX_COMPONENTS = 16

# opcodes (keep in sync with typedefs.pxd)
OP_CONST, OP_LOAD, OP_NEG, OP_NOT = 0, 1, 2, 3
OP_ARITH = {"+": 4, "-": 5, "*": 6, "/": 7, "%": 8}
OP_CMP = {"=": 9, "!=": 10, "<": 11, "<=": 12, ">": 13, ">=": 14}
OP_AND, OP_OR, OP_CALL, OP_AGG = 15, 16, 17, 18
OP_UDF = 19  # a user-defined function: (OP_UDF, index in `functions`, argc, 0)
OP_BINARY = {**OP_ARITH, **OP_CMP, "AND": OP_AND, "OR": OP_OR}
CALLS = {"abs": 0, "floor": 1, "ceil": 2, "least": 3, "greatest": 4}
AGGS = {"count": 0, "count_distinct": 1, "sum": 2, "avg": 3, "min": 4, "max": 5,
        "first": 6, "last": 7}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# value kinds
K_MISSING, K_INT, K_FLOAT, K_STR, K_BOOL = 0, 1, 2, 3, 4
KIND_OF_TYPE = {"int": K_INT, "float": K_FLOAT, "string": K_STR, "bool": K_BOOL}

STRATEGY_CODE = {"skip_till_any_match": 0, "skip_till_next_match": 1, "strict_contiguity": 2,
                 "partition_contiguity": 3}
SKIP_CODE = {"no_skip": 0, "to_next": 1, "past_last": 2, "to_first": 3, "to_last": 4}


@dataclass
class CompInfo:
    var: str
    types: tuple[str, ...]
    negated: bool
    kleene: bool
    layout: tuple[str, ...]  # attribute names stored per event of this component
    # every attribute the plan knows of its types: the layout of engine
    # states written before layouts were per component (restored by name)
    full_layout: tuple[str, ...] = ()
    filters: list[int] = field(default_factory=list)  # pushed-down program ids
    iter_filter: int = -1
    neg_checks: list[int] = field(default_factory=list)
    equiv_cols: list[int] = field(default_factory=list)  # layout col per equivalence attr
    # pushed `attr = const` usable by the constant index: (attr, const)
    const_eq: tuple[str, int | float | str] | None = None
    filter_key: tuple = ()  # equal keys = same pushed filters on the same layout
    prev_pos: int = -1  # negated: neighbouring positive components (positive order)
    next_pos: int = -1
    min_count: int = 1  # quantifier bounds (max 0: unbounded)
    max_count: int = 1
    greedy: bool = False
    # middle negation whose event ends, for good, every run waiting at it
    # (_kills_waiting): such runs are dropped, its events kept only while one waits
    kills_waiting: bool = False
    # middle negation whose events need an earlier instance of this component
    # that passes the negation's checks with them, else they block nothing
    # (_gate): -1, or the component index
    gate: int = -1


@dataclass
class CompiledPlan:
    plan: PatternPlan
    strategy: int
    within: int  # -1: no window
    comps: list[CompInfo]
    pos: list[int]  # component indices of the positive components, in order
    code: np.ndarray  # int32 [n, 4]
    const_vals: np.ndarray  # int64: 8-byte value cells (typedefs.pxd), read by kind
    const_kinds: np.ndarray  # uint8
    const_strings: list[tuple[int, str]]  # (const index, text): interned per pool
    prog_start: np.ndarray  # int32
    prog_len: np.ndarray  # int32
    checks_at: list[list[int]]  # by positive position
    outputs: list[tuple[str, int]]
    equivalence: tuple[str, ...]
    has_end_negation: bool
    alt: int = 0  # which alternative of the plan (AND/OR) this is
    # one Part per partition, equivalence checked while matching (strict
    # contiguity, after-match skip, [attr] EXCEPT NOT) instead of PAIS keys
    keyless: bool = False
    skip: int = 0  # SKIP_CODE
    skip_pos: int = -1  # positive rank of the skip variable (to_first / to_last)
    timeout_outputs: list[tuple[str, int]] = field(default_factory=list)
    dead: bool = False  # a WHERE conjunct is constantly false: nothing ever starts
    functions: list[Function] = field(default_factory=list)  # OP_UDF's table
    share_prefix: int = 0  # leading components another plan may share (share_prefix())
    # an equal run (equal_run()): the shared layout's columns that must be
    # equal from one event to the next; () for every other plan
    equal_run: tuple[int, ...] = ()


class _Builder:
    def __init__(self, comp_index: dict[str, int], comps: list[CompInfo],
                 absent: set[str] | frozenset[str] = frozenset()) -> None:
        self.code: list[tuple[int, int, int, int]] = []
        self.progs: list[tuple[int, int]] = []
        self.consts: list[tuple[int, int]] = []  # (8-byte cell as int64, kind)
        self.strings: list[tuple[int, str]] = []
        self.functions: list[Function] = []  # user-defined functions OP_UDF calls
        self.comp_index = comp_index
        self.comps = comps
        self.absent = absent  # variables of other alternatives: bound to nothing here

    def const(self, value: object) -> int:
        if isinstance(value, bool):
            entry = (int(value), K_BOOL)
        elif isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                raise PlanError(f"integer constant {value} does not fit in 64 bits")
            entry = (value, K_INT)
        elif isinstance(value, float):
            entry = (int(np.float64(value).view(np.int64)), K_FLOAT)  # the double's bits
        elif isinstance(value, str):
            self.consts.append((0, K_STR))
            self.strings.append((len(self.consts) - 1, value))
            return len(self.consts) - 1
        elif value is None:
            entry = (0, K_MISSING)
        else:
            raise PlanError(f"unsupported constant {value!r}")
        self.consts.append(entry)
        return len(self.consts) - 1

    def program(self, expr: Expr) -> int:
        body: list[tuple[int, int, int, int]] = []
        self._emit(expr, body)
        start = len(self.code)
        self.code.extend(body)
        self.progs.append((start, len(body)))
        return len(self.progs) - 1

    def _emit(self, expr: Expr, out: list[tuple[int, int, int, int]]) -> None:
        match expr:
            case Const(value=value):
                out.append((OP_CONST, self.const(value), 0, 0))
            case Attr(var=var, name=name):
                out.append(self._load(var, name))
            case Unary(op=op, operand=operand):
                self._emit(operand, out)
                out.append((OP_NOT if op == "NOT" else OP_NEG, 0, 0, 0))
            case Binary(op=op, left=left, right=right):
                self._emit(left, out)
                self._emit(right, out)
                out.append((OP_BINARY[op], 0, 0, 0))
            case Call(func=func, args=args, udf=udf):
                for arg in args:
                    self._emit(arg, out)
                if udf is None:
                    out.append((OP_CALL, CALLS[func], len(args), 0))
                else:
                    if udf not in self.functions:
                        self.functions.append(udf)
                    out.append((OP_UDF, self.functions.index(udf), len(args), 0))
            case Agg(func=func, var=var, arg=arg):
                out.append(self._agg(func, var, arg))
            case _:
                raise PlanError(f"not an expression: {expr!r}")

    def _load(self, var: str | None, name: str) -> tuple[int, int, int, int]:
        ci = self.comp_index.get(var) if var is not None else None
        if ci is None or name not in self.comps[ci].layout:
            return (OP_CONST, self.const(None), 0, 0)
        return (OP_LOAD, ci, self.comps[ci].layout.index(name), 0)

    def _agg(self, func: str, var: str, arg: Expr | None) -> tuple[int, int, int, int]:
        ci = self.comp_index.get(var)
        if ci is None and var in self.absent:  # folds over no events
            return (OP_CONST, self.const(0 if func in ("count", "count_distinct") else None), 0, 0)
        if ci is None or not self.comps[ci].kleene:
            raise PlanError(f"aggregate over {var}, which is not a Kleene variable")
        sub = -1 if arg is None else self.program(arg)
        return (OP_AGG, AGGS[func], ci, sub)


def _layout(plan: PatternPlan, types: tuple[str, ...]) -> tuple[str, ...]:
    """Every attribute the plan knows of the types (a stored row's columns
    before per-component layouts: engine states written then have these)."""
    names: set[str] = set()
    for t in types:
        names.update(plan.schemas.get(t, {}))
    return tuple(sorted(names))


def _read_attrs(plan: PatternPlan) -> dict[str, set[str]]:
    """Variable -> the attributes some expression of the plan reads of it
    (conditions, outputs, timeout outputs, iteration filters, aggregates)."""
    exprs = list(plan.where)
    for out in (plan.output, plan.timeout):
        if out is not None:
            exprs += [f.expr for f in out.fields]
    exprs += [c.iteration_filter for c in plan.components if c.iteration_filter is not None]
    found: dict[str, set[str]] = {}
    for expr in exprs:
        for node in nodes(expr):
            if isinstance(node, Attr) and node.var is not None:
                found.setdefault(node.var, set()).add(node.name)
    return found


def share_prefix(plan: PatternPlan) -> int:
    """How many leading components another plan may share (the engine's
    _plan_sharing reads it from CompiledPlan.share_prefix): the leading plain
    positive ones, but the last positive, of a skip_till_any_match plan.
    Sharing needs equal layouts, so these keep every attribute whatever each
    plan reads of them."""
    if plan.strategy != "skip_till_any_match":
        return 0
    pos = [i for i, c in enumerate(plan.components) if not c.negated]
    d = 0
    while d < len(pos) - 1 and pos[d] == d and not plan.components[d].kleene:
        d += 1
    return d


# Off only in tests, which compare equal-run plans on the general path.
EQUAL_RUNS = True


def equal_run(plan: PatternPlan) -> tuple[str, ...] | None:
    """The attributes X when the plan only asks for n consecutive events of
    one type with equal X: `SEQ(T a, T b, ...) WHERE [key] AND b.x = a.x AND
    c.x = b.x ...` under partition contiguity (LR's StoppedCar: four reports
    at one lane and position), nothing else (no negation, Kleene, filter,
    skip or timeout). Its runs are then the suffixes of the key's latest
    stretch of equal events, and a match is the last n of them: the engine
    keeps that stretch in one stack (engine._equal_run_step) instead of a
    run list per event. None for any other plan."""
    comps = plan.components
    if not EQUAL_RUNS or plan.strategy != "partition_contiguity" or plan.skip != "no_skip" \
            or plan.timeout is not None or plan.alternatives or len(comps) < 2:
        return None
    if any(c.negated or c.kleene or c.iteration_filter is not None or c.types != comps[0].types
           for c in comps):
        return None
    rank = {c.var: i for i, c in enumerate(comps)}
    pairs: dict[int, set[str]] = {}
    for conj in plan.where:
        if not (isinstance(conj, Binary) and conj.op == "=" and isinstance(conj.left, Attr)
                and isinstance(conj.right, Attr) and conj.left.name == conj.right.name
                and conj.left.var in rank and conj.right.var in rank):
            return None
        i, j = sorted((rank[conj.left.var], rank[conj.right.var]))
        if j != i + 1:
            return None
        pairs.setdefault(i, set()).add(conj.left.name)
    same = pairs.get(0)
    if not same or len(same) > 8 or sorted(pairs) != list(range(len(comps) - 1)) \
            or any(x != same for x in pairs.values()):
        return None
    return tuple(sorted(same))


def _comp_layout(plan: PatternPlan, ci: int, read: dict[str, set[str]],
                 shared: int) -> tuple[str, ...]:
    """The columns a component's stored rows keep: what the plan reads of its
    variable and the `[attr]` key, nothing else (StoppedCar's first three
    reports are only counted: they kept all seven attributes, a third of
    the matcher's state). A Kleene component keeps them all (its iteration
    filter may read earlier iterations), and so do the `shared` leading
    ones, which another plan may share."""
    comp = plan.components[ci]
    full = _layout(plan, comp.types)
    if comp.kleene or ci < shared:
        return full
    keep = read.get(comp.var, set()) | set(plan.equivalence)
    return tuple(a for a in full if a in keep)


def _const_eq(expr: Expr, var: str) -> tuple[str, int | float | str] | None:
    if isinstance(expr, Binary) and expr.op == "=":
        for a, b in ((expr.left, expr.right), (expr.right, expr.left)):
            if isinstance(a, Attr) and a.var == var and isinstance(b, Const) \
                    and not isinstance(b.value, bool):
                return (a.name, b.value)
    return None


def _has_agg(expr: Expr) -> bool:
    match expr:
        case Agg():
            return True
        case Unary(operand=o):
            return _has_agg(o)
        case Binary(left=left, right=right):
            return _has_agg(left) or _has_agg(right)
        case Call(args=args):
            return any(_has_agg(a) for a in args)
    return False


def _place_conjunct(conj: Expr, b: _Builder, comps: list[CompInfo], comp_index: dict[str, int],
                    pos_rank: dict[int, int], checks_at: list[list[int]],
                    pushed: list[list[Expr]]) -> None:
    """Where a WHERE conjunct is checked: as a filter on the one component
    it reads (pushed down), as a check of a negated component's candidates,
    or once the last positive component it reads is bound."""
    used = variables(conj)
    negs = [comp_index[v] for v in used if v in comp_index and comps[comp_index[v]].negated]
    poss = [comp_index[v] for v in used if v in comp_index and not comps[comp_index[v]].negated]
    prog = b.program(conj)
    if negs and (poss or _has_agg(conj)):
        comps[negs[0]].neg_checks.append(prog)
    elif negs or (len(poss) == 1 and not comps[poss[0]].kleene and not _has_agg(conj)):
        ci = negs[0] if negs else poss[0]
        comps[ci].filters.append(prog)
        pushed[ci].append(conj)
        comps[ci].const_eq = comps[ci].const_eq or _const_eq(conj, comps[ci].var)
    else:
        checks_at[max((pos_rank[ci] for ci in poss), default=0)].append(prog)


def compile_plans(plan: PatternPlan, shareable: bool = True) -> list[CompiledPlan]:
    """One CompiledPlan per alternative of `plan` (AND/OR), all under its id.
    `shareable`: its leading components keep every attribute, so that
    another plan may share them (share_prefix); the engine compiles a plan
    that shares with none without (CythonEngine.__init__)."""
    validate_plan(plan)
    subs = plan.expanded()
    return [_compile(sub, plan.variables(), alt, shareable) for alt, sub in enumerate(subs)]


def compile_plan(plan: PatternPlan, shareable: bool = True) -> CompiledPlan:
    """A plan without alternatives."""
    validate_plan(plan)
    if plan.alternatives:
        raise PlanError(f"plan {plan.plan_id}: has alternatives, use compile_plans")
    return _compile(plan, plan.variables(), 0, shareable)


def _link_components(plan: PatternPlan, comps: list[CompInfo], pos: list[int],
                     b: _Builder) -> None:
    """[attr] columns, a negation's neighbouring positive components, and
    Kleene iteration filters."""
    for ci, comp in enumerate(comps):
        comp.equiv_cols = [comp.layout.index(a) if a in comp.layout else -1
                           for a in plan.equivalence]
        if comp.negated:
            before = [k for k, p in enumerate(pos) if p < ci]
            after = [k for k, p in enumerate(pos) if p > ci]
            comp.prev_pos = before[-1] if before else -1
            comp.next_pos = after[0] if after else -1
        iteration_filter = plan.components[ci].iteration_filter
        if comp.kleene and iteration_filter is not None:
            comp.iter_filter = b.program(iteration_filter)


def _compile(plan: PatternPlan, all_vars: frozenset[str], alt: int,
             shareable: bool = True) -> CompiledPlan:
    if len(plan.components) > MAX_COMPONENTS:
        raise PlanError(f"plan {plan.plan_id}: more than {MAX_COMPONENTS} components")
    read = _read_attrs(plan)
    shared = share_prefix(plan) if shareable else 0
    layouts = [_comp_layout(plan, ci, read, shared) for ci in range(len(plan.components))]
    run_attrs = equal_run(plan)
    if run_attrs is not None:
        # one stack holds the stretch for every component: one layout
        union = set().union(*layouts)
        layouts = [tuple(a for a in _layout(plan, plan.components[0].types) if a in union)
                   ] * len(layouts)
    comps = [CompInfo(c.var, c.types, c.negated, c.kleene, layouts[ci],
                      full_layout=_layout(plan, c.types),
                      min_count=c.min_count if c.kleene else 1,
                      max_count=(c.max_count or 0) if c.kleene else 1, greedy=c.greedy)
             for ci, c in enumerate(plan.components)]
    comp_index = {c.var: i for i, c in enumerate(plan.components)}
    pos = [i for i, c in enumerate(plan.components) if not c.negated]
    pos_rank = {ci: k for k, ci in enumerate(pos)}
    b = _Builder(comp_index, comps, all_vars - set(comp_index))
    checks_at: list[list[int]] = [[] for _ in pos]
    pushed: list[list[Expr]] = [[] for _ in comps]

    _link_components(plan, comps, pos, b)
    dead = False
    absent = all_vars - set(comp_index)
    for conj in plan.where:
        if variables(conj) <= absent:
            # reads no variable this alternative binds: a constant, decided
            # here (the reference checks it as soon as a match starts)
            dead = dead or not holds(conj, lambda var, name: MISSING,
                                     lambda node: aggregate(node.func, []))
            continue
        _place_conjunct(conj, b, comps, comp_index, pos_rank, checks_at, pushed)
    # a constant conjunct calling a user-defined function that fails is
    # folded as missing (false) here; the failure is no engine's to report
    failures.take()

    outputs: list[tuple[str, int]] = []
    if plan.output is not None:
        outputs = [(f.name, b.program(f.expr)) for f in plan.output.fields]
    timeout_outputs: list[tuple[str, int]] = []
    if plan.timeout is not None:
        timeout_outputs = [(f.name, b.program(f.expr)) for f in plan.timeout.fields]
    pos_vars = [plan.components[ci].var for ci in pos]

    code = np.array(b.code if b.code else [(0, 0, 0, 0)], dtype=np.int32).reshape(-1, 4)
    has_end = any(c.negated and c.next_pos == -1 for c in comps)
    cp = CompiledPlan(
        plan=plan,
        strategy=STRATEGY_CODE[plan.strategy],
        within=-1 if plan.within is None else int(plan.within),
        comps=comps,
        pos=pos,
        code=np.ascontiguousarray(code),
        const_vals=np.array([v for v, _ in b.consts] or [0], dtype=np.int64),
        const_kinds=np.array([k for _, k in b.consts] or [0], dtype=np.uint8),
        const_strings=b.strings,
        prog_start=np.array([s for s, _ in b.progs] or [0], dtype=np.int32),
        prog_len=np.array([n for _, n in b.progs] or [0], dtype=np.int32),
        checks_at=checks_at,
        outputs=outputs,
        equivalence=tuple(plan.equivalence),
        has_end_negation=has_end,
        alt=alt,
        share_prefix=shared,
        keyless=(plan.strategy == "strict_contiguity" or plan.skip != "no_skip"
                 or (not plan.equivalence_negated and bool(plan.equivalence)
                     and bool(plan.negated))),
        skip=SKIP_CODE[plan.skip],
        skip_pos=pos_vars.index(plan.skip_var) if plan.skip_var in pos_vars else -1,
        timeout_outputs=timeout_outputs,
        dead=dead,
        functions=b.functions,
        equal_run=() if run_attrs is None else tuple(layouts[0].index(a) for a in run_attrs),
    )
    for ci, comp in enumerate(comps):
        comp.kills_waiting = _kills_waiting(cp, ci, absent)
        comp.gate = _gate(cp, ci, absent)
    for ci, comp in enumerate(comps):
        # canonical text of the pushed filters, the variable renamed, so that
        # identical filters of different plans are evaluated once per event
        # (shared filter groups, the idea of Cayuga's FR index)
        texts = sorted(render(_rename(e, comp.var)) for e in pushed[ci])
        comp.filter_key = (comp.layout, tuple(texts))
    return cp


def _kills_waiting(cp: CompiledPlan, ci: int, absent: frozenset[str]) -> bool:
    """Does an event of middle negation `ci` that passes its checks against a
    run waiting at it (bound up to the positive before it, nothing after)
    block every completion of that run? With skip_till_next_match it does
    when the checks read only the negated event, events bound before it
    (fixed once the run waits: the positive right before is a plain one,
    never extended later) and constants: every later binding is at or after
    the current event, so the negated event lies inside the forbidden
    interval of every completion bound after its timestamp (SASE's
    SEQ_WITHOUT: strictly between the neighbouring positive events). Plans
    where dropping such a run could change anything else keep today's
    behaviour: keyless ones (equivalence checked while matching), after-match
    skip (held matches wait for earlier runs), ON TIMEOUT (a dropped run
    would not time out), user-defined functions (failures are reported)."""
    comp, plan = cp.comps[ci], cp.plan
    if not comp.negated or comp.prev_pos < 0 or comp.next_pos < 0 or cp.strategy != 1 \
            or cp.keyless or cp.skip or plan.timeout is not None or cp.functions:
        return False
    if cp.comps[cp.pos[comp.prev_pos]].kleene:
        return False
    before = {plan.components[c].var for c in cp.pos[:comp.prev_pos + 1]}
    return all(variables(conj) <= before | absent | {comp.var}
               for conj in plan.where if comp.var in variables(conj))


def _gate(cp: CompiledPlan, ci: int, absent: frozenset[str]) -> int:
    """The component a middle negation's events must pass their checks with
    to be worth keeping, or -1. Under skip_till_any_match an event of
    negation `ci` blocks a match only if its checks hold with the match's
    events and it lies strictly after the positive before it; when every
    check reads only the negated event, one plain positive component before
    it and constants, an event that passes them with no instance of that
    component already in its stack (all earlier, in time order) can block no
    match now or later: every later instance comes at or after it. The LR
    AccidentCleared query, SEQ(Accident a, NOT PositionReport o,
    PositionReport m), then keeps the reports of the accidents' cars instead
    of a day of every report. Keyless plans (equivalence checked while
    matching), optional components (the interval may open earlier) and
    user-defined functions (failures are reported) are left alone."""
    comp, plan = cp.comps[ci], cp.plan
    if not comp.negated or comp.prev_pos < 0 or comp.next_pos < 0 or cp.strategy != 0 \
            or cp.keyless or cp.functions or not comp.neg_checks \
            or any(c.kleene and c.min_count == 0 for c in cp.comps):
        return -1
    before = {plan.components[c].var: c for c in cp.pos[:comp.prev_pos + 1]}
    read: set[str] = set()
    for conj in plan.where:
        used = variables(conj)
        if comp.var in used:
            if _has_agg(conj):
                return -1
            read |= used - absent - {comp.var}
    if len(read) != 1 or next(iter(read)) not in before:
        return -1
    gate = before[next(iter(read))]
    return -1 if cp.comps[gate].kleene else gate


def _rename(expr: Expr, var: str) -> Expr:
    match expr:
        case Attr(var=v, name=name):
            return Attr("$" if v == var else v, name)
        case Unary(op=op, operand=o):
            return Unary(op, _rename(o, var))
        case Binary(op=op, left=left, right=right):
            return Binary(op, _rename(left, var), _rename(right, var))
        case Call(func=func, args=args):
            return Call(func, tuple(_rename(a, var) for a in args), expr.udf)
    return expr
