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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from caesar.plans.tables import AcepPlan, ActorPlan
from caesar.services.scheduler.acep.schedulers import NoScheduler, make_scheduler
from caesar.services.scheduler.acep.steps import (
    ActionError,
    Match,
    Output,
    Read,
    Request,
    Step,
    StepResult,
    run_step,
)
from caesar.services.scheduler.acep.tables import (
    Key,
    PlainTables,
    Position,
    Row,
    VersionedTables,
)

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


def steps_of(plan: AcepPlan, workload: Sequence[Transaction]) -> list[list[_StepSpec]]:
    """Per transaction (in ts order), its steps in rank order."""
    by_name = {a.name: a for a in plan.actors}
    out: list[list[_StepSpec]] = []
    last = None
    for ts, per_actor in workload:
        if last is not None and ts <= last:
            raise ValueError(f"transactions must come in increasing ts order ({ts} after {last})")
        last = ts
        specs = [_StepSpec((ts, by_name[n].rank), by_name[n], m)
                 for n, m in per_actor.items() if m]
        specs.sort(key=lambda s: s.pos)
        if specs:
            out.append(specs)
    return out


def run_serial(plan: AcepPlan, workload: Sequence[Transaction]) -> RunResult:
    store = PlainTables(plan.tables)
    result = StepResult()
    for txn in steps_of(plan, workload):
        for spec in txn:
            for _ in run_step(spec.actor, spec.pos[0], spec.matches, store.view(spec.pos),
                              result):
                pass
    return RunResult(result.outputs, result.errors, store.snapshot()).sort()


class _Lane:
    def __init__(self) -> None:
        self.queue: list[_StepSpec] = []
        self.next = 0  # index of the head step
        self.step: Step | None = None
        self.request: Request | None = None

    def head(self) -> _StepSpec | None:
        return self.queue[self.next] if self.next < len(self.queue) else None


class Simulator:
    """Deterministic interleaving of lanes under one scheduler."""

    def __init__(self, plan: AcepPlan, scheduler: NoScheduler | str, *,
                 gc_every: int = 16) -> None:
        self.plan = plan
        self.scheduler = make_scheduler(scheduler) if isinstance(scheduler, str) else scheduler
        self.store: VersionedTables | PlainTables = (
            VersionedTables(plan.tables) if self.scheduler.versioned else PlainTables(plan.tables))
        self.gc_every = gc_every

    def run(self, workload: Sequence[Transaction],
            choose: Callable[[int], int] | random.Random | int = 0) -> RunResult:
        pick = _chooser(choose)
        txns = steps_of(self.plan, workload)
        lanes = {a.name: _Lane() for a in self.plan.actors}
        registered: set[Position] = set()
        result = StepResult()
        out = RunResult()
        dispatched = finished = 0
        sched = self.scheduler
        while True:
            enabled: list[Callable[[], None]] = []
            if dispatched < len(txns):
                def dispatch() -> None:
                    nonlocal dispatched
                    for spec in txns[dispatched]:
                        sched.register(spec.pos, spec.actor.read_tables, spec.actor.write_tables)
                        registered.add(spec.pos)
                        lanes[spec.actor.name].queue.append(spec)
                    dispatched += 1
                enabled.append(dispatch)
            for lane in lanes.values():
                spec = lane.head()
                if spec is None or spec.pos not in registered:
                    continue
                if lane.step is None:
                    if sched.may_start(spec.pos):
                        enabled.append(self._mover(lane, spec, result))
                elif self._granted(spec.pos, lane.request):
                    enabled.append(self._mover(lane, spec, result))
            if not enabled:
                if any(lane.head() is not None for lane in lanes.values()):
                    raise RuntimeError(f"{sched.name}: no step can move (deadlock)")
                break
            before = sum(lane.next for lane in lanes.values())
            enabled[pick(len(enabled))]()
            if sum(lane.next for lane in lanes.values()) > before:
                finished += 1
                if isinstance(self.store, VersionedTables):
                    out.max_versions = max(out.max_versions, self.store.version_count())
                    if finished % self.gc_every == 0:
                        out.collected += self.store.gc(sched.low_water_mark())
        out.outputs, out.errors = result.outputs, result.errors
        out.tables = self.store.snapshot()
        return out.sort()

    def _granted(self, pos: Position, request: Request | None) -> bool:
        if request is None:
            return True
        if isinstance(request, Read):
            return self.scheduler.may_read(pos, request.table)
        return self.scheduler.may_write(pos, request.table)

    def _mover(self, lane: _Lane, spec: _StepSpec, result: StepResult) -> Callable[[], None]:
        def move() -> None:
            if lane.step is None:
                lane.step = run_step(spec.actor, spec.pos[0], spec.matches,
                                     self.store.view(spec.pos), result)
            try:
                lane.request = next(lane.step)
            except StopIteration:
                self.scheduler.finish(spec.pos)
                lane.step, lane.request = None, None
                lane.next += 1
        return move


def _chooser(choose: Callable[[int], int] | random.Random | int) -> Callable[[int], int]:
    if isinstance(choose, int):
        rng = random.Random(choose)
        return lambda n: rng.randrange(n)
    if isinstance(choose, random.Random):
        r = choose
        return lambda n: r.randrange(n)
    return choose


def run_threaded(plan: AcepPlan, workload: Sequence[Transaction], scheduler: str, *,
                 op_cost: float = 0.0, step_cost: float = 0.0,
                 on_step: Callable[[Position, float], None] | None = None) -> RunResult:
    """One thread per actor. `op_cost` seconds are spent (sleeping: a store
    round trip) on every granted table access and `step_cost` on every step
    (its pattern work), so the schedulers' concurrency shows in wall time.
    `on_step(pos, seconds)` gets each step's latency from its registration."""
    sched = make_scheduler(scheduler)
    store: VersionedTables | PlainTables = (
        VersionedTables(plan.tables) if sched.versioned else PlainTables(plan.tables))
    txns = steps_of(plan, workload)
    cond = threading.Condition()
    lanes: dict[str, list[_StepSpec]] = {a.name: [] for a in plan.actors}
    registered_at: dict[Position, float] = {}
    with cond:
        for txn in txns:  # InsertLock for every arriving transaction, in ts order
            for spec in txn:
                sched.register(spec.pos, spec.actor.read_tables, spec.actor.write_tables)
                registered_at[spec.pos] = time.perf_counter()
                lanes[spec.actor.name].append(spec)
    results = {name: StepResult() for name in lanes}
    failures: list[BaseException] = []
    done = [0]

    def wait(check: Callable[[], bool]) -> None:
        with cond:
            while not check():
                cond.wait()

    def lane_run(name: str) -> None:
        try:
            for spec in lanes[name]:
                wait(lambda spec=spec: sched.may_start(spec.pos))  # type: ignore[misc]
                if step_cost:
                    time.sleep(step_cost)
                with cond:
                    step = run_step(spec.actor, spec.pos[0], spec.matches, store.view(spec.pos),
                                    results[name])
                while True:
                    with cond:
                        try:
                            request = next(step)
                        except StopIteration:
                            break
                    if isinstance(request, Read):
                        wait(lambda r=request: sched.may_read(spec.pos, r.table))  # type: ignore[misc]
                    else:
                        wait(lambda r=request: sched.may_write(spec.pos, r.table))  # type: ignore[misc]
                    if op_cost:
                        time.sleep(op_cost)
                with cond:
                    sched.finish(spec.pos)
                    done[0] += 1
                    if isinstance(store, VersionedTables) and done[0] % 64 == 0:
                        store.gc(sched.low_water_mark())
                    cond.notify_all()
                if on_step is not None:
                    on_step(spec.pos, time.perf_counter() - registered_at[spec.pos])
        except BaseException as exc:  # surfaced after join
            failures.append(exc)
            with cond:
                cond.notify_all()

    threads = [threading.Thread(target=lane_run, args=(n,), daemon=True) for n in lanes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    out = RunResult(tables=store.snapshot())
    for r in results.values():
        out.outputs += r.outputs
        out.errors += r.errors
    return out.sort()
