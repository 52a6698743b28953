"""The ACEP stage of the pipeline (a processor, no I/O): takes the matcher's
alerts, turns the internal `_acep_*` matches of rules and table-reading
queries into s-transactions (one per timestamp; the paper's Definition 7),
runs them under the chosen scheduler over the shared tables, and returns
the other alerts unchanged plus the rules' and queries' derived events;
actions that would break a table's key or schema are dead-lettered with the
reason and the stage goes on.

The transaction at the newest timestamp seen is held back until a later
one (or `flush`) shows it complete, since one timestamp's events may be
split across input batches. A match that arrives after later timestamps
ran (a negation at the end of a pattern, released when its window closes)
takes effect at the oldest timestamp still open.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from typing import Any

from caesar.plans.tables import AcepPlan
from caesar.services.common.messages import Alert, DeadLetter
from caesar.services.scheduler.acep.executors import Simulator, Transaction
from caesar.services.scheduler.acep.steps import ActionError, Output
from caesar.services.scheduler.acep.tables import TOP, Key, Row, VersionedTables

SCHEDULER_NAMES = ("sei", "s2pl", "lwm")
STATE_VERSION = 1  # of snapshot(): bump when its layout changes


class HistoryError(ValueError):
    """The tables at that timestamp are not kept (collected, or before a restore)."""


class AcepProcessor:
    def __init__(self, plan: AcepPlan, scheduler: str = "lwm", seed: int = 0,
                 history: int = 1) -> None:
        if scheduler not in SCHEDULER_NAMES:
            raise ValueError(f"unknown ACEP scheduler {scheduler!r}; "
                             f"choose one of {', '.join(SCHEDULER_NAMES)}")
        self.plan = plan
        self.inputs = {a.input_type: a.name for a in plan.actors}
        # Actors interleave cooperatively (seeded choices): the same outputs
        # as serial execution under every scheduler (the property tests).
        self.executor = Simulator(plan, scheduler)
        self.seed = seed
        self.pending: dict[int, list[Alert]] = {}
        self.done_ts: int | None = None  # newest timestamp executed
        # Versions readable by `tables(as_of)`: those of the last `history`
        # timestamps run, and from the pinned one on (the newest committed).
        # Each kept timestamp costs memory for the versions written at it.
        self.stamps: deque[int] = deque(maxlen=max(1, history))
        self.pinned: int | None = None

    def process(self, alerts: Sequence[Alert], watermark: int | None = None
                ) -> tuple[list[Alert], list[DeadLetter]]:
        """Alerts in; (alerts out, dead letters). With `watermark` (no match
        below it will follow: the matchers' progress), the transactions
        before it run; without, all but the newest timestamp seen."""
        passed = [a for a in alerts if a.event_type not in self.inputs]
        for a in alerts:
            if a.event_type in self.inputs:
                ts = a.end_ts if self.done_ts is None else max(a.end_ts, self.done_ts + 1)
                self.pending.setdefault(ts, []).append(a)
        if watermark is not None:
            return self._run(sorted(t for t in self.pending if t < watermark), passed)
        if len(self.pending) > 1:
            newest = max(self.pending)
            ready = sorted(t for t in self.pending if t < newest)
            return self._run(ready, passed)
        return passed, []

    def flush(self) -> tuple[list[Alert], list[DeadLetter]]:
        return self._run(sorted(self.pending), [])

    def tables(self, as_of: int | None = None) -> dict[str, dict[Key, Row]]:
        """The tables' content after everything executed so far, or after
        the s-transactions up to timestamp `as_of` (HistoryError when those
        versions are no longer kept)."""
        store = self.executor.store
        if as_of is None:
            return store.snapshot()
        assert isinstance(store, VersionedTables)  # SEI, S2PL and LWM all keep versions
        if store.floor is not None and as_of < store.floor:
            raise HistoryError(f"the tables before event time {store.floor} are no longer "
                               f"kept (the versions of the last {self.stamps.maxlen} "
                               "timestamps are, none from before a restart)")
        return store.snapshot(as_of)

    def pin(self, ts: int | None) -> None:
        """Keep the versions from `ts` on readable (a committed state others
        may ask for) until a later pin."""
        self.pinned = ts

    def snapshot(self) -> dict[str, Any]:
        """Between calls no step is open: the tables' current rows, the
        newest timestamp run and the matches held back are the whole state.
        Plain data only (lists, maps, scalars): persisted state is data."""
        return {"version": STATE_VERSION,
                "tables": {name: [[list(key), row] for key, row in rows.items()]
                           for name, rows in self.tables().items()},
                "done_ts": self.done_ts,
                "pending": [[ts, [_plain_alert(a) for a in alerts]]
                            for ts, alerts in self.pending.items()]}

    def restore(self, state: dict[str, Any]) -> None:
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"ACEP state version {state.get('version')} is not "
                             f"{STATE_VERSION}")
        self.executor = Simulator(self.plan, self.executor.scheduler.name)
        store = self.executor.store
        assert isinstance(store, VersionedTables)
        for name, rows in state["tables"].items():
            for key, row in rows:
                store.write(name, tuple(key), (-TOP, 0, 0), dict(row))
        self.done_ts = state["done_ts"]
        # Older versions are gone: the restored rows are those at done_ts.
        store.floor = self.done_ts
        self.pending = {ts: [Alert(**a) for a in alerts] for ts, alerts in state["pending"]}

    def _run(self, stamps: list[int], passed: list[Alert]) -> tuple[list[Alert],
                                                                     list[DeadLetter]]:
        if not stamps:
            return passed, []
        workload: list[Transaction] = []
        origin: dict[tuple[int, str], list[Alert]] = {}
        for ts in stamps:
            matches = sorted(self.pending.pop(ts), key=_order)
            per: dict[str, list[dict[str, Any]]] = {}
            for a in matches:
                actor = self.inputs[a.event_type]
                per.setdefault(actor, []).append(dict(a.fields))
                origin.setdefault((ts, actor), []).append(a)
            workload.append((ts, per))
        self.done_ts = stamps[-1]
        self.stamps.extend(stamps)
        keep = self.stamps[0] if self.pinned is None else min(self.stamps[0], self.pinned)
        self.executor.keep_from = (keep, 0)
        result = self.executor.run(workload, self.seed, snapshot=False)
        out = passed + [self._alert(o, origin) for o in result.outputs]
        return out, [self._dead_letter(e) for e in result.errors]

    def _alert(self, o: Output, origin: dict[tuple[int, str], list[Alert]]) -> Alert:
        source = origin[(o.ts, o.actor)][o.order[2]]
        return Alert(plan_id=o.actor, event_type=o.event_type, partition=source.partition,
                     key=source.key, start_ts=source.start_ts, end_ts=o.ts,
                     fields=o.fields, topic=o.topic, ingest_ms=source.ingest_ms)

    def _dead_letter(self, e: ActionError) -> DeadLetter:
        return DeadLetter(reason="table_action", detail=f"{e.where}: rule {e.actor} at "
                          f"{e.ts}: {e.reason}", topic="acep", partition=0, offset=e.ts,
                          raw=json.dumps(e.fields, default=str).encode(), value=e.fields)


def _plain_alert(a: Alert) -> dict[str, Any]:
    return {"plan_id": a.plan_id, "event_type": a.event_type, "partition": a.partition,
            "key": a.key, "start_ts": a.start_ts, "end_ts": a.end_ts, "fields": dict(a.fields),
            "topic": a.topic, "ingest_ms": a.ingest_ms}


def _order(a: Alert) -> tuple[Any, ...]:
    return (a.partition, a.key, a.start_ts, a.end_ts,
            json.dumps(dict(a.fields), sort_keys=True, default=str))
