"""The stage dataflow the matcher and the deriver both run.

`StageGraph` runs a list of stages (pattern plans on one engine, aggregation
plans on `AggregateExecutor`s) one event-time step at a time: the outputs of a
stage feed the later stages that consume its type in the same step
(topological order, as the compiler emits them). Events of one step are
grouped by the set of stages allowed to see them (their partition's contexts)
so that one engine call covers many partitions: Ray and engine calls carry
batches, never single events.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from caesar.errors import PlanError
from caesar.events.batch import EventBatch, StringPool
from caesar.plans.aggregate import AggregatePlan
from caesar.plans.engine import DerivedEvent, PatternEngine
from caesar.plans.execution import Stage
from caesar.plans.pattern import PatternPlan
from caesar.plans.serialize import stage_identity, state_fingerprint
from caesar.plans.temporal import TemporalPlan
from caesar.services.common.config import EngineFactory
from caesar.services.common.messages import (
    END_OF_TIME,
    Transaction,
)
from caesar.services.matcher.aggregate import AggregateExecutor
from caesar.services.matcher.engines import build_engine, engine_state_format
from caesar.services.matcher.output_rate import OutputLimiter
from caesar.services.matcher.windows import WindowExecutor
from caesar.services.store import tagged
from caesar.services.store.state_format import StateCompatibilityError

STATE_FORMAT = 2  # layout of snapshot(); 2: output limiters
log = logging.getLogger(__name__)
Record = dict[str, Any]  # event attributes + "type", "_ts", "_p" (partition id), "_key"


def default_engine_factory(plans: Sequence[PatternPlan]) -> PatternEngine:
    """The Cython engine (built on install; tests pass the reference engine)."""
    from caesar.services.matcher.engine import CythonEngine

    return CythonEngine(plans)


def plan_id(stage: Stage) -> str:
    return stage.plan.plan_id


def consumed_types(stage: Stage) -> frozenset[str]:
    plan = stage.plan
    if isinstance(plan, AggregatePlan):
        return frozenset({plan.source_type})
    if isinstance(plan, TemporalPlan):
        return frozenset(plan.source_types)
    return frozenset(t for c in plan.components for t in c.types)


def output_type(stage: Stage) -> str | None:
    plan = stage.plan
    if isinstance(plan, AggregatePlan):
        return plan.output_type
    return plan.output.event_type if plan.output is not None else None


def event_records(txn: Transaction) -> list[Record]:
    return [{**e, "_ts": txn.ts, "_p": txn.partition, "_key": txn.key} for e in txn.events]


@dataclass
class StageOutput:
    stage: Stage
    record: Record
    start_ts: int
    end_ts: int


@dataclass
class StageGraph:
    stages: Sequence[Stage]
    schemas: Mapping[str, Mapping[str, str]]
    engine_factory: EngineFactory = default_engine_factory
    strings: StringPool = field(default_factory=StringPool)

    def __post_init__(self) -> None:
        ids = [plan_id(s) for s in self.stages]
        if len(set(ids)) != len(ids):
            raise PlanError(f"duplicate plan ids among stages: {ids}")
        patterns = [s.plan for s in self.stages if isinstance(s.plan, PatternPlan | TemporalPlan)]
        self._schemas = dict(self.schemas)
        for p in patterns:
            for t, cols in p.schemas.items():
                self._schemas.setdefault(t, dict(cols))
        # SEQ plans on the factory's engine, TPStream plans on the temporal engine
        self.engine: PatternEngine | None = \
            build_engine(self.engine_factory, patterns) if patterns else None
        self.aggregates: dict[str, AggregateExecutor | WindowExecutor] = {
            plan_id(s): (AggregateExecutor(s.plan, self.strings) if s.plan.window == "time"
                         else WindowExecutor(s.plan, self.strings))
            for s in self.stages if isinstance(s.plan, AggregatePlan)}
        # OUTPUT ... EVERY: per stage, what holds its outputs back
        self.limiters: dict[str, OutputLimiter] = {
            plan_id(s): OutputLimiter(s.output_rate) for s in self.stages
            if s.output_rate is not None}
        self._clock = -(2**62)  # the time of the step being run
        self._by_id = {plan_id(s): s for s in self.stages}
        self._identity = {plan_id(s): stage_identity(s) for s in self.stages}
        self._fingerprint = {plan_id(s): state_fingerprint(s.plan) for s in self.stages}
        self._consumes = {plan_id(s): consumed_types(s) for s in self.stages}
        self._produces = {plan_id(s): output_type(s) for s in self.stages}
        self._last_active: dict[int, frozenset[str]] = {}
        # partition -> [(ts, active stages from ts on)]: a result released
        # late (a closed aggregation window) runs with the contexts of its own
        # timestamp, not those of the step that released it.
        self._history: dict[int, list[tuple[int, frozenset[str]]]] = {}
        self._keys: dict[int, str] = {}
        self._seq = 0
        self._time = -(2**62)
        self._overflows_seen: dict[str, int] = {}

    # ------------------------------------------------------------ driving
    def step(self, ts: int, items: Sequence[tuple[Transaction, frozenset[str]]]
             ) -> list[StageOutput]:
        """Process every transaction at `ts` (each with the stages it may reach).
        First releases what became final before `ts` (closed aggregation
        windows, end-negation results), then runs the stages."""
        for txn, active in items:
            self._last_active[txn.partition] = active
            self._keys[txn.partition] = txn.key
            hist = self._history.setdefault(txn.partition, [])
            if not hist or hist[-1][1] != active:
                hist.append((ts, active))
        released = self._release(ts)
        outputs = released + self._run_released(released)
        self._forget_history(ts)
        per_partition: dict[int, list[Record]] = defaultdict(list)
        for txn, _ in items:
            per_partition[txn.partition].extend(event_records(txn))
        self._clock = ts
        outputs += self._run(per_partition, {t.partition: a for t, a in items})
        self._time = ts
        return outputs

    def advance(self, watermark: int) -> list[StageOutput]:
        """No event with ts < watermark follows: release and run what that finalises."""
        released = self._release(watermark)
        outputs = released + self._run_released(released)
        self._forget_history(watermark)
        return outputs

    def _active_at(self, partition: int, ts: int) -> frozenset[str]:
        hist = self._history.get(partition)
        if not hist:
            return self._last_active.get(partition, frozenset())
        i = bisect_right(hist, ts, key=lambda h: h[0]) - 1
        return hist[max(i, 0)][1]

    def _run_released(self, released: list[StageOutput]) -> list[StageOutput]:
        """Run released results in timestamp order, each with the stages
        active for its partition at its timestamp."""
        by_ts: dict[int, dict[int, list[Record]]] = defaultdict(lambda: defaultdict(list))
        for out in released:
            by_ts[out.record["_ts"]][out.record["_p"]].append(out.record)
        outputs: list[StageOutput] = []
        for ts in sorted(by_ts):
            parts = by_ts[ts]
            self._clock = ts
            outputs += self._run(parts, {p: self._active_at(p, ts) for p in parts})
        return outputs

    def _forget_history(self, watermark: int) -> None:
        # Results not yet released are stamped >= watermark (their windows
        # end after it): keep the entry in force at watermark and later ones.
        for hist in self._history.values():
            i = bisect_right(hist, watermark, key=lambda h: h[0]) - 1
            if i > 0:
                del hist[:i]

    def discard(self, plan_ids: Iterable[str], partition: int) -> None:
        ids = [p for p in plan_ids if p in self._by_id and
               isinstance(self._by_id[p].plan, PatternPlan | TemporalPlan)]
        if ids and self.engine is not None:
            self.engine.discard(ids, partition)

    # ------------------------------------------------------------ internals
    def _release(self, watermark: int) -> list[StageOutput]:
        out: list[StageOutput] = []
        for pid, agg in self.aggregates.items():
            for row in agg.advance(watermark):
                rec = {k: v for k, v in row.items() if not k.startswith("_")}
                rec.update(_ts=row["ts"], _p=row["_partition"], _key=row["_key"])
                out.append(StageOutput(self._by_id[pid], rec, row["_window_start"], row["ts"]))
        if self.engine is not None and watermark < END_OF_TIME:
            floor = max(self._time, -(2**62))
            out.extend(self._derived(ev, clamp=floor) for ev in self.engine.advance(watermark))
        elif self.engine is not None:
            out.extend(self._derived(ev, clamp=self._time)
                       for ev in self.engine.advance(END_OF_TIME))
        out = self._limit(out)
        for pid, limiter in self.limiters.items():
            stage = self._by_id[pid]
            out.extend(StageOutput(stage, rec, start, end)
                       for rec, start, end in limiter.advance(watermark))
        return out

    def _limit(self, outputs: list[StageOutput]) -> list[StageOutput]:
        """OUTPUT ... EVERY: a limited stage's results pass its limiter (its
        timeout events do not); what it holds comes out in _release."""
        if not self.limiters:
            return outputs
        out: list[StageOutput] = []
        for o in outputs:
            limiter = self.limiters.get(plan_id(o.stage))
            if limiter is None or o.record["type"] != self._produces[plan_id(o.stage)]:
                out.append(o)
                continue
            out.extend(StageOutput(o.stage, rec, start, end) for rec, start, end in
                       limiter.offer(o.record["_p"], o.record, o.start_ts, o.end_ts))
        return out

    def _derived(self, ev: DerivedEvent, clamp: int | None = None) -> StageOutput:
        stage = self._by_id[ev.plan_id]
        ts = ev.end_ts if clamp is None else max(ev.end_ts, clamp)
        rec: Record = {"type": ev.event_type, **_decode(ev.fields, self.strings)}
        rec.update(_ts=ts, _p=ev.partition, _key=self._keys.get(ev.partition, ""))
        return StageOutput(stage, rec, ev.start_ts, ev.end_ts)

    def _run(self, per_partition: Mapping[int, list[Record]],
             active_now: Mapping[int, frozenset[str]]) -> list[StageOutput]:
        groups: dict[frozenset[str], list[Record]] = defaultdict(list)
        for part, records in per_partition.items():
            active = active_now.get(part, self._last_active.get(part, frozenset()))
            groups[active].extend(records)
        outputs: list[StageOutput] = []
        for active, records in groups.items():
            outputs += self._run_group(active, records)
        return outputs

    def _run_group(self, active: frozenset[str], records: list[Record]) -> list[StageOutput]:
        available: dict[str, list[Record]] = defaultdict(list)
        for r in records:
            available[r["type"]].append(r)
        outputs: list[StageOutput] = []
        pending: list[str] = []  # pattern stages waiting for one engine call
        pending_types: set[str] = set()  # what they produce
        for stage in self.stages:
            pid = plan_id(stage)
            if pid not in active:
                continue
            needs = self._consumes[pid]
            if needs & pending_types:
                outputs += self._flush(pending, available)
                pending_types.clear()
            if not any(available.get(t) for t in needs):
                continue
            if isinstance(stage.plan, AggregatePlan):
                self._aggregate(pid, available[stage.plan.source_type])
            else:
                pending.append(pid)
                produced = self._produces[pid]
                if produced is not None:
                    pending_types.add(produced)
        outputs += self._flush(pending, available)
        return outputs

    def _flush(self, pending: list[str], available: dict[str, list[Record]]
               ) -> list[StageOutput]:
        """Run the waiting pattern stages in one engine call; what they derive
        is available to the stages after them."""
        if not pending:
            return []
        new = self._limit(self._call_engine(pending, available))
        for o in new:
            available[o.record["type"]].append(o.record)
        pending.clear()
        return new

    def _aggregate(self, pid: str, src: list[Record]) -> None:
        self.aggregates[pid].add(
            src, np.fromiter((r["_ts"] for r in src), np.int64, len(src)),
            np.fromiter((r["_p"] for r in src), np.int64, len(src)),
            {r["_p"]: r["_key"] for r in src})

    def _call_engine(self, plan_ids: list[str], available: Mapping[str, list[Record]]
                     ) -> list[StageOutput]:
        assert self.engine is not None
        types: set[str] = set()
        for pid in plan_ids:
            types |= self._consumes[pid]
        records = [r for t in types for r in available.get(t, ())]
        if not records:
            return []
        records.sort(key=lambda r: r["_ts"])
        schemas = {t: self._schemas.get(t, {}) for t in types}
        batch = EventBatch.from_records(records, schemas, self.strings, type_field="type",
                                        ts_field="_ts", partition_of=_partition_of,
                                        first_seq=self._seq)
        self._seq += len(records)
        # results held back by the engine (after-match skip, timeouts) carry
        # older timestamps: they happen now
        out = [self._derived(ev, clamp=self._clock)
               for ev in self.engine.process(batch, plan_ids)]
        self._report_overflows()
        return out

    def _report_overflows(self) -> None:
        """Integer overflows (a value outside 64 bits, made missing) are
        data problems the user should see: one warning per plan and call."""
        assert self.engine is not None
        for pid, count in self.engine.overflows().items():
            new = count - self._overflows_seen.get(pid, 0)
            if new > 0:
                self._overflows_seen[pid] = count
                log.warning("plan %s: %d integer result(s) outside the 64-bit range were "
                            "treated as missing (null)", pid, new,
                            extra={"plan_id": pid, "overflows": new})

    # ------------------------------------------------------------ state
    def identities(self, plan_ids: Iterable[str]) -> list[str]:
        """Plan ids -> the queries' stable identities (for stored state)."""
        return sorted(self._identity[p] for p in plan_ids if p in self._identity)

    def plan_ids(self, identities: Iterable[str]) -> frozenset[str]:
        by_identity = {ident: pid for pid, ident in self._identity.items()}
        return frozenset(by_identity[i] for i in identities if i in by_identity)

    def snapshot(self, partitions: Iterable[int]) -> dict[str, Any]:
        """Everything needed to resume these partitions, as plain data: per
        query identity its state and the fingerprint of the plan that wrote it
        (engine run state per partition, aggregation tables), plus the string
        pool, seq counter and the contexts' activation history."""
        partitions = sorted(set(partitions))
        engine_state: dict[int, dict[str, Any]] = {}
        if self.engine is not None:
            engine_state = {p: self.engine.snapshot(p) for p in partitions}
        queries: dict[str, Any] = {}
        for pid, ident in self._identity.items():
            if pid in self.aggregates:
                state: Any = self.aggregates[pid].snapshot()
            else:
                state = [[p, engine_state[p][pid]] for p in partitions
                         if pid in engine_state.get(p, {})]
            queries[ident] = {"plan": self._fingerprint[pid], "state": state}
        ids = self._identity
        return {"format": STATE_FORMAT,
                "engine_format": _engine_format(self.engine),
                "strings": [self.strings.string(i) for i in range(len(self.strings))],
                "seq": self._seq, "time": self._time,
                "last_active": [[p, sorted(ids[x] for x in a if x in ids)]
                                for p, a in self._last_active.items() if p in partitions],
                "keys": [[p, k] for p, k in self._keys.items() if p in partitions],
                "history": [[p, [[ts, sorted(ids[x] for x in a if x in ids)] for ts, a in h]]
                            for p, h in self._history.items() if p in partitions],
                "queries": queries,
                "limiters": [[self._identity[pid], tagged.encode(
                    (lim.held, lim.seen, lim.closed_before))]
                    for pid, lim in self.limiters.items()]}

    def restore(self, state: Mapping[str, Any]) -> None:
        """The inverse of snapshot(), by query identity: a query of this plan
        gets the state stored under its identity (or, renamed, under the
        identity of a query with the very same plan); a stored query this plan
        does not have is dropped; a query whose plan changed while it holds
        state is refused (StateCompatibilityError names it)."""
        self._check_format(state)
        self._seq, self._time = int(state["seq"]), int(state["time"])
        by_identity = {ident: pid for pid, ident in self._identity.items()}
        stored = dict(state["queries"])
        renamed = _renames(stored, by_identity, self._fingerprint)
        engine_state: dict[int, dict[str, Any]] = defaultdict(dict)
        for ident, entry in stored.items():
            pid = self._carried(ident, entry, by_identity.get(ident) or renamed.get(ident))
            if pid is None:
                continue
            if pid in self.aggregates:
                self.aggregates[pid].restore(entry["state"])
                self.aggregates[pid].strings = self.strings
            else:
                for p, data in entry["state"]:
                    engine_state[int(p)][pid] = data
        if self.engine is not None:
            for p, plans in engine_state.items():
                self.engine.restore(p, plans)
        ids = {**by_identity, **renamed}
        self._last_active.update({int(p): frozenset(ids[x] for x in a if x in ids)
                                  for p, a in state["last_active"]})
        self._keys.update({int(p): k for p, k in state["keys"]})
        self._history.update({int(p): [(int(ts), frozenset(ids[x] for x in a if x in ids))
                                       for ts, a in h] for p, h in state["history"]})
        for ident, data in state["limiters"]:
            pid = ids.get(ident)
            if pid in self.limiters:
                lim = self.limiters[pid]
                lim.held, lim.seen, lim.closed_before = tagged.decode(data)


    def _check_format(self, state: Mapping[str, Any]) -> None:
        if state.get("format") != STATE_FORMAT:
            raise StateCompatibilityError(f"stage state format {state.get('format')} is not "
                                          f"{STATE_FORMAT}")
        if self.engine is not None and state["engine_format"] != _engine_format(self.engine):
            raise StateCompatibilityError(
                f"the pattern engine's state format {state['engine_format']} is not "
                f"{_engine_format(self.engine)} (written by another engine version)")
        for i, text in enumerate(state["strings"]):
            if self.strings.code(text) != i:  # stored rows hold these codes
                raise StateCompatibilityError("restoring into a graph that interned other "
                                              "strings first")

    def _carried(self, ident: str, entry: Mapping[str, Any], pid: str | None) -> str | None:
        """The plan id a stored query's state goes to; None when it is dropped
        (the query left the model, or it changed while holding nothing)."""
        if pid is None:
            if _holds(entry["state"]):
                log.info("query %s is no longer in the model: its state is dropped", ident)
            return None
        if entry["plan"] != self._fingerprint[pid]:
            if _holds(entry["state"]):
                raise StateCompatibilityError(
                    f"query {self._identity[pid]}: its plan changed, and the state it holds "
                    "was written by the old plan; keep the query as it was, or give the "
                    "changed query a new name so that it starts empty")
            return None
        return pid


def _engine_format(engine: PatternEngine | None) -> str:
    return engine_state_format(engine)


def _holds(state: Any) -> bool:
    """Does a stored query state hold anything (an aggregate's open windows,
    an engine's partitions)?"""
    if isinstance(state, dict):  # an aggregate's open windows; a count/session window: any
        return bool(state.get("slots", True))
    return bool(state)


def _renames(stored: Mapping[str, Any], current: Mapping[str, str],
             fingerprints: Mapping[str, str]) -> dict[str, str]:
    """Stored identity -> plan id for queries renamed without other change:
    the stored and the new query have the same plan fingerprint and that
    fingerprint is unique on both sides."""
    gone = {i: e["plan"] for i, e in stored.items() if i not in current}
    new = {pid: fingerprints[pid] for i, pid in current.items() if i not in stored}
    out = {}
    for ident, fp in gone.items():
        olds = [i for i, f in gone.items() if f == fp]
        news = [pid for pid, f in new.items() if f == fp]
        if len(olds) == 1 and len(news) == 1:
            out[ident] = news[0]
    return out


def _partition_of(record: Mapping[str, Any]) -> int:
    return record["_p"]


def _decode(fields: Mapping[str, Any], strings: StringPool) -> dict[str, Any]:
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in fields.items()}
