"""The s-transaction schedulers of the ACEP paper, section 5, as lock
managers without I/O: an executor asks them whether a step may start, read
or write a table, and tells them when a step ends.

Steps are registered in position order `(ts, rank)` as their transactions
arrive (the paper's InsertLock, Algorithm 1, runs when the input event
arrives), each with the resources it may read and write (from the compiled
rules: an actor whose matches a step carries may read every table its
conditions, projections and actions read, and write every table its actions
change). A resource is a table name (table-level lock, lockG = table) or a
`(table, key)` row (lockG = tuple: where the match alone names the row); a
row conflicts with the same row and with its whole table.

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
from collections.abc import Collection
from typing import Protocol

from caesar.services.scheduler.acep.tables import Key, Position

INF: Position = (1 << 62, 0)
Resource = str | tuple[str, Key | None]


def split(resource: Resource) -> tuple[str, Key | None]:
    return (resource, None) if isinstance(resource, str) else resource


def _overlap(a: Key | None, b: Key | None) -> bool:
    """Two locks on one table conflict unless both name different rows."""
    return a is None or b is None or a == b


class StreamScheduler(Protocol):
    name: str
    versioned: bool  # reads at the step's position (else the current state)

    def register(self, step: Position, reads: Collection[Resource],
                 writes: Collection[Resource]) -> None: ...

    def may_start(self, step: Position) -> bool: ...

    def may_read(self, step: Position, resource: Resource) -> bool: ...

    def may_write(self, step: Position, resource: Resource) -> bool: ...

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

    def register(self, step: Position, reads: Collection[Resource],
                 writes: Collection[Resource]) -> None:
        self.steps.add(step)

    def may_start(self, step: Position) -> bool:
        return True

    def may_read(self, step: Position, resource: Resource) -> bool:
        return True

    def may_write(self, step: Position, resource: Resource) -> bool:
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
        # table -> lock requests (step, row or None, write) in arrival order
        self.queues: dict[str, deque[tuple[Position, Key | None, bool]]] = {}
        self.locks: dict[Position, list[tuple[str, Key | None, bool]]] = {}
        self.started: set[Position] = set()

    def register(self, step: Position, reads: Collection[Resource],
                 writes: Collection[Resource]) -> None:
        self.steps.add(step)
        wanted: dict[tuple[str, Key | None], bool] = {}
        for r in reads:
            wanted.setdefault(split(r), False)
        for r in writes:
            wanted[split(r)] = True
        # lock ordering: by table, then row (all requested at once, in ts order)
        locks = [(t, k, w) for (t, k), w in sorted(wanted.items(), key=repr)]
        for t, k, w in locks:
            self.queues.setdefault(t, deque()).append((step, k, w))
        self.locks[step] = locks

    def _granted(self, step: Position, table: str, key: Key | None, write: bool) -> bool:
        """Figure 3's S2PL matrix, in arrival order: no earlier conflicting
        request on the same rows may be a write, nor any if we write."""
        for s, k, w in self.queues[table]:
            if s == step:
                return True
            if (w or write) and _overlap(k, key):
                return False
        raise AssertionError("lock not queued")

    def may_start(self, step: Position) -> bool:
        if step in self.started:
            return True
        if all(self._granted(step, t, k, w) for t, k, w in self.locks[step]):
            self.started.add(step)
            return True
        return False

    def may_read(self, step: Position, resource: Resource) -> bool:
        return step in self.started

    def may_write(self, step: Position, resource: Resource) -> bool:
        return step in self.started

    def finish(self, step: Position) -> None:
        for t, k, w in self.locks.pop(step):
            self.queues[t].remove((step, k, w))
        self.started.discard(step)
        self.steps.done(step)


class LWM(NoScheduler):
    name = "lwm"
    versioned = True

    def __init__(self) -> None:
        super().__init__()
        # table -> write locks (step, row or None), in position order
        self.write_locks: dict[str, deque[tuple[Position, Key | None]]] = {}
        self.held: dict[Position, list[tuple[str, Key | None]]] = {}

    def register(self, step: Position, reads: Collection[Resource],
                 writes: Collection[Resource]) -> None:
        self.steps.add(step)
        mine = sorted({split(r) for r in writes}, key=repr)
        for t, k in mine:
            self.write_locks.setdefault(t, deque()).append((step, k))
        self.held[step] = mine

    def lwm(self, resource: Resource) -> Position:
        """Definition 8: the oldest write lock on the resource (a row's own
        and its table's)."""
        table, key = split(resource)
        for s, k in self.write_locks.get(table, ()):
            if _overlap(k, key):
                return s
        return INF

    def may_read(self, step: Position, resource: Resource) -> bool:
        return step <= self.lwm(resource)

    def may_write(self, step: Position, resource: Resource) -> bool:
        return step == self.lwm(resource)

    def finish(self, step: Position) -> None:
        for t, k in self.held.pop(step):
            self.write_locks[t].remove((step, k))
        self.steps.done(step)


SCHEDULERS: dict[str, type[NoScheduler]] = {"none": NoScheduler, "sei": SEI, "s2pl": S2PL,
                                            "lwm": LWM}


def make_scheduler(name: str) -> NoScheduler:
    if name not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {name!r}; choose one of {', '.join(SCHEDULERS)}")
    return SCHEDULERS[name]()
