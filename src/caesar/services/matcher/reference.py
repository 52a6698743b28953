"""A deliberately simple pure-Python pattern matcher: the test oracle.

It keeps, per (plan, partition), the plain history of the events the plan has
seen (pruned only by the window), and for every arriving event enumerates
every candidate sequence that ends with it, then checks every condition on
the whole candidate (window, equivalence, WHERE, iteration filters,
negation). No stacks, no indexes, no push-down: if the Cython engine and this
disagree, the engine is wrong unless this file misreads src/caesar/plans/pattern.py.

Strategies skip_till_next_match and strict_contiguity are run-based by
definition (SASE+): a run is started by every event that can bind the first
component; on each later event of the partition a run takes the event if it
can bind the next component (or extend the current Kleene component), else
skips it (next match) or dies (strict contiguity). A run waiting in a Kleene
component that is not the last one prefers to close it with an event that
binds the next component. Negation and the window are checked on the
finished candidate, exactly as for skip_till_any_match.
"""

from __future__ import annotations

import pickle
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import combinations
from typing import Any

from caesar.errors import PlanError
from caesar.events.batch import EventBatch
from caesar.plans.engine import DerivedEvent
from caesar.plans.expr import Agg, variables
from caesar.plans.pattern import PatternComponent, PatternPlan
from caesar.services.matcher.expr_eval import (
    MISSING,
    AggLookup,
    Lookup,
    aggregate,
    evaluate,
    holds,
)

SNAPSHOT_VERSION = b"CAESAR-REF-1\n"


@dataclass(frozen=True)
class Ev:
    type: str
    ts: int
    seq: int
    attrs: dict[str, Any]  # strings decoded; null -> None


Bindings = list[list[Ev]]  # one list per positive component (Kleene: several events)
RunKey = tuple[str, int]  # (plan id, partition)
Held = tuple[int, DerivedEvent, Bindings]  # a result held back by an end negation: deadline


def validate_plan(plan: PatternPlan) -> None:
    """Reject plans no engine can run (shared by both engines)."""
    if not plan.positive:
        raise PlanError(f"plan {plan.plan_id}: a pattern needs a positive component")
    comps = plan.components
    for i, comp in enumerate(comps):
        if comp.negated and comp.kleene:
            raise PlanError(f"plan {plan.plan_id}: negated Kleene component {comp.var}")
        if comp.negated and plan.within is None:
            at_start = not any(not c.negated for c in comps[:i])
            at_end = not any(not c.negated for c in comps[i + 1:])
            if at_start or at_end:
                raise PlanError(f"plan {plan.plan_id}: negation of {comp.var} at the "
                                "start or end of a pattern needs WITHIN")
    negated = {c.var for c in plan.negated}
    for conj in plan.where:
        if len(variables(conj) & negated) > 1:
            raise PlanError(f"plan {plan.plan_id}: a conjunct reads two negated variables")
    if plan.within is not None and plan.within <= 0:
        raise PlanError(f"plan {plan.plan_id}: WITHIN must be positive")


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
    """A plan plus the few facts the oracle needs about it."""

    def __init__(self, plan: PatternPlan) -> None:
        validate_plan(plan)
        self.plan = plan
        self.pos = plan.positive
        self.pos_index = {c.var: i for i, c in enumerate(self.pos)}
        negated = {c.var for c in plan.negated}
        self.positive_where = tuple(c for c in plan.where if not (variables(c) & negated))
        self.types = {t for c in plan.components for t in c.types}
        self.has_end_negation = any(not any(not c.negated for c in plan.components[i + 1:])
                                    for i, c in enumerate(plan.components) if c.negated)


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
        if acc[-1][-1] is last:
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
    for size in range(1, len(cands) + 1):
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


def _component_ok(p: _Plan, b: Bindings, i: int) -> bool:
    """Component i's events: of its types, in ts order, each passing its
    Kleene iteration filter given the iterations before it."""
    evs = b[i]
    comp = p.pos[i]
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


class ReferenceEngine:
    def __init__(self, plans: Sequence[PatternPlan]) -> None:
        self._plans = {p.plan_id: _Plan(p) for p in plans}
        # (plan_id, partition) -> state
        self._hist: dict[RunKey, list[Ev]] = {}
        self._runs: dict[RunKey, list[Bindings]] = {}
        self._pending: dict[RunKey, list[Held]] = {}

    # -- protocol ---------------------------------------------------------

    def process(self, batch: EventBatch,
                active: Collection[str] | None = None) -> list[DerivedEvent]:
        out: list[DerivedEvent] = []
        plans = [p for pid, p in self._plans.items() if active is None or pid in active]
        for partition, events in batch_events(batch).items():
            for ev in events:
                for p in plans:
                    out.extend(self._on_event(p, partition, ev))
        return out

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
        for (pid, _part), hist in self._hist.items():
            within = self._plans[pid].plan.within
            if within is not None:
                _prune(hist, watermark - within)
        for (pid, _part), runs in self._runs.items():
            within = self._plans[pid].plan.within
            if within is not None:
                runs[:] = [r for r in runs if r[0][0].ts > watermark - within]
        return out

    def discard(self, plan_ids: Collection[str], partition: int) -> None:
        for pid in plan_ids:
            for store in (self._hist, self._runs, self._pending):
                store.pop((pid, partition), None)

    def snapshot(self, partition: int) -> bytes:
        state = {name: {pid: v for (pid, part), v in store.items() if part == partition}
                 for name, store in (("hist", self._hist), ("runs", self._runs),
                                     ("pending", self._pending))}
        return SNAPSHOT_VERSION + pickle.dumps(state)

    def restore(self, partition: int, state: bytes) -> None:
        if not state.startswith(SNAPSHOT_VERSION):
            raise PlanError("reference matcher: unknown snapshot format")
        data = pickle.loads(state[len(SNAPSHOT_VERSION):])
        for name, store in (("hist", self._hist), ("runs", self._runs),
                            ("pending", self._pending)):
            for key in [k for k in store if k[1] == partition]:
                del store[key]
            for pid, value in data[name].items():
                if pid in self._plans:
                    store[(pid, partition)] = value

    # -- per event --------------------------------------------------------

    def _on_event(self, p: _Plan, partition: int, ev: Ev) -> list[DerivedEvent]:
        key = (p.plan.plan_id, partition)
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
        the history whose final event is `last`."""
        if last.type in p.pos[-1].types:
            for b in _assignments(p, hist, last, 0, -(2**62), []):
                if self._positive_ok(p, b, closed=len(p.pos)):
                    yield b

    def _positive_ok(self, p: _Plan, b: Bindings, closed: int) -> bool:
        """Window, equivalence, iteration filters and the positive WHERE
        conjuncts whose variables are all in the first `closed` components."""
        events = [e for evs in b for e in evs]
        within = p.plan.within
        if within is not None and events[-1].ts - events[0].ts >= within:
            return False
        if not _equivalent(p.plan.equivalence, events):
            return False
        if not all(_component_ok(p, b, i) for i in range(len(b))):
            return False
        bound = {c.var for c in p.pos[:closed]}
        lookup, agg = _env(p, b)
        return all(holds(conj, lookup, agg) for conj in p.positive_where
                   if variables(conj) <= bound)

    def _neg_interval(self, p: _Plan, comp_index: int, b: Bindings) -> tuple[float, float]:
        comps = p.plan.components
        before = [c for c in comps[:comp_index] if not c.negated]
        after = [c for c in comps[comp_index + 1:] if not c.negated]
        first, last = b[0][0].ts, b[-1][-1].ts
        lo = b[p.pos_index[before[-1].var]][-1].ts if before else last - _within(p)
        hi = b[p.pos_index[after[0].var]][0].ts if after else first + _within(p)
        return lo, hi

    def _neg_blocks(self, p: _Plan, comp: PatternComponent, b: Bindings, ev: Ev,
                    lo: float, hi: float) -> bool:
        if ev.type not in comp.types or not (lo < ev.ts < hi):
            return False
        first = b[0][0]
        for attr in p.plan.equivalence:
            v = ev.attrs.get(attr)
            if v is None or v != first.attrs.get(attr):
                return False
        lookup, agg = _env(p, b, neg=(comp.var, ev))
        return all(holds(c, lookup, agg) for c in p.plan.where if comp.var in variables(c))

    def _finish(self, p: _Plan, key: RunKey, partition: int, b: Bindings,
                hist: list[Ev]) -> list[DerivedEvent]:
        """Negation checks on a complete positive candidate, then output (or
        hold it until the window closes if it ends with a negation)."""
        comps = p.plan.components
        for ci, comp in enumerate(comps):
            if not comp.negated:
                continue
            lo, hi = self._neg_interval(p, ci, b)
            if any(self._neg_blocks(p, comp, b, e, lo, hi) for e in hist):
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

    def _derive(self, p: _Plan, partition: int, b: Bindings) -> DerivedEvent:
        out = p.plan.output
        fields: dict[str, Any] = {}
        if out is not None:
            lookup, agg = _env(p, b)
            for f in out.fields:
                fields[f.name] = _value(evaluate(f.expr, lookup, agg))
        return DerivedEvent(
            plan_id=p.plan.plan_id,
            event_type=out.event_type if out is not None else p.plan.plan_id,
            partition=partition,
            start_ts=b[0][0].ts,
            end_ts=b[-1][-1].ts,
            fields=fields,
            event_seqs=tuple(e.seq for evs in b for e in evs),
        )

    # -- run-based strategies ---------------------------------------------

    def _try(self, p: _Plan, run: Bindings, ev: Ev) -> Bindings | None:
        """The run after taking `ev`, or None if `ev` is not relevant to it."""
        n = len(p.pos)
        m = len(run)
        last = run[-1][-1]
        if ev.ts <= last.ts:
            return None
        in_kleene = p.pos[m - 1].kleene
        options: list[Bindings] = []
        if m < n:
            options.append([list(x) for x in run] + [[ev]])  # bind the next component
        if in_kleene:
            options.append([list(x) for x in run[:-1]] + [run[-1] + [ev]])  # iterate
        for cand in options:
            closed = len(cand) if not p.pos[len(cand) - 1].kleene else len(cand) - 1
            if self._positive_ok(p, cand, closed):
                return cand
        return None

    def _complete(self, p: _Plan, b: Bindings) -> bool:
        return len(b) == len(p.pos) and self._positive_ok(p, b, len(p.pos))

    def _step_runs(self, p: _Plan, key: RunKey, partition: int, ev: Ev,
                   hist: list[Ev]) -> list[DerivedEvent]:
        out: list[DerivedEvent] = []
        within = p.plan.within
        strict = p.plan.strategy == "strict_contiguity"
        n = len(p.pos)
        runs = self._runs.setdefault(key, [])
        kept: list[Bindings] = []
        for run in runs:
            if within is not None and ev.ts - run[0][0].ts >= within:
                continue  # nothing can join it any more
            new = self._try(p, run, ev)
            if new is None:
                if not strict:
                    kept.append(run)
                continue
            if len(new) == n and self._complete(p, new):
                out.extend(self._finish(p, key, partition, new, hist))
            if len(new) < n or p.pos[-1].kleene:
                kept.append(new)
        if ev.type in p.pos[0].types:
            kept += self._start_run(p, key, partition, ev, hist, out)
        self._runs[key] = kept
        return out

    def _start_run(self, p: _Plan, key: RunKey, partition: int, ev: Ev, hist: list[Ev],
                   out: list[DerivedEvent]) -> list[Bindings]:
        """A run that begins with `ev` (a one-component pattern matches at
        once); the run to keep, if any."""
        n = len(p.pos)
        start = [[ev]]
        if not self._positive_ok(p, start, 0 if p.pos[0].kleene else 1):
            return []
        if n == 1 and self._complete(p, start):
            out.extend(self._finish(p, key, partition, start, hist))
        return [start] if n > 1 or p.pos[0].kleene else []

