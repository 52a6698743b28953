"""The s-transaction schedulers of the ACEP paper, section 5, as lock
managers without I/O: an executor asks them whether a step may start, read
or write a table, and tells them when a step ends.

Steps are registered in position order `(ts, rank)` as their transactions
arrive (the paper's InsertLock, Algorithm 1, runs when the input event
arrives), each with the tables it may read and write (from the compiled
rules: an actor whose matches a step carries may read every table its
conditions, projections and actions read, and write every table its actions
change). Locks are table-level.

- `NoScheduler`: push-based execution, no control; reads see the current
  state (the read-too-late / write-too-late anomalies of section 2).
- `SEI` (5.1): one step at a time, in position order.
- `S2PL` (5.2): read/write locks per table, all requested at registration
  (Phase I) in position order, so lock order is global and no deadlock
  arises; a step starts when all of its locks are granted (a request is
  granted when every earlier request on that table is compatible with it:
  Figure 3's S2PL matrix) and releases them when it ends (Phase II).
- `LWM` (5.3, Algorithm 2): write locks timestamped with the step's
  position; lwm(P) = the oldest write lock on P (Definition 8). A read at
  position p is granted when p <= lwm(P); a write only when p = lwm(P) (the
  step holds the oldest write lock). Reads never block writes (Figure 3's
  LWM matrix); a read sees the newest version <= p (tables.VersionedTables).
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from caesar.services.scheduler.acep.tables import Position

INF: Position = (1 << 62, 0)


class StreamScheduler(Protocol):
    name: str
    versioned: bool  # reads at the step's position (else the current state)

    def register(self, step: Position, reads: frozenset[str], writes: frozenset[str]) -> None: ...

    def may_start(self, step: Position) -> bool: ...

    def may_read(self, step: Position, table: str) -> bool: ...

    def may_write(self, step: Position, table: str) -> bool: ...

    def finish(self, step: Position) -> None: ...

    def low_water_mark(self) -> Position:
        """No unfinished step is older: versions only older steps could
        read may be collected."""
        ...


class _Registry:
    def __init__(self) -> None:
        self.open: dict[Position, None] = {}  # insertion order = position order

    def add(self, step: Position) -> None:
        if self.open and step <= next(reversed(self.open)):
            raise ValueError(f"step {step} registered out of order")
        self.open[step] = None

    def done(self, step: Position) -> None:
        del self.open[step]

    def oldest(self) -> Position:
        return next(iter(self.open), INF)


class NoScheduler:
    name = "none"
    versioned = False

    def __init__(self) -> None:
        self.steps = _Registry()

    def register(self, step: Position, reads: frozenset[str], writes: frozenset[str]) -> None:
        self.steps.add(step)

    def may_start(self, step: Position) -> bool:
        return True

    def may_read(self, step: Position, table: str) -> bool:
        return True

    def may_write(self, step: Position, table: str) -> bool:
        return True

    def finish(self, step: Position) -> None:
        self.steps.done(step)

    def low_water_mark(self) -> Position:
        return self.steps.oldest()


class SEI(NoScheduler):
    """Single-Event-Initiated: the oldest open step runs alone."""

    name = "sei"
    versioned = True

    def may_start(self, step: Position) -> bool:
        return self.steps.oldest() == step


class S2PL(NoScheduler):
    name = "s2pl"
    versioned = True

    def __init__(self) -> None:
        super().__init__()
        self.queues: dict[str, deque[tuple[Position, bool]]] = {}  # table -> (step, write)
        self.locks: dict[Position, list[str]] = {}
        self.started: set[Position] = set()

    def register(self, step: Position, reads: frozenset[str], writes: frozenset[str]) -> None:
        self.steps.add(step)
        tables = sorted(reads | writes)  # lock ordering (by table name)
        for t in tables:
            self.queues.setdefault(t, deque()).append((step, t in writes))
        self.locks[step] = tables

    def _granted(self, step: Position, table: str) -> bool:
        queue = self.queues[table]
        mine = next(w for s, w in queue if s == step)
        for s, w in queue:
            if s == step:
                return True
            if w or mine:  # an earlier writer, or we write behind anyone
                return False
        raise AssertionError("lock not queued")

    def may_start(self, step: Position) -> bool:
        if step in self.started:
            return True
        if all(self._granted(step, t) for t in self.locks[step]):
            self.started.add(step)
            return True
        return False

    def may_read(self, step: Position, table: str) -> bool:
        return step in self.started and table in self.locks[step]

    def may_write(self, step: Position, table: str) -> bool:
        return self.may_read(step, table)

    def finish(self, step: Position) -> None:
        for t in self.locks.pop(step):
            queue = self.queues[t]
            queue.remove(next(e for e in queue if e[0] == step))
        self.started.discard(step)
        self.steps.done(step)


class LWM(NoScheduler):
    name = "lwm"
    versioned = True

    def __init__(self) -> None:
        super().__init__()
        self.write_locks: dict[str, deque[Position]] = {}  # per table, in position order
        self.held: dict[Position, frozenset[str]] = {}

    def register(self, step: Position, reads: frozenset[str], writes: frozenset[str]) -> None:
        self.steps.add(step)
        for t in writes:
            self.write_locks.setdefault(t, deque()).append(step)
        self.held[step] = writes

    def lwm(self, table: str) -> Position:
        queue = self.write_locks.get(table)
        return queue[0] if queue else INF

    def may_read(self, step: Position, table: str) -> bool:
        return step <= self.lwm(table)

    def may_write(self, step: Position, table: str) -> bool:
        return step == self.lwm(table)

    def finish(self, step: Position) -> None:
        for t in self.held.pop(step):
            self.write_locks[t].remove(step)
        self.steps.done(step)


SCHEDULERS: dict[str, type[NoScheduler]] = {"none": NoScheduler, "sei": SEI, "s2pl": S2PL,
                                            "lwm": LWM}


def make_scheduler(name: str) -> NoScheduler:
    if name not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {name!r}; choose one of {', '.join(SCHEDULERS)}")
    return SCHEDULERS[name]()
