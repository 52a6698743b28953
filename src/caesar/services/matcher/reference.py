"""A deliberately simple pure-Python pattern matcher: the test oracle.

It keeps, per (plan, partition), the plain history of the events the plan has
seen (pruned only by the window), and for every arriving event enumerates
every candidate sequence that ends with it, then checks every condition on
the whole candidate (window, equivalence, WHERE, iteration filters,
quantifier bounds, negation). No stacks, no indexes, no push-down: if the
Cython engine and this disagree, the engine is wrong unless this file misreads
src/caesar/plans/pattern.py.

Strategies skip_till_next_match, strict_contiguity and partition_contiguity
are run-based by definition (SASE+): a run is started by every event that can
bind the first component; on each later event of the partition a run takes
the event if it can bind a later component (the next one, or one after
optional components it then skips) or extend the current Kleene component,
else skips it (next match) or dies (strict contiguity; partition contiguity:
only if the event is of one of the pattern's types and has the run's
equivalence values, i.e. it is in the run's substream). A run in a Kleene component that can do
both binds the later component (reluctant, the default) or extends (greedy).
Negation and the window are checked on the finished candidate, exactly as
for skip_till_any_match. A run whose window expires before it completes is a
timed-out partial match (the plan's `timeout` output). With an after-match
skip strategy, complete matches are emitted in the order of their first event
once no partial match that started earlier is left, and each emitted match
discards the partial and complete matches its strategy names (Flink CEP's
semantics). A plan with alternatives (AND/OR) runs each alternative as its
own plan under the same plan id.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import combinations
from typing import Any

from caesar.errors import PlanError
from caesar.events.batch import EventBatch, StringPool
from caesar.plans.engine import DerivedEvent
from caesar.plans.expr import Agg, Attr, Binary, Call, Const, Expr, Unary, variables
from caesar.plans.functions import FunctionFailure
from caesar.plans.pattern import RUN_STRATEGIES, Output, PatternComponent, PatternPlan
from caesar.services.matcher.expr_eval import (
    INT64_MAX,
    INT64_MIN,
    MISSING,
    AggLookup,
    Lookup,
    aggregate,
    evaluate,
    failures,
    holds,
    overflows,
)
from caesar.services.store import tagged

STATE_FORMAT = 3  # layout of snapshot(); 3: alternatives, held matches (plain data)


def _constants(expr: Expr) -> list[object]:
    match expr:
        case Const(value=value):
            return [value]
        case Attr():
            return []
        case Unary(operand=o):
            return _constants(o)
        case Binary(left=left, right=right):
            return _constants(left) + _constants(right)
        case Call(args=args):
            return [v for a in args for v in _constants(a)]
        case Agg(arg=arg):
            return _constants(arg) if arg is not None else []
    return []


@dataclass(frozen=True)
class Ev:
    type: str
    ts: int
    seq: int
    attrs: dict[str, Any]  # strings decoded; null -> None


Bindings = list[list[Ev]]  # one list per positive component (Kleene: several events)
RunKey = tuple[str, int, int]  # (plan id, alternative, partition)
Held = tuple[int, DerivedEvent, Bindings]  # a result held back by an end negation: deadline


def validate_plan(plan: PatternPlan) -> None:
    """Reject plans no engine can run (shared by both engines)."""
    n = len(plan.components)
    for alt in plan.alternatives:
        if not alt or any(not 0 <= i < n for i in alt) or len(set(alt)) != len(alt):
            raise PlanError(f"plan {plan.plan_id}: bad alternative {alt}")
    _validate_run_options(plan)
    for e in plan_expressions(plan):
        for v in _constants(e):
            if isinstance(v, int) and not isinstance(v, bool) \
                    and not INT64_MIN <= v <= INT64_MAX:
                raise PlanError(f"plan {plan.plan_id}: integer constant {v} does not fit "
                                "in 64 bits")
    for sub in plan.expanded():
        _validate_sequence(sub)


def plan_expressions(plan: PatternPlan) -> list[Expr]:
    """Every expression of a plan: WHERE conjuncts, iteration filters, outputs."""
    exprs = list(plan.where) + [c.iteration_filter for c in plan.components
                                if c.iteration_filter is not None]
    for out in (plan.output, plan.timeout):
        if out is not None:
            exprs += [f.expr for f in out.fields]
    return exprs


def _validate_run_options(plan: PatternPlan) -> None:
    """After-match skip and timeouts: run-based strategies, no alternatives.
    Partition contiguity keeps each [attr] value's runs apart: no skip (it
    orders matches across the partition) and no [attr] EXCEPT NOT with a
    negation (negated events of any value meet every run)."""
    if plan.strategy == "partition_contiguity":
        if plan.skip != "no_skip":
            raise PlanError(f"plan {plan.plan_id}: an after-match skip strategy is not "
                            "supported with partition_contiguity")
        if not plan.equivalence_negated and plan.equivalence and plan.negated:
            raise PlanError(f"plan {plan.plan_id}: [attr] EXCEPT NOT with a negation is not "
                            "supported with partition_contiguity")
    if plan.skip != "no_skip":
        if plan.strategy not in RUN_STRATEGIES:
            raise PlanError(f"plan {plan.plan_id}: an after-match skip strategy needs "
                            "a run-based strategy")
        if plan.skip in ("to_first", "to_last") and \
                plan.skip_var not in {c.var for c in plan.positive}:
            raise PlanError(f"plan {plan.plan_id}: skip to {plan.skip_var}, which is not a "
                            "positive pattern variable")
    if plan.alternatives and (plan.skip != "no_skip" or plan.timeout is not None):
        raise PlanError(f"plan {plan.plan_id}: an after-match skip or a timeout with AND/OR "
                        "alternatives (each alternative would skip / time out on its own)")
    if plan.timeout is not None and (plan.strategy not in RUN_STRATEGIES or plan.within is None):
        raise PlanError(f"plan {plan.plan_id}: timed-out partial matches need WITHIN and "
                        "a run-based strategy")


def _validate_sequence(plan: PatternPlan) -> None:
    if not plan.positive:
        raise PlanError(f"plan {plan.plan_id}: a pattern needs a positive component")
    comps = plan.components
    for i, comp in enumerate(comps):
        _validate_component(plan, i, comp)
    pos = plan.positive
    for c in (pos[0], pos[-1]):
        if c.optional:
            raise PlanError(f"plan {plan.plan_id}: optional component {c.var} at the start or "
                            "end of a pattern")
    if plan.skip != "no_skip" and _has_end_negation(plan):
        raise PlanError(f"plan {plan.plan_id}: an after-match skip strategy with a negation "
                        "at the end of the pattern")
    negated = {c.var for c in plan.negated}
    for conj in plan.where:
        if len(variables(conj) & negated) > 1:
            raise PlanError(f"plan {plan.plan_id}: a conjunct reads two negated variables")
    if plan.within is not None and plan.within <= 0:
        raise PlanError(f"plan {plan.plan_id}: WITHIN must be positive")


def _validate_component(plan: PatternPlan, i: int, comp: PatternComponent) -> None:
    comps = plan.components
    if comp.negated and comp.kleene:
        raise PlanError(f"plan {plan.plan_id}: negated Kleene component {comp.var}")
    if comp.kleene and (comp.min_count < 0 or (comp.max_count is not None and
                                                comp.max_count < max(1, comp.min_count))):
        raise PlanError(f"plan {plan.plan_id}: bad repetition bounds of {comp.var}")
    if comp.negated and plan.within is None:
        at_start = not any(not c.negated for c in comps[:i])
        at_end = not any(not c.negated for c in comps[i + 1:])
        if at_start or at_end:
            raise PlanError(f"plan {plan.plan_id}: negation of {comp.var} at the "
                            "start or end of a pattern needs WITHIN")


def _has_end_negation(plan: PatternPlan) -> bool:
    comps = plan.components
    return any(c.negated and not any(not d.negated for d in comps[i + 1:])
               for i, c in enumerate(comps))


def batch_events(batch: EventBatch) -> dict[int, list[Ev]]:
    """Decode a columnar batch into per-partition lists in arrival order."""
    out: dict[int, list[Ev]] = {}
    pool = batch.strings
    for type_name, cols in batch.by_type.items():
        names = list(cols.columns)
        kinds = {n: cols.columns[n].dtype.kind for n in names}
        for row in range(len(cols)):
            attrs: dict[str, Any] = {}
            for name in names:
                mask = cols.nulls.get(name)
                if mask is not None and mask[row]:
                    attrs[name] = None
                    continue
                raw = cols.columns[name][row]
                if kinds[name] == "i" and cols.columns[name].dtype.itemsize == 4:
                    attrs[name] = pool.string(int(raw))  # interned string code
                elif kinds[name] == "i" and cols.columns[name].dtype.itemsize == 1:
                    attrs[name] = bool(raw)
                elif kinds[name] == "f":
                    attrs[name] = float(raw)
                else:
                    attrs[name] = int(raw)
            ev = Ev(type_name, int(cols.ts[row]), int(cols.seq[row]), attrs)
            out.setdefault(int(cols.partition[row]), []).append(ev)
    for events in out.values():
        events.sort(key=lambda e: e.seq)
    return out


class _Plan:
    """One alternative of a plan plus the few facts the oracle needs."""

    def __init__(self, plan: PatternPlan, alt: int, all_vars: frozenset[str]) -> None:
        self.plan = plan
        self.key = (plan.plan_id, alt)
        self.pos = plan.positive
        self.pos_index = {c.var: i for i, c in enumerate(self.pos)}
        # variables of other alternatives: bound to nothing here
        self.absent = all_vars - {c.var for c in plan.components}
        negated = {c.var for c in plan.negated}
        self.positive_where = tuple(c for c in plan.where if not (variables(c) & negated))
        self.types = {t for c in plan.components for t in c.types}
        self.has_end_negation = _has_end_negation(plan)


@dataclass
class _Skipping:
    """A complete match waiting for earlier-started partial matches to
    resolve (after-match skip strategies only)."""

    order: tuple[int, tuple[int, ...]]  # (first event seq, all seqs)
    derived: DerivedEvent
    prune: int | None  # seq the skip strategy prunes up to (None: nothing)


# what snapshot() may hold besides plain values (services/store/tagged.py)
for _cls in (Ev, _Skipping, DerivedEvent):
    tagged.register(_cls)


def _env(p: _Plan, bindings: Bindings, current: tuple[int, Ev] | None = None,
         neg: tuple[str, Ev] | None = None) -> tuple[Lookup, AggLookup]:
    """Lookup/agg functions over a (partial) binding. `current` = (Kleene
    component index, event being tested by its iteration filter)."""
    env = _BindingEnv(p, bindings, current, neg)
    return env.lookup, env.agg


class _BindingEnv:
    def __init__(self, p: _Plan, bindings: Bindings, current: tuple[int, Ev] | None,
                 neg: tuple[str, Ev] | None) -> None:
        self.p, self.bindings, self.current, self.neg = p, bindings, current, neg

    def events_of(self, var: str) -> list[Ev] | None:
        # A Kleene component under test holds its previous iterations only.
        i = self.p.pos_index.get(var)
        if i is None or i >= len(self.bindings):
            return None
        return self.bindings[i]

    def lookup(self, var: str | None, name: str) -> Any:
        neg, current = self.neg, self.current
        if neg is not None and var == neg[0]:
            return neg[1].attrs.get(name)
        if current is not None and var is not None and self.p.pos_index.get(var) == current[0]:
            return current[1].attrs.get(name)
        evs = self.events_of(var) if var is not None else None
        if not evs:
            return MISSING
        return evs[-1].attrs.get(name)

    def agg(self, node: Agg) -> Any:
        evs = self.events_of(node.var) or []
        if node.arg is None:
            return aggregate(node.func, [True] * len(evs))
        arg = node.arg
        return aggregate(node.func, [evaluate(arg, partial(self._iterated, node.var, ev), self.agg)
                                     for ev in evs])

    def _iterated(self, kleene_var: str, ev: Ev, var: str | None, name: str) -> Any:
        """Inside an aggregate, the Kleene variable reads the iterated event."""
        if var == kleene_var:
            return ev.attrs.get(name)
        return self.lookup(var, name)


def _assignments(p: _Plan, hist: list[Ev], last: Ev, i: int, after: int,
                 acc: Bindings) -> Iterator[Bindings]:
    """Assignments of positive components i, i+1, ... to events after `after`,
    extending `acc`, that end with `last`."""
    if i == len(p.pos):
        if acc[-1] and acc[-1][-1] is last:
            yield [list(x) for x in acc]
        return
    comp = p.pos[i]
    within = p.plan.within
    equiv = p.plan.equivalence  # also re-checked in full by _positive_ok
    cands = [e for e in hist if e.type in comp.types and after < e.ts <= last.ts
             and (within is None or e.ts > last.ts - within)
             and all(e.attrs.get(a) == last.attrs.get(a) for a in equiv)]
    if not comp.kleene:
        for e in cands:
            yield from _assignments(p, hist, last, i + 1, e.ts, acc + [[e]])
        return
    if comp.min_count == 0:  # optional: it may bind nothing
        yield from _assignments(p, hist, last, i + 1, after, acc + [[]])
    most = len(cands) if comp.max_count is None else min(comp.max_count, len(cands))
    for size in range(max(1, comp.min_count), most + 1):
        for combo in combinations(cands, size):
            if all(combo[j].ts < combo[j + 1].ts for j in range(size - 1)):
                yield from _assignments(p, hist, last, i + 1, combo[-1].ts, acc + [list(combo)])


def _equivalent(attrs: Sequence[str], events: list[Ev]) -> bool:
    """[attr]: every event has the attribute, non-null, with one value (and type)."""
    for attr in attrs:
        first = events[0].attrs.get(attr)
        if first is None or any(e.attrs.get(attr) != first or e.attrs.get(attr) is None
                                for e in events):
            return False
        if any(isinstance(e.attrs.get(attr), str) != isinstance(first, str) for e in events):
            return False
    return True


def _component_ok(p: _Plan, b: Bindings, i: int, closed: int) -> bool:
    """Component i's events: within its quantifier bounds (the minimum once
    it is closed), of its types, in ts order, each passing its Kleene
    iteration filter given the iterations before it."""
    evs = b[i]
    comp = p.pos[i]
    if not _fits(comp, len(evs)) or (i < closed and len(evs) < comp.min_count):
        return False
    if comp.types and any(e.type not in comp.types for e in evs):
        return False
    if any(evs[j].ts >= evs[j + 1].ts for j in range(len(evs) - 1)):
        return False
    if comp.kleene and comp.iteration_filter is not None:
        for j, e in enumerate(evs):
            lookup, agg = _env(p, b[:i] + [evs[:j]], current=(i, e))
            if not holds(comp.iteration_filter, lookup, agg):
                return False
    return True


def _within(p: _Plan) -> int:
    """WITHIN of a plan with a negation at its start or end (validate_plan
    rejects such a plan without one)."""
    assert p.plan.within is not None
    return p.plan.within


def _prune(hist: list[Ev], bound: int) -> None:
    """Drop events with ts <= bound (the history is in ts order)."""
    k = 0
    while k < len(hist) and hist[k].ts <= bound:
        k += 1
    if k:
        del hist[:k]


def _value(v: Any) -> Any:
    return None if v is MISSING else v


def _fits(comp: PatternComponent, count: int) -> bool:
    if not comp.kleene:
        return count == 1
    return comp.max_count is None or count <= comp.max_count


class ReferenceEngine:
    def __init__(self, plans: Sequence[PatternPlan]) -> None:
        self._plans: dict[tuple[str, int], _Plan] = {}
        for plan in plans:
            validate_plan(plan)
            for alt, sub in enumerate(plan.expanded()):
                p = _Plan(sub, alt, plan.variables())
                self._plans[p.key] = p
        # (plan id, alternative, partition) -> state
        self._hist: dict[RunKey, list[Ev]] = {}
        self._runs: dict[RunKey, list[Bindings]] = {}
        self._pending: dict[RunKey, list[Held]] = {}
        self._held: dict[RunKey, list[_Skipping]] = {}
        self._overflows: dict[str, int] = {}
        self._failures: list[tuple[str, FunctionFailure]] = []

    # -- protocol ---------------------------------------------------------

    def process(self, batch: EventBatch,
                active: Collection[str] | None = None) -> list[DerivedEvent]:
        out: list[DerivedEvent] = []
        plans = [p for (pid, _alt), p in self._plans.items() if active is None or pid in active]
        for partition, events in batch_events(batch).items():
            for ev in events:
                for p in plans:
                    before = overflows.count
                    out.extend(self._on_event(p, partition, ev))
                    self._count_overflows(p, before)
        return out

    def _count_overflows(self, p: _Plan, before: int) -> None:
        if overflows.count != before:
            pid = p.plan.plan_id
            self._overflows[pid] = self._overflows.get(pid, 0) + overflows.count - before
        if failures.items:
            self._failures += [(p.plan.plan_id, f) for f in failures.take()]

    def function_failures(self) -> list[tuple[str, FunctionFailure]]:
        """(plan id, failure) of user-defined function calls since the last
        call; this oracle evaluates per candidate, so it may report one
        failing call more often than the Cython engine does."""
        out, self._failures = self._failures, []
        return out

    def overflows(self) -> dict[str, int]:
        """{plan id: integer results outside 64 bits so far}. The count of
        evaluations is this oracle's own (the Cython engine evaluates some
        conditions once per event instead of once per candidate)."""
        return dict(self._overflows)

    def advance(self, watermark: int) -> list[DerivedEvent]:
        out: list[DerivedEvent] = []
        for key, pending in list(self._pending.items()):
            keep = []
            for deadline, derived, b in pending:
                if deadline <= watermark:
                    out.append(derived)
                else:
                    keep.append((deadline, derived, b))
            self._pending[key] = keep
        for (pid, alt, _part), hist in self._hist.items():
            within = self._plans[(pid, alt)].plan.within
            if within is not None:
                _prune(hist, watermark - within)
        for (pid, alt, part), runs in self._runs.items():
            p = self._plans[(pid, alt)]
            within = p.plan.within
            if within is None:
                continue
            before = overflows.count
            keep_runs = []
            for r in runs:
                if r[0][0].ts > watermark - within:
                    keep_runs.append(r)
                else:
                    out.extend(self._timed_out(p, part, r))
            runs[:] = keep_runs
            out.extend(self._release(p, (pid, alt, part)))
            self._count_overflows(p, before)
        return out

    def discard(self, plan_ids: Collection[str], partition: int) -> None:
        for pid in plan_ids:
            for store in (self._hist, self._runs, self._pending, self._held):
                for key in [k for k in store if k[0] == pid and k[2] == partition]:
                    del store[key]

    def snapshot(self, partition: int) -> dict[str, Any]:
        """Plain data per plan id (services/store/tagged.py): [[alternative,
        {"hist": ..., "runs": ..., "pending": ..., "held": ...}], ...]."""
        by_pid: dict[str, dict[int, dict[str, Any]]] = {}
        for name, store in (("hist", self._hist), ("runs", self._runs),
                            ("pending", self._pending), ("held", self._held)):
            for (pid, alt, part), v in store.items():
                if part == partition and v:
                    by_pid.setdefault(pid, {}).setdefault(alt, {})[name] = v
        return {pid: tagged.encode([[alt, data] for alt, data in alts.items()])
                for pid, alts in by_pid.items()}

    def restore(self, partition: int, state: dict[str, Any],
                strings: StringPool | None = None) -> None:
        # (`strings` unused: this engine keeps string values decoded)
        stores: dict[str, dict[Any, Any]] = {
            "hist": self._hist, "runs": self._runs, "pending": self._pending,
            "held": self._held}
        for store in stores.values():
            for key in [k for k in store if k[2] == partition]:
                del store[key]
        for pid, alts in state.items():
            for alt, data in tagged.decode(alts):
                if (pid, alt) not in self._plans:
                    continue
                for name, value in data.items():
                    stores[name][(pid, alt, partition)] = value

    # -- per event --------------------------------------------------------

    def _on_event(self, p: _Plan, partition: int, ev: Ev) -> list[DerivedEvent]:
        key = (p.key[0], p.key[1], partition)
        within = p.plan.within
        out: list[DerivedEvent] = []
        # a pending end-negation result dies if ev is a forbidden event
        pending = self._pending.get(key)
        if pending:
            self._pending[key] = [item for item in pending
                                  if not self._kills_end(p, item, ev)]
        hist = self._hist.setdefault(key, [])
        if within is not None:
            _prune(hist, ev.ts - within)
        if ev.type in p.types:
            hist.append(ev)
        if p.plan.strategy == "skip_till_any_match":
            if ev.type in p.types:
                for b in self._candidates(p, hist, ev):
                    out.extend(self._finish(p, key, partition, b, hist))
        else:
            out.extend(self._step_runs(p, key, partition, ev, hist))
        return out

    def _candidates(self, p: _Plan, hist: list[Ev], last: Ev) -> Iterator[Bindings]:
        """Every assignment of positive components to increasing-ts events of
        the history whose final event is `last` (a Kleene component: every
        increasing subset within its bounds; an optional one may be empty)."""
        if last.type in p.pos[-1].types:
            for b in _assignments(p, hist, last, 0, -(2**62), []):
                if self._positive_ok(p, b, closed=len(p.pos)):
                    yield b

    def _positive_ok(self, p: _Plan, b: Bindings, closed: int) -> bool:
        """Window, equivalence, quantifier bounds, iteration filters and the
        positive WHERE conjuncts whose variables are all in the first
        `closed` components (or bound by no alternative of this plan's)."""
        events = [e for evs in b for e in evs]
        within = p.plan.within
        if within is not None and events[-1].ts - events[0].ts >= within:
            return False
        if not _equivalent(p.plan.equivalence, events):
            return False
        if not all(_component_ok(p, b, i, closed) for i in range(len(b))):
            return False
        bound = {c.var for c in p.pos[:closed]} | p.absent
        lookup, agg = _env(p, b)
        return all(holds(conj, lookup, agg) for conj in p.positive_where
                   if variables(conj) <= bound)

    def _neg_interval(self, p: _Plan, comp_index: int, b: Bindings) -> tuple[float, float]:
        """The open interval a negated component forbids events in: between
        its neighbouring positive events (an optional neighbour that bound
        nothing is passed over; a Kleene one gives its last / first event),
        or the window at the start / end."""
        comps = p.plan.components
        before = [b[p.pos_index[c.var]] for c in comps[:comp_index] if not c.negated]
        after = [b[p.pos_index[c.var]] for c in comps[comp_index + 1:] if not c.negated]
        before = [evs for evs in before if evs]
        after = [evs for evs in after if evs]
        first, last = b[0][0].ts, b[-1][-1].ts
        lo = before[-1][-1].ts if before else last - _within(p)
        hi = after[0][0].ts if after else first + _within(p)
        return lo, hi

    def _neg_blocks(self, p: _Plan, comp: PatternComponent, b: Bindings, ev: Ev,
                    lo: float, hi: float) -> bool:
        if ev.type not in comp.types or not (lo < ev.ts < hi):
            return False
        if p.plan.equivalence_negated:
            first = b[0][0]
            for attr in p.plan.equivalence:
                v = ev.attrs.get(attr)
                if v is None or v != first.attrs.get(attr) \
                        or isinstance(v, str) != isinstance(first.attrs.get(attr), str):
                    return False
        lookup, agg = _env(p, b, neg=(comp.var, ev))
        return all(holds(c, lookup, agg) for c in p.plan.where if comp.var in variables(c))

    def _negation_ok(self, p: _Plan, b: Bindings, hist: list[Ev]) -> bool:
        comps = p.plan.components
        for ci, comp in enumerate(comps):
            if not comp.negated:
                continue
            lo, hi = self._neg_interval(p, ci, b)
            if any(self._neg_blocks(p, comp, b, e, lo, hi) for e in hist):
                return False
        return True

    def _finish(self, p: _Plan, key: RunKey, partition: int, b: Bindings,
                hist: list[Ev]) -> list[DerivedEvent]:
        """Negation checks on a complete positive candidate, then output (or
        hold it until the window closes if it ends with a negation)."""
        if not self._negation_ok(p, b, hist):
            return []
        derived = self._derive(p, partition, b)
        if p.has_end_negation:
            deadline = b[0][0].ts + _within(p)
            self._pending.setdefault(key, []).append((deadline, derived, b))
            return []
        return [derived]

    def _kills_end(self, p: _Plan, item: Held, ev: Ev) -> bool:
        _deadline, _derived, b = item
        comps = p.plan.components
        for ci, comp in enumerate(comps):
            if comp.negated and not any(not c.negated for c in comps[ci + 1:]):
                lo, hi = self._neg_interval(p, ci, b)
                if self._neg_blocks(p, comp, b, ev, lo, hi):
                    return True
        return False

    def _derive(self, p: _Plan, partition: int, b: Bindings, out: Output | None = None,
                end_ts: int | None = None) -> DerivedEvent:
        out = out if out is not None else p.plan.output
        fields: dict[str, Any] = {}
        if out is not None:
            lookup, agg = _env(p, b)
            for f in out.fields:
                fields[f.name] = _value(evaluate(f.expr, lookup, agg))
        events = [e for evs in b for e in evs]
        return DerivedEvent(
            plan_id=p.plan.plan_id,
            event_type=out.event_type if out is not None else p.plan.plan_id,
            partition=partition,
            start_ts=events[0].ts,
            end_ts=events[-1].ts if end_ts is None else end_ts,
            fields=fields,
            event_seqs=tuple(e.seq for e in events),
        )

    # -- run-based strategies ---------------------------------------------

    def _try(self, p: _Plan, run: Bindings, ev: Ev) -> Bindings | None:
        """The run after taking `ev`, or None if `ev` is not relevant to it."""
        n = len(p.pos)
        m = len(run)
        if ev.ts <= run[-1][-1].ts:
            return None
        cur = p.pos[m - 1]
        later: list[Bindings] = []  # bind component j >= m, skipping optional ones before it
        if len(run[-1]) >= cur.min_count:
            for j in range(m, n):
                later.append([list(x) for x in run] + [[] for _ in range(m, j)] + [[ev]])
                if not p.pos[j].optional:
                    break
        extend: list[Bindings] = []
        if cur.kleene and (cur.max_count is None or len(run[-1]) < cur.max_count):
            extend.append([list(x) for x in run[:-1]] + [run[-1] + [ev]])
        for cand in (extend + later) if cur.greedy else (later + extend):
            closed = len(cand) if not p.pos[len(cand) - 1].kleene else len(cand) - 1
            if self._positive_ok(p, cand, closed):
                return cand
        return None

    def _complete(self, p: _Plan, b: Bindings) -> bool:
        return len(b) == len(p.pos) and self._positive_ok(p, b, len(p.pos))

    def _extendable(self, p: _Plan, b: Bindings) -> bool:
        last = p.pos[-1]
        return len(b) < len(p.pos) or (
            last.kleene and (last.max_count is None or len(b[-1]) < last.max_count))

    def _timed_out(self, p: _Plan, partition: int, run: Bindings) -> list[DerivedEvent]:
        """A run whose window expired: a timeout event if it never completed."""
        if p.plan.timeout is None or self._complete(p, run):
            return []
        return [self._derive(p, partition, run, p.plan.timeout,
                             end_ts=run[0][0].ts + _within(p))]

    def _step_runs(self, p: _Plan, key: RunKey, partition: int, ev: Ev,
                   hist: list[Ev]) -> list[DerivedEvent]:
        out: list[DerivedEvent] = []
        kept: list[Bindings] = []
        completed: list[Bindings] = []
        for run in self._runs.setdefault(key, []):
            out.extend(self._advance_run(p, partition, run, ev, kept, completed))
        if ev.type in p.pos[0].types:
            kept += self._start_run(p, ev, completed)
        self._runs[key] = kept
        if p.plan.skip == "no_skip":
            for b in completed:
                out.extend(self._finish(p, key, partition, b, hist))
            return out
        held = self._held.setdefault(key, [])
        for b in completed:
            if self._negation_ok(p, b, hist):
                seqs = tuple(e.seq for evs in b for e in evs)
                held.append(_Skipping((seqs[0], seqs), self._derive(p, partition, b),
                                  self._prune_seq(p, b)))
        return out + self._release(p, key)

    def _advance_run(self, p: _Plan, partition: int, run: Bindings, ev: Ev,
                     kept: list[Bindings], completed: list[Bindings]) -> list[DerivedEvent]:
        """Offer `ev` to one run: the run (extended or not) goes to `kept`
        if it can still grow, to `completed` if it matched; a run whose
        window has passed times out."""
        within = p.plan.within
        if within is not None and ev.ts - run[0][0].ts >= within:
            return self._timed_out(p, partition, run)  # nothing can join it any more
        new = self._try(p, run, ev)
        if new is None:
            if not self._breaks(p, run, ev):
                kept.append(run)
            return []
        if len(new) == len(p.pos) and self._complete(p, new):
            completed.append(new)
        if self._extendable(p, new):
            kept.append(new)
        return []

    def _breaks(self, p: _Plan, run: Bindings, ev: Ev) -> bool:
        """Does `ev`, which the run cannot take, end it (contiguity)?"""
        strategy = p.plan.strategy
        if strategy == "strict_contiguity":
            return True
        if strategy == "partition_contiguity":
            return ev.type in p.types and _equivalent(p.plan.equivalence, [run[0][0], ev])
        return False

    def _start_run(self, p: _Plan, ev: Ev, completed: list[Bindings]) -> list[Bindings]:
        """A run that begins with `ev` (a one-component pattern may match at
        once, into `completed`); the run to keep, if any."""
        start = [[ev]]
        if not self._positive_ok(p, start, 0 if p.pos[0].kleene else 1):
            return []
        if len(p.pos) == 1 and self._complete(p, start):
            completed.append(start)
        return [start] if self._extendable(p, start) else []

    def _prune_seq(self, p: _Plan, b: Bindings) -> int | None:
        skip = p.plan.skip
        if skip == "to_next":
            return b[0][0].seq
        if skip == "past_last":
            return b[-1][-1].seq
        i = p.pos_index.get(p.plan.skip_var or "")
        evs = b[i] if i is not None else []
        if not evs:
            return None  # the variable bound nothing: no skip (Flink's default)
        return evs[0].seq if skip == "to_first" else evs[-1].seq

    def _release(self, p: _Plan, key: RunKey) -> list[DerivedEvent]:
        """Emit held matches in the order of their first event while no
        partial match that started earlier is left; each prunes per the
        skip strategy (starts <= its seq; to_first / to_last: < its seq)."""
        held = self._held.get(key)
        if not held:
            return []
        runs = self._runs.get(key, [])
        out = []
        held.sort(key=lambda h: h.order)
        strict_before = p.plan.skip in ("to_first", "to_last")
        while held:
            first = held[0]
            if runs and min(r[0][0].seq for r in runs) < first.order[0]:
                break
            held.pop(0)
            out.append(first.derived)
            if first.prune is None:
                continue

            def pruned(start: int, bound: int = first.prune) -> bool:
                return start < bound if strict_before else start <= bound

            runs[:] = [r for r in runs if not pruned(r[0][0].seq)]
            held[:] = [h for h in held if not pruned(h.order[0])]
        return out
