"""Executors of s-transactions.

- `run_serial`: the reference (oracle): every step to completion, in
  position order `(ts, rank)`, on a single-version store. Its outputs and
  final tables define correctness (the paper's Definition 6).
- `Simulator`: several actors (one lane per rule / query, like the paper's
  operator threads) whose steps really interleave: at every point where a
  step asks for a table (and where the dispatcher registers the next
  transaction) a `choose` function picks which enabled lane moves next. Seeded
  random or hypothesis-drawn choices explore schedules deterministically.
- `run_threaded`: the same lanes on OS threads, the scheduler behind one
  condition variable (used by the benchmark).
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from caesar.plans.tables import AcepPlan, ActorPlan, TableSchema
from caesar.services.scheduler.acep.schedulers import SEI, NoScheduler, Resource, make_scheduler
from caesar.services.scheduler.acep.steps import (
    ActionError,
    Match,
    Output,
    Read,
    Request,
    Step,
    StepResult,
    resources,
    run_step,
)
from caesar.services.scheduler.acep.tables import (
    TOP,
    Key,
    PlainTables,
    Position,
    Row,
    TableView,
    VersionedTables,
)

Chooser = Callable[[Sequence[str]], int]
# Lock granularity (the paper's lockG): whole tables, or rows where the match names them.
Granularity = Literal["table", "tuple"]
# One s-transaction: its timestamp and, per actor name, the matches at it.
Transaction = tuple[int, Mapping[str, Sequence[Match]]]


@dataclass
class RunResult:
    outputs: list[Output] = field(default_factory=list)
    errors: list[ActionError] = field(default_factory=list)
    tables: dict[str, dict[Key, Row]] = field(default_factory=dict)
    max_versions: int = 0
    collected: int = 0

    def sort(self) -> RunResult:
        self.outputs.sort(key=lambda o: o.order)
        self.errors.sort(key=lambda e: (e.ts, e.actor, e.where, e.reason))
        return self


@dataclass
class _StepSpec:
    pos: Position
    actor: ActorPlan
    matches: Sequence[Match]
    schemas: Mapping[str, TableSchema]

    def resources(self, granularity: Granularity) -> tuple[Collection[Resource],
                                                           Collection[Resource]]:
        """Algorithm 1 (InsertLock): what the step may read and write."""
        if granularity == "table":
            return self.actor.read_tables, self.actor.write_tables
        reads, writes = resources(self.actor, self.matches, self.schemas)
        return ({t if k is None else (t, k) for t, k in reads},
                {t if k is None else (t, k) for t, k in writes})


def _resource(request: Request, granularity: Granularity) -> Resource:
    if granularity == "table" or request.key is None:
        return request.table
    return (request.table, request.key)


def steps_of(plan: AcepPlan, workload: Sequence[Transaction]) -> list[list[_StepSpec]]:
    """Per transaction (in ts order), its steps in rank order."""
    by_name = {a.name: a for a in plan.actors}
    schemas = {t.name: t for t in plan.tables}
    out: list[list[_StepSpec]] = []
    last = None
    for ts, per_actor in workload:
        if last is not None and ts <= last:
            raise ValueError(f"transactions must come in increasing ts order ({ts} after {last})")
        last = ts
        specs = [_StepSpec((ts, by_name[n].rank), by_name[n], m, schemas)
                 for n, m in per_actor.items() if m]
        specs.sort(key=lambda s: s.pos)
        if specs:
            out.append(specs)
    return out


def _run_to_end(spec: _StepSpec, view: TableView, result: StepResult) -> None:
    """A step with every table access granted as it asks."""
    for _ in run_step(spec.actor, spec.pos[0], spec.matches, view, result):
        pass


def run_serial(plan: AcepPlan, workload: Sequence[Transaction]) -> RunResult:
    store = PlainTables(plan.tables)
    result = StepResult()
    for txn in steps_of(plan, workload):
        for spec in txn:
            _run_to_end(spec, store.view(spec.pos), result)
    return RunResult(result.outputs, result.errors, store.snapshot()).sort()


class _Lane:
    def __init__(self) -> None:
        self.queue: deque[_StepSpec] = deque()  # registered steps not finished yet
        self.step: Step | None = None
        self.request: Request | None = None

    def head(self) -> _StepSpec | None:
        return self.queue[0] if self.queue else None


class Simulator:
    """Deterministic interleaving of lanes under one scheduler."""

    def __init__(self, plan: AcepPlan, scheduler: NoScheduler | str, *,
                 gc_every: int = 16, granularity: Granularity = "table") -> None:
        self.plan = plan
        self.granularity = granularity
        self.scheduler = make_scheduler(scheduler) if isinstance(scheduler, str) else scheduler
        self.store: VersionedTables | PlainTables = (
            VersionedTables(plan.tables) if self.scheduler.versioned else PlainTables(plan.tables))
        self.gc_every = gc_every
        # Versions from this position on are kept even below the low-water
        # mark (the versions a reader outside the run may still ask for).
        self.keep_from: Position = (TOP, TOP)
        self.lanes: dict[str, _Lane] = {a.name: _Lane() for a in plan.actors}
        self.result = StepResult()
        self.out = RunResult()
        self.finished = 0

    def run(self, workload: Sequence[Transaction],
            choose: Chooser | random.Random | int = 0, *, snapshot: bool = True) -> RunResult:
        """Run `workload` (later than any run before: the store and the
        scheduler carry over) to the end; its outputs, errors and (with
        `snapshot`) the tables after it. `choose(labels)` picks the next move
        among the enabled ones (an actor's name: its lane moves; "dispatch":
        the next transaction arrives); an int or a Random picks at random."""
        self.result, self.out = StepResult(), RunResult()
        if isinstance(self.scheduler, SEI) and not callable(choose) \
                and not any(lane.queue for lane in self.lanes.values()):
            self._run_in_order(steps_of(self.plan, workload))
            return self._finish(snapshot)
        pick = _chooser(choose)
        pending = list(reversed(steps_of(self.plan, workload)))
        while True:
            enabled = self._enabled()
            if pending:
                enabled.append(("dispatch", lambda: self._dispatch(pending.pop())))
            if not enabled:
                if any(lane.head() is not None for lane in self.lanes.values()):
                    raise RuntimeError(f"{self.scheduler.name}: no step can move (deadlock)")
                break
            enabled[pick([label for label, _ in enabled])][1]()
        return self._finish(snapshot)

    def _finish(self, snapshot: bool) -> RunResult:
        self.out.outputs, self.out.errors = self.result.outputs, self.result.errors
        if snapshot:
            self.out.tables = self.store.snapshot()
        return self.out.sort()

    def _run_in_order(self, txns: list[list[_StepSpec]]) -> None:
        """SEI lets only the oldest open step move, so whatever the seeded
        choices, the steps run one after the other in position order: run
        them so, without choosing among moves (the simulation's bookkeeping
        per move cost more than the steps in the embedded pipeline). Only
        for seeded choices: a chooser function still sees every move."""
        for txn in txns:
            for spec in txn:
                self.scheduler.register(spec.pos, *spec.resources(self.granularity))
            for spec in txn:
                # SEI grants every read and write of the step it started
                _run_to_end(spec, self.store.view(spec.pos), self.result)
                self.scheduler.finish(spec.pos)
                self._step_done()

    def _dispatch(self, txn: list[_StepSpec]) -> None:
        """InsertLock (Algorithm 1) for an arriving transaction."""
        for spec in txn:
            self.scheduler.register(spec.pos, *spec.resources(self.granularity))
            self.lanes[spec.actor.name].queue.append(spec)

    def _enabled(self) -> list[tuple[str, Callable[[], None]]]:
        out: list[tuple[str, Callable[[], None]]] = []
        for name, lane in self.lanes.items():
            spec = lane.head()
            if spec is None:
                continue
            ready = self.scheduler.may_start(spec.pos) if lane.step is None else \
                self._granted(spec.pos, lane.request)
            if ready:
                out.append((name, self._mover(lane, spec)))
        return out

    def _granted(self, pos: Position, request: Request | None) -> bool:
        if request is None:
            return True
        resource = _resource(request, self.granularity)
        if isinstance(request, Read):
            return self.scheduler.may_read(pos, resource)
        return self.scheduler.may_write(pos, resource)

    def _mover(self, lane: _Lane, spec: _StepSpec) -> Callable[[], None]:
        def move() -> None:
            if lane.step is None:
                lane.step = run_step(spec.actor, spec.pos[0], spec.matches,
                                     self.store.view(spec.pos), self.result)
            try:
                lane.request = next(lane.step)
            except StopIteration:
                self.scheduler.finish(spec.pos)
                lane.step, lane.request = None, None
                lane.queue.popleft()
                self._step_done()
        return move

    def _step_done(self) -> None:
        self.finished += 1
        if isinstance(self.store, VersionedTables) and self.finished % self.gc_every == 0:
            self.out.max_versions = max(self.out.max_versions, self.store.version_count())
            self.out.collected += self.store.gc(min(self.scheduler.low_water_mark(),
                                                    self.keep_from))


def _chooser(choose: Chooser | random.Random | int) -> Chooser:
    if isinstance(choose, random.Random | int):
        rng = choose if isinstance(choose, random.Random) else random.Random(choose)
        return lambda labels: rng.randrange(len(labels))
    return choose


class ThreadedRun:
    """One thread per actor (the paper's operator threads). `op_cost` seconds
    are spent (sleeping: a round trip to the store) on every granted table
    access and `step_cost` on every step, so the schedulers' concurrency
    shows in wall time. Transactions arrive all at once, or `arrival_rate`
    per second from a dispatcher thread (InsertLock runs as each arrives).
    `latencies` gets each step's time from its arrival to its end."""

    def __init__(self, plan: AcepPlan, scheduler: str, *, op_cost: float = 0.0,
                 step_cost: float = 0.0, arrival_rate: float | None = None,
                 granularity: Granularity = "table") -> None:
        self.plan = plan
        self.granularity = granularity
        self.sched = make_scheduler(scheduler)
        self.store: VersionedTables | PlainTables = (
            VersionedTables(plan.tables) if self.sched.versioned else PlainTables(plan.tables))
        self.op_cost, self.step_cost = op_cost, step_cost
        self.arrival_rate = arrival_rate
        self.cond = threading.Condition()
        self.latencies: list[float] = []
        self.failures: list[BaseException] = []
        self.arrived: dict[Position, float] = {}
        self.done = 0

    def run(self, workload: Sequence[Transaction]) -> RunResult:
        txns = steps_of(self.plan, workload)
        lanes: dict[str, list[_StepSpec]] = {a.name: [] for a in self.plan.actors}
        for txn in txns:
            for spec in txn:
                lanes[spec.actor.name].append(spec)
        results = {name: StepResult() for name in lanes}
        threads = [threading.Thread(target=self._lane, args=(specs, results[name]), daemon=True)
                   for name, specs in lanes.items()]
        for t in threads:
            t.start()
        self._dispatch(txns)
        for t in threads:
            t.join()
        if self.failures:
            raise self.failures[0]
        out = RunResult(tables=self.store.snapshot())
        for r in results.values():
            out.outputs += r.outputs
            out.errors += r.errors
        return out.sort()

    def _dispatch(self, txns: list[list[_StepSpec]]) -> None:
        """InsertLock for each arriving transaction, in ts order."""
        start = time.perf_counter()
        for i, txn in enumerate(txns):
            if self.arrival_rate:
                delay = start + i / self.arrival_rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            with self.cond:
                for spec in txn:
                    self.sched.register(spec.pos, *spec.resources(self.granularity))
                    self.arrived[spec.pos] = time.perf_counter()
                self.cond.notify_all()

    def _granted(self, pos: Position, request: Request) -> bool:
        resource = _resource(request, self.granularity)
        if isinstance(request, Read):
            return self.sched.may_read(pos, resource)
        return self.sched.may_write(pos, resource)

    def _wait(self, check: Callable[[], bool]) -> None:
        with self.cond:
            while not check():
                self.cond.wait()

    def _lane(self, specs: list[_StepSpec], result: StepResult) -> None:
        try:
            for spec in specs:
                self._step(spec, result)
        except BaseException as exc:  # surfaced by run() after join
            self.failures.append(exc)
            with self.cond:
                self.cond.notify_all()

    def _step(self, spec: _StepSpec, result: StepResult) -> None:
        pos = spec.pos
        self._wait(lambda: pos in self.arrived and self.sched.may_start(pos))
        if self.step_cost:
            time.sleep(self.step_cost)
        with self.cond:
            step = run_step(spec.actor, pos[0], spec.matches, self.store.view(pos), result)
        while True:
            with self.cond:
                request = next(step, None)
            if request is None:
                break
            self._wait(partial(self._granted, pos, request))
            if self.op_cost:
                time.sleep(self.op_cost)
        with self.cond:
            self.sched.finish(pos)
            self.done += 1
            if isinstance(self.store, VersionedTables) and self.done % 64 == 0:
                self.store.gc(self.sched.low_water_mark())
            self.latencies.append(time.perf_counter() - self.arrived[pos])
            self.cond.notify_all()
