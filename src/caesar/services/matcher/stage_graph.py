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

import pickle
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
from caesar.plans.temporal import TemporalPlan
from caesar.services.common.config import EngineFactory
from caesar.services.common.messages import (
    END_OF_TIME,
    Transaction,
)
from caesar.services.matcher.aggregate import AggregateExecutor
from caesar.services.matcher.engines import build_engine

STATE_VERSION = 2
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
        self.aggregates: dict[str, AggregateExecutor] = {
            plan_id(s): AggregateExecutor(s.plan, self.strings)
            for s in self.stages if isinstance(s.plan, AggregatePlan)}
        self._by_id = {plan_id(s): s for s in self.stages}
        self._consumes = {plan_id(s): consumed_types(s) for s in self.stages}
        self._produces = {plan_id(s): output_type(s) for s in self.stages}
        self._last_active: dict[int, frozenset[str]] = {}
        # partition -> [(ts, active stages from ts on)]: a result released
        # late (a closed aggregation window) runs with the contexts of its own
        # timestamp, not those of the step that released it.
        self._history: dict[int, list[tuple[int, frozenset[str]]]] = {}
        # Context-independent plans: partition -> [(ts, stages whose context
        # does not hold from ts on)] (`mute`); their outputs, judged at their
        # own timestamp like released results, feed no other stage.
        self._muted: dict[int, list[tuple[int, frozenset[str]]]] = {}
        self._keys: dict[int, str] = {}
        self._seq = 0
        self._time = -(2**62)

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
            outputs += self._run(parts, {p: self._active_at(p, ts) for p in parts})
        return outputs

    def _forget_history(self, watermark: int) -> None:
        # Results not yet released are stamped >= watermark (their windows
        # end after it): keep the entry in force at watermark and later ones.
        # The muting of this step's outputs is read after this call (for
        # results stamped from the previous step on): keep what held then.
        muted_bound = min(watermark, self._time)
        for hist, bound in [*((h, watermark) for h in self._history.values()),
                            *((h, muted_bound) for h in self._muted.values())]:
            i = bisect_right(hist, bound, key=lambda h: h[0]) - 1
            if i > 0:
                del hist[:i]

    def mute(self, partition: int, ts: int, muted: frozenset[str]) -> None:
        """Context-independent plans: from `ts` on, `muted` stages' outputs are dropped."""
        hist = self._muted.setdefault(partition, [])
        if not hist or hist[-1][1] != muted:
            hist.append((ts, muted))

    def muted_at(self, partition: int, ts: int) -> frozenset[str]:
        hist = self._muted.get(partition)
        if not hist:
            return frozenset()
        i = bisect_right(hist, ts, key=lambda h: h[0]) - 1
        return hist[max(i, 0)][1]

    def muted_state(self) -> dict[int, list[tuple[int, frozenset[str]]]]:
        return {p: list(h) for p, h in self._muted.items()}

    def restore_muted(self, state: Mapping[int, Any]) -> None:
        # Older snapshots hold partition -> muted stages of the latest transaction.
        self._muted = {p: list(h) if isinstance(h, list) else [(-(2**62), frozenset(h))]
                       for p, h in state.items()}

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
        new = self._call_engine(pending, available)
        for o in new:
            if self._muted and o.stage.plan.plan_id in self.muted_at(o.record["_p"],
                                                                     o.record["_ts"]):
                continue
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
        return [self._derived(ev) for ev in self.engine.process(batch, plan_ids)]

    # ------------------------------------------------------------ state
    def snapshot(self, partitions: Iterable[int]) -> bytes:
        """Everything needed to resume these partitions (engine run state per
        partition, aggregation tables, string pool, seq counter)."""
        partitions = set(partitions)
        engine_state = {}
        if self.engine is not None:
            engine_state = {p: self.engine.snapshot(p) for p in partitions}
        aggs = {pid: a.snapshot() for pid, a in self.aggregates.items()}
        strings = [self.strings.string(i) for i in range(len(self.strings))]
        history = {p: list(h) for p, h in self._history.items() if p in partitions}
        return pickle.dumps((STATE_VERSION, engine_state, aggs, strings, self._seq, self._time,
                             self._last_active, self._keys, history))

    def restore(self, state: bytes) -> None:
        version, engine_state, aggs, strings, seq, time, last_active, keys, history = \
            pickle.loads(state)
        if version != STATE_VERSION:
            raise PlanError(f"stage state version {version} is not {STATE_VERSION}")
        for s in strings:
            self.strings.code(s)
        for pid, blob in aggs.items():
            if pid in self.aggregates:
                self.aggregates[pid].restore(blob)
                self.aggregates[pid].strings = self.strings
        if self.engine is not None:
            for p, blob in engine_state.items():
                self.engine.restore(p, blob)
        self._seq, self._time = seq, time
        self._last_active.update(last_active)
        self._keys.update(keys)
        self._history.update(history)


def _partition_of(record: Mapping[str, Any]) -> int:
    return record["_p"]


def _decode(fields: Mapping[str, Any], strings: StringPool) -> dict[str, Any]:
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in fields.items()}
