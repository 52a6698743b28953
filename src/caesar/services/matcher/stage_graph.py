"""The stage dataflow the matcher and the deriver both run.

`StageGraph` runs a list of stages (pattern plans on one engine, aggregation
plans on `AggregateExecutor`s) one event-time step at a time: the outputs of a
stage feed the later stages that consume its type in the same step
(topological order, as the compiler emits them). Events of one step are
grouped by the set of stages allowed to see them (their partition's contexts)
so that one engine call covers many partitions: Ray and engine calls carry
batches, never single events. Events stay numpy columns from the input to the
engine and between stages; only the results a caller asks for (`emit`)
become records.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from operator import itemgetter
from typing import Any, Protocol, cast

import numpy as np

from caesar.errors import PlanError
from caesar.events.batch import (
    NUMPY_DTYPES,
    EventBatch,
    StringPool,
    TypeColumns,
    distinct_inverse,
    group_rows,
)
from caesar.events.grouping import is_sorted
from caesar.plans.aggregate import AggregatePlan
from caesar.plans.engine import DerivedEvent, PatternEngine
from caesar.plans.execution import Stage, plan_output, plan_reads
from caesar.plans.functions import FunctionFailure
from caesar.plans.matches import MatchBatch, MatchColumns
from caesar.plans.pattern import PatternPlan
from caesar.plans.serialize import stage_identity, state_fingerprint
from caesar.plans.temporal import TemporalPlan
from caesar.services.common.config import EngineFactory
from caesar.services.common.messages import END_OF_TIME, Alert, DeadLetter, Transaction, TxnBatch
from caesar.services.matcher.aggregate import AggregateExecutor
from caesar.services.matcher.engines import (
    build_engine,
    engine_state_format,
    engine_state_formats_read,
)
from caesar.services.matcher.key_table import KeyTable
from caesar.services.matcher.output_rate import OutputLimiter
from caesar.services.matcher.partitions import ContextPartitions
from caesar.services.matcher.windows import WindowExecutor
from caesar.services.store import tagged
from caesar.services.store.state_format import StateCompatibilityError

STATE_FORMAT = 3  # layout of snapshot(); 2: output limiters; 3: context partitions
log = logging.getLogger(__name__)
_FEW_ROWS = 16  # _by_active_set: below this, rows are grouped in Python
Record = dict[str, Any]  # event attributes + "type", "_ts", "_p" (partition id), "_key"
_ABSENT = object()


def default_engine_factory(plans: Sequence[PatternPlan]) -> PatternEngine:
    """The Cython engine (built on install; tests pass the reference engine)."""
    from caesar.services.matcher.engine import CythonEngine

    return CythonEngine(plans)


def is_public(name: str) -> bool:
    """Whether a record key is an output field (not the type, nor an internal
    `_ts`/`_p`/`_key`): what an alert carries of a record."""
    return name != "type" and name[:1] != "_"


def plan_id(stage: Stage) -> str:
    return stage.plan.plan_id


def consumed_types(stage: Stage) -> frozenset[str]:
    return frozenset(plan_reads(stage.plan))


def output_type(stage: Stage) -> str | None:
    return plan_output(stage.plan)


@dataclass
class StageOutput:
    stage: Stage
    record: Record
    start_ts: int
    end_ts: int


# What a step returns: records, or what `StageGraph.outputs_of` made of
# an emitted stage's match columns (the matcher's alerts).
Output = StageOutput | Alert


class ColumnOutputs(Protocol):
    """Makes the caller's outputs of an emitted stage's rows straight from
    its match columns (services/matcher/alerts.py), with their engine order."""

    def of_columns(self, stage: Stage, mc: MatchColumns, rows: np.ndarray | slice,
                   homes: list[int], texts: dict[int, str]
                   ) -> Sequence[tuple[int, Alert]]: ...


class ColumnarEngine(Protocol):
    """An engine that also returns its matches as columns (CythonEngine)."""

    def process_columns(self, batch: EventBatch,
                        active: Collection[str] | None = None) -> MatchBatch: ...


Active = Mapping[int, frozenset[str]]  # partition id -> plan ids that may see its events


@dataclass
class StageGraph:
    """`emit`: the plan ids whose results the caller wants back as
    `StageOutput` records (outputs leaving the service, context transitions);
    None = every stage. Results of other stages only feed later stages, as
    columns."""

    stages: Sequence[Stage]
    schemas: Mapping[str, Mapping[str, str]]
    engine_factory: EngineFactory = default_engine_factory
    strings: StringPool = field(default_factory=StringPool)
    emit: Collection[str] | None = None
    # CONTEXTS PER (caesar.services.matcher.partitions): the key attributes,
    # how many leading attributes of a partition key name the stream
    # partition, and the stages that run in every context (they see whole
    # stream partitions).
    context_key: tuple[str, ...] = ()
    stream_attrs: int = 0
    everywhere: Collection[str] = ()
    # The stages a partition's events may reach when the step did not say
    # (a result landing in another context partition); default: the set of
    # the partition's latest transaction.
    active_of: Callable[[int], frozenset[str]] | None = None
    # Without active_of: the set of a partition that had no transaction yet.
    default_active: frozenset[str] = frozenset()
    # Results that feed later stages pass as the engine's match columns when
    # it makes them (process_columns); False: one DerivedEvent each (A/B).
    columnar: bool = True
    # Emitted rows of match columns become these outputs instead of
    # StageOutput records (the matcher: alerts; None: records).
    outputs_of: ColumnOutputs | None = None

    def __post_init__(self) -> None:
        ids = [plan_id(s) for s in self.stages]
        if len(set(ids)) != len(ids):
            raise PlanError(f"duplicate plan ids among stages: {ids}")
        patterns = [s.plan for s in self.stages if isinstance(s.plan, PatternPlan | TemporalPlan)]
        self._schemas = {t: dict(cols) for t, cols in self.schemas.items()}
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
        # limited results are held per record (OutputLimiter), so they take
        # the DerivedEvent path
        self._columnar_route = (self.columnar and not self.limiters
                                and hasattr(self.engine, "process_columns"))
        self._clock = -(2**62)  # the time of the step being run
        self._overflows_seen: dict[str, int] = {}
        self._by_id = {plan_id(s): s for s in self.stages}
        self._identity = {plan_id(s): stage_identity(s) for s in self.stages}
        self._fingerprint = {plan_id(s): state_fingerprint(s.plan) for s in self.stages}
        self._consumes = {plan_id(s): consumed_types(s) for s in self.stages}
        self._produces = {plan_id(s): output_type(s) for s in self.stages}
        self._consumed = frozenset(t for ts in self._consumes.values() for t in ts)
        self._emit = None if self.emit is None else frozenset(self.emit)
        self._type_rank = {t: i for i, t in enumerate(sorted(self._schemas))}
        self._last_active: dict[int, frozenset[str]] = {}
        # partition -> [(ts, active stages from ts on)]: a result released
        # late (a closed aggregation window) runs with the contexts of its own
        # timestamp, not those of the step that released it.
        self._history: dict[int, list[tuple[int, frozenset[str]]]] = {}
        # Context-independent plans: partition -> [(ts, stages whose context
        # does not hold from ts on)] (`mute`); their results, judged at their
        # own timestamp like released results, feed no other stage.
        self._muted: dict[int, list[tuple[int, frozenset[str]]]] = {}
        # Partitions whose history / muting holds more than one entry: the
        # only ones _forget_history has to look at (it runs every step; a
        # walk over every partition made steps O(partitions), bench/peers).
        self._long_history: set[int] = set()
        self._long_muted: set[int] = set()
        self._keys: dict[int, str] = {}
        self._seq = 0
        self._time = -(2**62)
        # failed user-defined function calls, as dead letters for the
        # service to write (take_dead_letters)
        self.dead_letters: list[DeadLetter] = []
        self.partitions = ContextPartitions(self.stream_attrs, self.context_key) \
            if self.context_key else None
        self._home_table = KeyTable(1 + len(self.context_key)) if self.context_key else None
        self._home_version = -1
        # Stages active whatever contexts hold: one engine call for all rows
        # (with CONTEXTS PER: rows of whole stream partitions).
        self._everywhere = frozenset(self.everywhere)
        self._levels = stage_levels(
            ids, {plan_id(s) for s in self.stages if isinstance(s.plan, AggregatePlan)},
            self._consumes, self._produces)
        # Aggregates reading what other stages derive, by cascade level
        # (release_levels); None: none does, and one release per step suffices.
        self._cascade = release_levels(
            ids, self._consumes, self._produces,
            {pid: cast(AggregatePlan, self._by_id[pid].plan).source_type
             for pid in self.aggregates},
            {pid for pid, st in self._by_id.items()
             if not _wave_safe(st.plan) or st.output_rate is not None})
        # Waves (see `step`): one step may cover several timestamps when no
        # stage holds results for later release or places results in other
        # partitions, so nothing but a partition's own rows can change what
        # its rows see.
        self.waves = (not self.aggregates and not self.limiters and self.partitions is None
                      and all(_wave_safe(s.plan) for s in self.stages))

    # ------------------------------------------------------------ driving
    def step(self, ts: int, batch: TxnBatch | EventBatch, active: Active,
             stamps: Mapping[int, int] | None = None, last: int | None = None
             ) -> list[Output]:
        """Process every transaction at `ts`: the rows of `batch` (all at ts),
        each partition's events reaching the stages `active[partition]`.
        First releases what became final before `ts` (closed aggregation
        windows, end-negation results), then runs the stages.

        A wave (only where `self.waves`): the rows span ts..`last`, each
        partition's at one timestamp, `stamps[partition]`. Partitions are
        independent in the engine and nothing is released between ts and
        last, so this equals one step per timestamp."""
        if last is not None and last != ts and not self.waves:
            raise PlanError("a step over several timestamps needs a wave-safe stage graph")
        if isinstance(batch, TxnBatch):
            self._keys.update(batch.keys)
            if self.partitions is not None:
                self.partitions.learn(batch.keys)
            events = batch.events
        else:
            events = batch
        for part, act in active.items():
            self._last_active[part] = act
            at = ts if stamps is None else stamps.get(part, ts)
            hist = self._history.get(part)
            if hist is None:
                self._history[part] = [(at, act)]
            elif hist[-1][1] != act:
                hist.append((at, act))
                self._long_history.add(part)
        outputs = self._release_and_run(ts)
        self._clock = ts
        if len(events):
            outputs += self._run(events.in_pool(self.strings), active)
        self._time = ts if last is None else last
        self._collect_failures()
        return outputs

    def step_transactions(self, ts: int, items: Sequence[tuple[Transaction, frozenset[str]]]
                          ) -> list[Output]:
        """`step` for transactions given one by one (tests)."""
        batch = TxnBatch.of([t for t, _ in items], self._schemas, self.strings)
        return self.step(ts, batch, {t.partition: a for t, a in items})

    def advance(self, watermark: int) -> list[Output]:
        """No event with ts < watermark follows: release and run what that finalises."""
        return self._release_and_run(watermark)

    def _release_and_run(self, watermark: int) -> list[Output]:
        if self._cascade is not None:
            outputs = self._release_cascade(watermark)
        else:
            released = self._release(watermark)
            outputs = [o for o, _ in released if self._emits(o.stage)]
            outputs += self._run_released(released)
        self._forget_history(watermark)
        self._collect_failures()
        return outputs

    def _release_cascade(self, watermark: int) -> list[Output]:
        """`_release` + `_run_released` where an aggregate reads results that
        are released (another aggregate's windows, a pattern's end negation
        or timeout): advancing every aggregate to the watermark first would
        make those results late for it. So time advances from one window
        close to the next (every window or OUTPUT ... EVERY interval closing
        at a step is stamped just before it); at each step the engine's
        released results run first, then each cascade level's closed
        windows, a level's results fed before the next level is advanced.
        Aggregates advance to window ends only, and released pattern results
        are stamped no earlier than the last one (where every aggregate still
        takes them): a stamp that does not depend on when progress came."""
        assert self._cascade is not None
        outputs: list[Output] = []
        done = min((a.watermark for a in self.aggregates.values()), default=self._time)
        while True:
            due = self._due(watermark)
            step = min(due, default=watermark)
            floor = max(self._time, done)
            # each batch runs before the next is made (a level before the
            # next is advanced)
            batches: list[Callable[[], list[StageOutput]]] = []
            if self.engine is not None:
                batches.append(partial(self._engine_released, step, floor))
            if due:
                batches += [partial(self._closed_windows, level, step)
                            for level in self._cascade]
            if self.limiters:
                # results pass the limiters; what these held comes out after
                # each batch (not offered to them again), before the next level
                flush: Callable[[], list[StageOutput]] = partial(self._limited, step)
                batches = [flush, *(b for make in batches
                                    for b in (partial(self._limited_from, make), flush))]
            for make in batches:
                released = self._kept(make())
                outputs += [o for o, _ in released if self._emits(o.stage)]
                outputs += self._run_released(released)
            if due:
                done = step
            elif not self._due(watermark):  # the last step opened no window that closes by now
                return outputs

    def _due(self, watermark: int) -> list[int]:
        """When the aggregates' windows and the limiters' intervals that
        `watermark` closes are released."""
        return [t for a in (*self.aggregates.values(), *self.limiters.values())
                if (t := a.next_release()) is not None and t <= watermark]

    def take_dead_letters(self) -> list[DeadLetter]:
        out, self.dead_letters = self.dead_letters, []
        return out

    def _collect_failures(self) -> None:
        """User-defined function calls that raised or returned a wrong value
        (each made its value missing): one dead letter per plan and reason
        with the number of calls, so a broken function cannot flood the topic."""
        found: list[tuple[str, FunctionFailure]] = []
        if self.engine is not None:
            found += self.engine.function_failures()
        for pid, agg in self.aggregates.items():
            found += [(pid, f) for f in agg.take_failures()]
        if not found:
            return
        counts: dict[tuple[str, str], int] = {}
        for pid, failure in found:
            key = (pid, str(failure))
            counts[key] = counts.get(key, 0) + 1
        for (pid, text), n in counts.items():
            log.warning("plan %s: %s (%d call(s), value treated as missing)", pid, text, n,
                        extra={"plan_id": pid})
            self.dead_letters.append(DeadLetter(
                "function", f"plan {pid}: {text}" + (f" ({n} calls)" if n > 1 else ""),
                "", -1, -1))

    def _emits(self, stage: Stage) -> bool:
        return self._emit is None or plan_id(stage) in self._emit

    def _active_at(self, partition: int, ts: int) -> frozenset[str]:
        hist = self._history.get(partition)
        if not hist:
            return self._active_for(partition)
        i = bisect_right(hist, ts, key=lambda h: h[0]) - 1
        return hist[max(i, 0)][1]

    def _active_for(self, partition: int, given: Active | None = None) -> frozenset[str]:
        """The stages a partition's events reach: what the step says, else
        (a stream partition) the stream-wide stages, else `active_of`, else
        the partition's latest set."""
        if given is not None:
            found = given.get(partition)
            if found is not None:
                return found
        if self.partitions is not None and self.partitions.is_stream(partition):
            return self._everywhere
        if self.active_of is not None:
            return self.active_of(partition)
        return self._last_active.get(partition, self.default_active)

    def _home(self, partition: int, fields: Mapping[str, Any]) -> int:
        """The context partition a result belongs to: the one its key
        attributes name (CONTEXTS PER); a result without them stays where it
        was derived."""
        parts = self.partitions
        if parts is None:
            return partition
        values = tuple(fields.get(a, _ABSENT) for a in self.context_key)
        if _ABSENT in values:
            return partition
        return parts.context_of(parts.stream_id(partition), values)

    def _key_of(self, partition: int) -> str:
        found = self._keys.get(partition)
        if found is None and self.partitions is not None:
            found = self.partitions.text.get(partition)
        return found or ""

    def _run_released(self, released: list[tuple[StageOutput, bool]]) -> list[Output]:
        """Run released results in timestamp order, each with the stages
        active for its partition at its timestamp."""
        by_ts: dict[int, list[StageOutput]] = defaultdict(list)
        for out, feeds in released:
            if feeds:
                by_ts[out.record["_ts"]].append(out)
        outputs: list[Output] = []
        for ts in sorted(by_ts):
            rows = by_ts[ts]
            self._clock = ts
            parts = {o.record["_p"] for o in rows}
            batch = self._columns_of([(o.record["type"], o.record, ts, o.record["_p"])
                                      for o in rows])
            outputs += self._run(batch, {p: self._active_at(p, ts) for p in parts})
        return outputs

    def _forget_history(self, watermark: int) -> None:
        # Results not yet released are stamped >= watermark (their windows
        # end after it): keep the entry in force at watermark and later ones.
        # The muting of this step's results is read after this call (for
        # results stamped from the previous step on): keep what held then.
        _trim(self._history, self._long_history, watermark)
        _trim(self._muted, self._long_muted, min(watermark, self._time))

    def mute(self, partition: int, ts: int, muted: frozenset[str]) -> None:
        """Context-independent plans: from `ts` on, `muted` stages' results are dropped."""
        hist = self._muted.setdefault(partition, [])
        if not hist or hist[-1][1] != muted:
            hist.append((ts, muted))
            if len(hist) > 1:
                self._long_muted.add(partition)

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
        self._long_muted = {p for p, h in self._muted.items() if len(h) > 1}

    def _is_muted(self, o: StageOutput) -> bool:
        return bool(self._muted) and plan_id(o.stage) in self.muted_at(o.record["_p"],
                                                                       o.record["_ts"])

    def discard(self, plan_ids: Iterable[str], partition: int) -> None:
        ids = [p for p in plan_ids if p in self._by_id and
               isinstance(self._by_id[p].plan, PatternPlan | TemporalPlan)]
        if ids and self.engine is not None:
            self.engine.discard(ids, partition)

    # ------------------------------------------------------------ internals
    def _release(self, watermark: int) -> list[tuple[StageOutput, bool]]:
        """Results final at `watermark`, each with whether a stage consumes it."""
        out = self._closed_windows(self.aggregates, watermark)
        if self.engine is not None:
            out += self._engine_released(watermark, self._time)
        if self.limiters:
            out = self._limit(out) + self._limited(watermark)
        return self._kept(out)

    def _engine_released(self, watermark: int, floor: int) -> list[StageOutput]:
        assert self.engine is not None
        return [self._derived(ev, clamp=floor)
                for ev in self.engine.advance(min(watermark, END_OF_TIME))]

    def _closed_windows(self, pids: Iterable[str], watermark: int) -> list[StageOutput]:
        """The rows of the windows of aggregates `pids` that `watermark` closes."""
        out: list[StageOutput] = []
        for pid in pids:
            stage = self._by_id[pid]
            for row in self.aggregates[pid].advance(watermark):
                rec = {k: v for k, v in row.items() if not k.startswith("_")}
                home = self._home(row["_partition"], rec)
                rec.update(_ts=row["ts"], _p=home, _key=self._key_of(home))
                out.append(StageOutput(stage, rec, row["_window_start"], row["ts"]))
        return out

    def _limited_from(self, make: Callable[[], list[StageOutput]]) -> list[StageOutput]:
        return self._limit(make())

    def _limited(self, watermark: int) -> list[StageOutput]:
        """What the OUTPUT ... EVERY limiters let out at `watermark`."""
        return [StageOutput(self._by_id[pid], rec, start, end)
                for pid, limiter in self.limiters.items()
                for rec, start, end in limiter.advance(watermark)]

    def _kept(self, out: list[StageOutput]) -> list[tuple[StageOutput, bool]]:
        """Released results not muted, each with whether a stage consumes it."""
        return [(o, o.record["type"] in self._consumed) for o in out if not self._is_muted(o)]

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

    def _derived(self, ev: DerivedEvent, clamp: int | None = None,
                 home: int | None = None) -> StageOutput:
        """`home`: its context partition, when the caller placed it already."""
        stage = self._by_id[ev.plan_id]
        ts = ev.end_ts if clamp is None else max(ev.end_ts, clamp)
        rec: Record = {"type": ev.event_type, **_decode(ev.fields, self.strings)}
        if home is None:
            home = self._home(ev.partition, rec)
        rec.update(_ts=ts, _p=home, _key=self._key_of(home))
        return StageOutput(stage, rec, ev.start_ts, ev.end_ts)

    def _columns_of(self, rows: Sequence[tuple[str, Mapping[str, Any], int, int]]
                    ) -> EventBatch:
        """Columns of derived events (type, fields, ts, partition) of the types
        a stage consumes; seq follows the order of `rows`."""
        consumed = self._consumed
        by_type: dict[str, list[int]] = defaultdict(list)
        for i, row in enumerate(rows):
            if row[0] in consumed:
                by_type[row[0]].append(i)
        out = {}
        for t, idx in by_type.items():
            # one transpose in C: (types, records, ts, partitions)
            _, values, ts, parts = zip(*(rows if len(idx) == len(rows) else
                                         [rows[i] for i in idx]), strict=True)
            out[t] = TypeColumns.from_values(
                values, self._schemas.get(t, {}), self.strings,
                ts=np.array(ts, dtype=np.int64), seq=np.asarray(idx, dtype=np.int64),
                partition=np.array(parts, dtype=np.int64))
        return EventBatch(out, self.strings)

    def _run(self, events: EventBatch, active_now: Active) -> list[Output]:
        """Run the stages in order on `events` and what they derive, each row
        reaching only the stages active for its partition. A stage that runs
        in every context gets all rows of its types in one engine call; the
        others get, per distinct active set, the rows of the partitions in
        it (a result lands in the partition its own key names, so it is
        placed when a stage reads it, not when it is derived). Level by
        level (stage_levels): the stages of a level in as few calls as that
        allows."""
        available: dict[str, list[TypeColumns]] = {t: [c] for t, c in events.by_type.items()
                                                   if len(c)}
        sets: dict[int, frozenset[str]] = {}  # partition -> active set, for this run

        def active(p: int) -> frozenset[str]:
            found = sets.get(p)
            if found is None:
                found = sets[p] = self._active_for(p, active_now)
            return found

        outputs: list[Output] = []
        for aggregates, patterns in self._levels:
            for pid in aggregates:
                src = available.get(cast(AggregatePlan, self._by_id[pid].plan).source_type)
                if src:
                    self._aggregate(pid, TypeColumns.concat(src), active)
            ready = [pid for pid in patterns if any(t in available for t in self._consumes[pid])]
            if ready:
                outputs.extend(self._flush(ready, available, active))
        return outputs

    def _flush(self, pending: list[str], available: dict[str, list[TypeColumns]],
               active: Callable[[int], frozenset[str]]) -> list[Output]:
        """Run the waiting pattern stages: the ones of every context in one
        engine call, the others once per distinct active set."""
        outputs: list[Output] = []
        wide = [p for p in pending if p in self._everywhere]
        if wide:
            outputs += self._call_engine(wide, available, None,
                                         stream=self.partitions is not None)
        narrow = [p for p in pending if p not in self._everywhere]
        if narrow:
            for act, rows in self._by_active_set(narrow, available, active):
                outputs += self._call_engine([p for p in narrow if p in act], available, rows)
        return outputs

    def _by_active_set(self, plan_ids: list[str], available: dict[str, list[TypeColumns]],
                       active: Callable[[int], frozenset[str]]
                       ) -> list[tuple[frozenset[str], dict[str, np.ndarray]]]:
        """The rows of the types `plan_ids` read, per distinct active set
        that holds one of them: (set, type -> row mask)."""
        types = {t for pid in plan_ids for t in self._consumes[pid] if t in available}
        groups: dict[frozenset[str], dict[str, np.ndarray]] = {}
        for t in types:
            parts = np.concatenate([c.partition for c in available[t]])
            if len(parts) <= _FEW_ROWS:
                # a step of a few rows (one event per timestamp): numpy's
                # unique and isin cost more than a look at each row
                plist = parts.tolist()
                act_of = {p: active(p) for p in sorted(set(plist))}
                acts = [act_of[p] for p in plist]
                for act in dict.fromkeys(act_of.values()):  # np.unique's order
                    if any(p in act for p in plan_ids):
                        groups.setdefault(act, {})[t] = np.fromiter(
                            (a == act for a in acts), dtype=bool, count=len(acts))
                continue
            uniq, inverse = distinct_inverse(parts)
            for act, members in _groups(uniq.tolist(), active).items():
                if not any(p in act for p in plan_ids):
                    continue
                member = np.zeros(len(uniq), dtype=bool)  # a table, not np.isin's sort
                member[members] = True
                mask = member[inverse.reshape(-1)]
                if mask.any():
                    groups.setdefault(act, {})[t] = mask
        return list(groups.items())

    def _aggregate(self, pid: str, rows: TypeColumns,
                   active: Callable[[int], frozenset[str]]) -> None:
        if pid not in self._everywhere:
            uniq, inverse = distinct_inverse(rows.partition)
            keep = np.array([pid in active(p) for p in uniq.tolist()], dtype=bool)
            if not keep.any():
                return
            if not keep.all():
                rows = rows.take(keep[inverse.reshape(-1)])
        elif self.partitions is not None:
            rows = TypeColumns(rows.ts, rows.seq, self.partitions.stream_of(rows.partition),
                               rows.columns, rows.nulls, rows.ingest)
        self.aggregates[pid].add_columns(rows, self._keys)

    def _in_arrival_order(self, types: list[str], cols: dict[str, TypeColumns]
                          ) -> dict[str, TypeColumns]:
        """Seq numbers (from self._seq) giving the engine's arrival order: by
        ts, then type, then the rows' order."""
        if len(types) == 1:
            (t,) = types
            c = cols[t]
            if not is_sorted(c.ts):  # mostly sorted: a check, not a sort and a compare
                c = c.take(np.argsort(c.ts, kind="stable"))
            c.seq = np.arange(self._seq, self._seq + len(c), dtype=np.int64)
            cols[t] = c
        else:
            ts = np.concatenate([cols[t].ts for t in types])
            seq = np.arange(self._seq, self._seq + len(ts), dtype=np.int64)
            # type rank and row rise along the concatenation: in ts order it
            # is the arrival order already (LR: always), no sort
            if not is_sorted(ts):
                rank = np.concatenate([np.full(len(cols[t]), i) for i, t in enumerate(types)])
                pos = np.concatenate([np.arange(len(cols[t])) for t in types])
                seq[np.lexsort((pos, rank, ts))] = seq.copy()
            off = 0
            for t in types:
                n = len(cols[t])
                c = cols[t]
                cols[t] = TypeColumns(c.ts, seq[off:off + n], c.partition, c.columns, c.nulls,
                                      c.ingest)
                off += n
        return cols

    def _call_engine(self, plan_ids: list[str], available: dict[str, list[TypeColumns]],
                     rows: Mapping[str, np.ndarray] | None, stream: bool = False
                     ) -> list[Output]:
        """One engine call for `plan_ids` on the rows of the types they read
        (`rows`: type -> mask of the rows to take, None = all; `stream`: as
        rows of their stream partitions); what they derive is added to
        `available` for later stages."""
        assert self.engine is not None
        types = sorted({t for pid in plan_ids for t in self._consumes[pid] if t in available
                        and (rows is None or t in rows)}, key=lambda t: self._type_rank[t])
        if not types:
            return []
        cols = {t: TypeColumns.concat(available[t]) for t in types}
        if rows is not None:
            cols = {t: c.take(rows[t]) for t, c in cols.items()}
        cols = self._in_arrival_order(types, cols)
        n_rows = sum(len(c) for c in cols.values())
        self._seq += n_rows
        if stream:
            assert self.partitions is not None
            cols = {t: TypeColumns(c.ts, c.seq, self.partitions.stream_of(c.partition), c.columns,
                                   c.nulls, c.ingest) for t, c in cols.items()}
        batch = EventBatch(cols, self.strings)
        if self._columnar_route:
            matches = cast(ColumnarEngine, self.engine).process_columns(batch, plan_ids)
            self._report_overflows()
            return self._route_columns(matches, available) if len(matches) else []
        derived = self.engine.process(batch, plan_ids)
        self._report_overflows()
        return list(self._route(derived, available)) if derived else []

    def _route_columns(self, matches: MatchBatch, available: dict[str, list[TypeColumns]]
                       ) -> list[Output]:
        """_route_plain on the engine's match columns: what later stages read
        goes to them as columns, without a DerivedEvent and a dict per match
        in between (LR: ~3 intermediate results per report); only emitted
        results become records. Same rows, order and seqs as _route_plain."""
        clock = self._clock
        muted, consumed, emit = self._muted, self._consumed, self._emit
        fed: list[tuple[str, np.ndarray | slice, np.ndarray, np.ndarray, MatchColumns]] = []
        emitted: list[tuple[int, Output]] = []
        sources = 0  # match columns emitted from: one is in the engine's order already
        for mc in matches:
            n = len(mc)
            if n == 0:
                continue
            ts = np.maximum(mc.end_ts, clock)
            home = self._homes(mc)
            keep = None
            if muted:
                keep = np.fromiter((mc.plan_id not in self.muted_at(h, t) for h, t in
                                    zip(home.tolist(), ts.tolist(), strict=True)),
                                   dtype=bool, count=n)
            if mc.event_type in consumed:
                # every row: a slice, so the columns below are views, not copies
                rows = np.flatnonzero(keep) if keep is not None else slice(None)
                fed.append((mc.event_type, rows, ts, home, mc))
            if emit is None or mc.plan_id in emit:
                emitted += self._records_of(mc, ts, home, keep)
                sources += 1
        if fed:
            self._feed(fed, available)
        if sources > 1:
            emitted.sort(key=itemgetter(0))
        return [o for _order, o in emitted]


    def _feed(self, fed: list[tuple[str, np.ndarray | slice, np.ndarray, np.ndarray,
                                    MatchColumns]],
              available: dict[str, list[TypeColumns]]) -> None:
        """The rows of match columns later stages read, as their input
        columns in `available`: by type, in the engine's order."""
        # seq: the row's place among every fed row, in the engine's order
        ords = [mc.order[rows] for _t, rows, _ts, _h, mc in fed]
        orders = ords[0] if len(ords) == 1 else np.concatenate(ords)
        if is_sorted(orders):  # one plan's results, as the engine made them (distinct)
            seq = np.arange(len(orders), dtype=np.int64)
        else:
            seq = np.empty(len(orders), dtype=np.int64)
            seq[np.argsort(orders, kind="stable")] = np.arange(len(orders), dtype=np.int64)
        by_type: dict[str, list[TypeColumns]] = defaultdict(list)
        off = 0
        for (t, rows, ts, home, mc), o in zip(fed, ords, strict=True):
            k = len(o)
            by_type[t].append(self._fed_columns(t, mc, rows, k, ts[rows], seq[off:off + k],
                                                home[rows]))
            off += k
        for t, parts in by_type.items():
            c = TypeColumns.concat(parts)
            if len(parts) > 1 and not is_sorted(c.seq):
                c = c.take(np.argsort(c.seq, kind="stable"))
            available.setdefault(t, []).append(c)

    def _homes(self, mc: MatchColumns) -> np.ndarray:
        """_home of every row, asked once per distinct (partition, key
        values) while the partitions known stay the same (a C table)."""
        parts = self.partitions
        if parts is None or any(a not in mc.fields for a in self.context_key):
            return mc.partition  # without key attributes a result stays where it was derived
        if self._home_table is not None and self._home_version != parts.version:
            self._home_table.clear()  # a partition learnt since may have another stream
            self._home_version = parts.version
        return context_homes(mc.partition, [mc.fields[a] for a in self.context_key],
                             lambda p, key: parts.context_of(parts.stream_id(p), key),
                             self._home_table)

    def _records_of(self, mc: MatchColumns, ts: np.ndarray, home: np.ndarray,
                    keep: np.ndarray | None) -> Sequence[tuple[int, Output]]:
        """The emitted rows as (engine order, StageOutput), as _derived makes
        them; or what `outputs_of` makes of them."""
        stage = self._by_id[mc.plan_id]
        rows = np.flatnonzero(keep) if keep is not None else slice(None)
        homes = home[rows].tolist()
        texts = {h: self._key_of(h) for h in set(homes)}
        if self.outputs_of is not None:
            return self.outputs_of.of_columns(stage, mc, rows, homes, texts)
        names = tuple(mc.fields)
        values = zip(*(c[rows].tolist() for c in mc.fields.values()), strict=True) \
            if names else [()] * len(homes)
        et = mc.event_type
        out: list[tuple[int, Output]] = []
        for order, start, end, t, h, vals in zip(
                mc.order[rows].tolist(), mc.start_ts[rows].tolist(), mc.end_ts[rows].tolist(),
                ts[rows].tolist(), homes, values, strict=True):
            rec: Record = {"type": et, **dict(zip(names, vals, strict=True)),
                           "_ts": t, "_p": h, "_key": texts[h]}
            out.append((order, StageOutput(stage, rec, start, end)))
        return out

    def _fed_columns(self, t: str, mc: MatchColumns, rows: np.ndarray | slice, n: int,
                     ts: np.ndarray, seq: np.ndarray, home: np.ndarray) -> TypeColumns:
        """Rows `rows` (n of them) of a match column as the input columns of
        type t, as TypeColumns.from_values makes them from the records."""
        schema = self._schemas.get(t, {})
        lists: dict[str, list[Any]] = {}
        cols: dict[str, np.ndarray] = {}
        for attr, kind in schema.items():
            col = mc.fields.get(attr)
            if col is None:
                lists[attr] = [None] * n
            elif col.dtype == object or kind == "string":
                lists[attr] = col[rows].tolist()
            else:
                cols[attr] = np.asarray(col[rows], dtype=NUMPY_DTYPES[kind])
        if not lists:
            return TypeColumns(ts=ts, seq=seq, partition=home, columns=cols)
        out = TypeColumns.from_lists(lists, {a: schema[a] for a in lists}, self.strings,
                                     ts, seq, home)
        out.columns = {a: cols[a] if a in cols else out.columns[a] for a in schema}
        return out

    def _route(self, derived: Sequence[DerivedEvent], available: dict[str, list[TypeColumns]]
               ) -> list[StageOutput]:
        """What an engine call derived: fed to later stages (as columns added
        to `available`), returned when asked for (`emit`)."""
        feed: list[tuple[str, Mapping[str, Any], int, int]] = []
        if self.limiters:  # limited results feed later stages only once released
            outputs = self._route_limited(derived, feed)
        else:
            outputs = self._route_plain(derived, feed)
        if feed:
            for t, c in self._columns_of(feed).by_type.items():
                available.setdefault(t, []).append(c)
        return outputs

    def _route_limited(self, derived: Sequence[DerivedEvent],
                       feed: list[tuple[str, Mapping[str, Any], int, int]]
                       ) -> list[StageOutput]:
        outputs: list[StageOutput] = []
        for o in self._limit([self._derived(ev, clamp=self._clock) for ev in derived]):
            if self._is_muted(o):
                continue
            rec = o.record
            if rec["type"] in self._consumed:
                feed.append((rec["type"], rec, rec["_ts"], rec["_p"]))
            if self._emits(o.stage):
                outputs.append(o)
        return outputs

    def _route_plain(self, derived: Sequence[DerivedEvent],
                     feed: list[tuple[str, Mapping[str, Any], int, int]]) -> list[StageOutput]:
        outputs: list[StageOutput] = []
        clock = self._clock
        home_of = self._home_memo()
        muted, consumed, emit = self._muted, self._consumed, self._emit
        for ev in derived:
            # results held back by the engine (after-match skip, timeouts)
            # carry older timestamps: they happen now
            end = ev.end_ts
            ts = end if end > clock else clock
            home = home_of(ev.partition, ev.fields)
            if muted and ev.plan_id in self.muted_at(home, ts):
                continue  # context-independent plans: its context does not hold
            if ev.event_type in consumed:
                feed.append((ev.event_type, ev.fields, ts, home))
            if emit is None or ev.plan_id in emit:
                outputs.append(self._derived(ev, clamp=clock, home=home))
        return outputs

    def _home_memo(self) -> Callable[[int, Mapping[str, Any]], int]:
        """`_home` remembering each (partition, key values) it placed, for
        the results of one engine call (most share a few context partitions;
        the memo lives no longer than the call, so it never sees a partition
        learnt later)."""
        parts = self.partitions
        if parts is None or len(self.context_key) != 1:
            return self._home
        (attr,) = self.context_key
        memo: dict[tuple[int, Any], int] = {}

        def home(partition: int, fields: Mapping[str, Any]) -> int:
            value = fields.get(attr, _ABSENT)
            if value is _ABSENT:
                return partition
            key = (partition, value)
            found = memo.get(key)
            if found is None:
                found = memo[key] = parts.context_of(parts.stream_id(partition), (value,))
            return found

        return home

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
        wanted = set(partitions)
        ctx = self.partitions
        if ctx is not None:  # their stream partitions and the context partitions of those
            streams = {ctx.stream_id(p) for p in wanted}
            wanted |= streams
            wanted |= {p for p in ctx.text if ctx.stream_id(p) in streams}
        partitions = sorted(wanted)
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
                "context_partitions": ctx.state() if ctx is not None else {},
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
        if self.partitions is not None:
            self.partitions.restore(state["context_partitions"])
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
                self.engine.restore(p, plans, self.strings)
        ids = {**by_identity, **renamed}
        self._last_active.update({int(p): frozenset(ids[x] for x in a if x in ids)
                                  for p, a in state["last_active"]})
        self._keys.update({int(p): k for p, k in state["keys"]})
        self._history.update({int(p): [(int(ts), frozenset(ids[x] for x in a if x in ids))
                                       for ts, a in h] for p, h in state["history"]})
        self._long_history = {p for p, h in self._history.items() if len(h) > 1}
        for ident, data in state["limiters"]:
            pid = ids.get(ident)
            if pid in self.limiters:
                lim = self.limiters[pid]
                lim.held, lim.seen, lim.closed_before = tagged.decode(data)


    def _check_format(self, state: Mapping[str, Any]) -> None:
        if state.get("format") != STATE_FORMAT:
            raise StateCompatibilityError(f"stage state format {state.get('format')} is not "
                                          f"{STATE_FORMAT}")
        if self.engine is not None and \
                state["engine_format"] not in engine_state_formats_read(self.engine):
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


def _wave_safe(plan: Any) -> bool:
    """Does this plan derive each result while processing the event that
    completes it (never on `advance`)? TPStream plans and aggregates run on
    time too."""
    return isinstance(plan, PatternPlan) and plan.derives_on_arrival


def _trim(history: dict[int, list[tuple[int, frozenset[str]]]], long: set[int],
          bound: int) -> None:
    """Drop the entries of each history in `long` that a later one
    replaced at or before `bound` (the one in force at `bound` stays);
    a partition left with one entry leaves `long`."""
    for p in list(long):
        hist = history.get(p)
        if hist is not None and len(hist) > 1 and hist[1][0] <= bound:
            i = bisect_right(hist, bound, key=lambda h: h[0]) - 1
            del hist[:i]
        if hist is None or len(hist) <= 1:
            long.discard(p)


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


def _decode(fields: Mapping[str, Any], strings: StringPool) -> dict[str, Any]:
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in fields.items()}


def _groups(partitions: list[int], active: Callable[[int], frozenset[str]]
            ) -> dict[frozenset[str], list[int]]:
    """Indexes of `partitions` by their active set."""
    out: dict[frozenset[str], list[int]] = {}
    for i, p in enumerate(partitions):
        out.setdefault(active(p), []).append(i)
    return out


def stage_levels(ids: Sequence[str], aggregates: Collection[str],
                 consumes: Mapping[str, frozenset[str]], produces: Mapping[str, str | None]
                 ) -> list[tuple[list[str], list[str]]]:
    """The stages `ids` (in stage order; `aggregates`: those of aggregate
    plans) by level, each level's (aggregate ids, pattern ids) in stage
    order: what _run runs at once. A stage comes a level after the earlier
    pattern stages making a type it reads; a pattern stage not before an
    earlier stage reading the type it makes (that one must not see its
    results, as in stage order: in a level aggregates run first, and a
    call's results feed later calls only). An aggregate makes nothing here
    (its results come when a window closes). Stage order used to flush the
    waiting stages at the first stage reading one's results, so independent
    later ones ran alone: LR's LeftSegment passed over the reports in a
    call of its own, after SegmentEntry's.
    """
    level: dict[str, int] = {}
    makers: dict[str, list[str]] = {}  # type -> earlier pattern stages making it
    readers: dict[str, list[str]] = {}  # type -> earlier stages reading it
    for pid in ids:
        after = [level[q] + 1 for t in consumes[pid] for q in makers.get(t, ())]
        made = None if pid in aggregates else produces[pid]
        if made is not None:
            after += [level[q] for q in readers.get(made, ())]
        level[pid] = max(after, default=0)
        for t in consumes[pid]:
            readers.setdefault(t, []).append(pid)
        if made is not None:
            makers.setdefault(made, []).append(pid)
    out: list[tuple[list[str], list[str]]] = [([], []) for _ in range(max(level.values(),
                                                                            default=-1) + 1)]
    for pid in ids:
        out[level[pid]][0 if pid in aggregates else 1].append(pid)
    return [lv for lv in out if lv[0] or lv[1]]


def release_levels(ids: Sequence[str], consumes: Mapping[str, frozenset[str]],
                   produces: Mapping[str, str | None], sources: Mapping[str, str],
                   releasing: Collection[str]) -> list[list[str]] | None:
    """The aggregates `sources` (id -> type it reads) by cascade level, in
    stage order: level 0 reads no aggregate's results, level n + 1 reads
    (directly or through pattern stages) those of level n. None when no
    aggregate reads a type that can come out of a release (an aggregate's
    windows; `releasing`: the pattern stages deriving on advance, their
    readers): then every result an aggregate reads comes with the events of
    its step, and all may close at once, as `_release` does."""
    above: dict[str, set[str]] = {}  # type -> the aggregates whose results reach it
    late: set[str] = set()  # types released on advance, or derived from those
    level: dict[str, int] = {}
    for pid in ids:
        reads = consumes[pid]
        if pid in sources:
            ups = above.get(sources[pid], set())
            level[pid] = 1 + max((level[a] for a in ups), default=-1)
            reach = {pid}
        else:
            reach = set().union(*(above.get(t, set()) for t in reads))
        made = produces[pid]
        if made is not None:
            above.setdefault(made, set()).update(reach)
            if pid in sources or pid in releasing or not late.isdisjoint(reads):
                late.add(made)
    if all(src not in late for src in sources.values()):
        return None
    out: list[list[str]] = [[] for _ in range(max(level.values()) + 1)]
    for pid in ids:
        if pid in level:
            out[level[pid]].append(pid)
    return out


def context_homes(partition: np.ndarray, cols: Sequence[np.ndarray],
                  home: Callable[[int, tuple[Any, ...]], int],
                  table: KeyTable | None = None) -> np.ndarray:
    """home(partition, key values) of every row, asked once per distinct
    (partition, key values) row; with `table` (a KeyTable of 1 + len(cols)
    ints), once per distinct row over every call with that table."""
    ints = partition.dtype == np.int64 and all(c.dtype == np.int64 for c in cols)
    if table is not None and ints:
        key_rows = np.empty((1 + len(cols), len(partition)), dtype=np.int64)
        key_rows[0] = partition
        for i, c in enumerate(cols):
            key_rows[1 + i] = c
        return table.lookup(key_rows, lambda wanted: [home(k[0], k[1:]) for k in wanted])
    if len(partition) > 8 and ints:
        # int keys: the distinct rows found in C, then one call per distinct
        # row (LR: ~3 results per report, a few hundred segments per call),
        # not a Python step per row
        first, inverse = group_rows([partition, *cols])
        distinct = zip(partition[first].tolist(), *(c[first].tolist() for c in cols),
                       strict=True)
        return np.array([home(k[0], k[1:]) for k in distinct], dtype=np.int64)[inverse]
    keys = list(zip(partition.tolist(), *(c.tolist() for c in cols), strict=True))
    memo: dict[tuple[Any, ...], int] = {}
    for key in keys:
        if key not in memo:
            memo[key] = home(key[0], key[1:])
    return np.array([memo[k] for k in keys], dtype=np.int64)
