"""Records the services exchange, as plain data (the runners turn them into
Avro on Kafka; embedded mode passes them as they are).

Events move as columns: a `TxnBatch` holds many stream transactions of one
bus partition (numpy columns per event type, caesar.events.batch), a
`RoutedBatch` adds what the router decided per transaction. `Transaction` and
`RoutedTransaction` are the same content one transaction at a time, for
tests and for reading a batch (`TxnBatch.transactions()`).

Stream partitions are identified by `partition`: a stable 63-bit hash of the
partition key text, so every service (each with its own StringPool) agrees on
it without coordination; `key` keeps the readable text for output.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from caesar.events.batch import EventBatch, StringPool, TypeColumns, distinct

FORMAT_VERSION = 2  # 2: transactions travel as columnar batches (TxnBatch, RoutedBatch)
END_OF_TIME = 2**62  # watermark that flushes everything (end of a bounded input)


def partition_key(event: Mapping[str, Any], partition_by: Sequence[str]) -> str:
    """Readable stream partition key: the partition attributes joined by '|'."""
    return "|".join("" if event.get(a) is None else str(event.get(a)) for a in partition_by)


def partition_id(key: str) -> int:
    """Stable across processes and runs (unlike hash()); non-negative int64."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One record read from an input topic, already decoded by the runner;
    `error` is set (and `value` None) when it could not be decoded. A record
    with `watermark` set is an input watermark (a producer's promise that no
    event with ts < watermark follows on its partition), not an event."""

    topic: str
    partition: int
    offset: int
    value: Mapping[str, Any] | None
    raw: bytes = b""
    error: str | None = None
    key: bytes | None = None
    headers: Headers = ()
    timestamp_ms: int = -1  # Kafka timestamp of the record
    watermark: int | None = None


@dataclass
class InputColumns:
    """Records of one input topic holding one event type, decoded in bulk
    (caesar.codecs.flat): one int64 column per Avro field, and per record its
    Kafka partition, offset, timestamp (ms) and raw value (for dead letters)."""

    topic: str
    event_type: str
    partitions: np.ndarray
    offsets: np.ndarray
    ingest_ms: np.ndarray
    columns: dict[str, np.ndarray]
    raw: Sequence[bytes]

    def __len__(self) -> int:
        return len(self.offsets)


@dataclass(frozen=True)
class Transaction:
    """All events of one timestamp and one stream partition (paper 6.2)."""

    partition: int
    key: str
    ts: int
    events: tuple[Mapping[str, Any], ...]  # each has "type" and the ts field


INGEST = "_ingest_ms"  # event key carrying the input record's Kafka timestamp


@dataclass
class TxnBatch:
    """Stream transactions (paper 6.2: all events of one timestamp and one
    stream partition) as columns. Each type's rows are in (ts, seq) order,
    `seq` the arrival order across types; `keys` names every partition."""

    events: EventBatch
    keys: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.events)

    def timestamps(self) -> np.ndarray:
        return self.events.timestamps()

    def split(self, ts: int) -> tuple[TxnBatch, TxnBatch]:
        """(transactions before ts, transactions at ts or later)."""
        before, rest = self.events.split_ts(ts)
        return TxnBatch(before, self.keys), TxnBatch(rest, self.keys)

    def at(self, ts: int) -> TxnBatch:
        return TxnBatch(self.events.where(lambda c: c.ts == ts), self.keys)

    def by_ts(self) -> list[tuple[int, TxnBatch]]:
        """(ts, the transactions at ts) for every ts, ascending (slices of
        each type's ts-sorted rows, no copies)."""
        stamps = self.timestamps()
        if len(stamps) <= 1:
            return [(int(t), self) for t in stamps.tolist()]
        return list(zip(stamps.tolist(), self.spans(stamps, stamps), strict=True))

    def waves(self) -> list[tuple[int, int, dict[int, int], TxnBatch]]:
        """(first ts, last ts, partition -> its transaction's ts, the
        transactions between them), ascending: the longest runs of
        timestamps in which no stream partition has two transactions. A stream whose events each have their own timestamp
        (milliseconds) makes one transaction per event; a wave lets a step
        cover many of them (StageGraph.step)."""
        cols = [c for c in self.events.by_type.values() if len(c)]
        if not cols:
            return []
        ts = np.concatenate([c.ts for c in cols])
        part = np.concatenate([c.partition for c in cols])
        if not (part != part[0]).any():  # one partition: a wave per timestamp
            p = int(part[0])
            return [(t, t, {p: t}, b) for t, b in self.by_ts()]
        order = np.lexsort((part, ts))
        ts, part = ts[order], part[order]
        new_ts = np.r_[True, ts[1:] != ts[:-1]]
        pairs = new_ts | np.r_[True, part[1:] != part[:-1]]  # one row per transaction
        stamps, parts, starts = ts[pairs].tolist(), part[pairs].tolist(), new_ts[pairs].tolist()
        firsts: list[int] = []
        lasts: list[int] = []
        seen: list[dict[int, int]] = []  # per wave: partition -> ts
        group: list[int] = []
        for i, (t, p) in enumerate(zip(stamps, parts, strict=True)):
            group.append(p)
            if i + 1 < len(stamps) and not starts[i + 1]:
                continue  # the rest of this timestamp's transactions
            if firsts and seen[-1].keys().isdisjoint(group):
                lasts[-1] = t
            else:
                firsts.append(t)
                lasts.append(t)
                seen.append({})
            seen[-1].update(dict.fromkeys(group, t))
            group = []
        return list(zip(firsts, lasts, seen,
                        self.spans(firsts, lasts), strict=True))

    def spans(self, firsts: Sequence[int] | np.ndarray, lasts: Sequence[int] | np.ndarray
              ) -> list[TxnBatch]:
        """The transactions with ts in [firsts[i], lasts[i]], for each i (one
        pass over each type's ts-sorted rows, slices without copies)."""
        cuts = {}
        for t, c in self.events.by_type.items():
            if len(c) > 1 and bool((c.ts[1:] < c.ts[:-1]).any()):
                c = c.take(np.argsort(c.ts, kind="stable"))
            cuts[t] = (c, np.searchsorted(c.ts, firsts, "left").tolist(),
                       np.searchsorted(c.ts, lasts, "right").tolist())
        out = []
        strings = self.events.strings
        for i in range(len(firsts)):
            by_type = {}
            for t, (c, lo, hi) in cuts.items():
                if hi[i] > lo[i]:
                    by_type[t] = _rows(c, lo[i], hi[i])
            out.append(TxnBatch(EventBatch(by_type, strings), self.keys))
        return out

    def partitions(self) -> np.ndarray:
        """The distinct stream partitions of the batch."""
        if not self.events.by_type:
            return np.empty(0, dtype=np.int64)
        return distinct(np.concatenate([c.partition for c in self.events.by_type.values()]))

    def pairs(self) -> list[tuple[int, int]]:
        """(ts, partition) of every transaction, ordered by ts then key."""
        found: set[tuple[int, int]] = set()
        for c in self.events.by_type.values():
            found.update(zip(c.ts.tolist(), c.partition.tolist(), strict=True))
        return sorted(found, key=lambda tp: (tp[0], self.keys.get(tp[1], "")))

    @staticmethod
    def concat(batches: Sequence[TxnBatch]) -> TxnBatch:
        keys: dict[int, str] = {}
        for b in batches:
            keys.update(b.keys)
        return TxnBatch(EventBatch.concat([b.events for b in batches]), keys)

    @staticmethod
    def empty(strings: StringPool | None = None) -> TxnBatch:
        return TxnBatch(EventBatch({}, strings or StringPool.shared()), {})

    def transactions(self, type_field: str = "type") -> list[Transaction]:
        """One `Transaction` per (ts, partition), ordered by ts then key."""
        grouped: dict[tuple[int, int], list[dict[str, Any]]] = {}
        for rec in self.events.records(type_field):
            ts, p = rec.pop("_ts"), rec.pop("_p")
            rec.pop("_seq")
            grouped.setdefault((ts, p), []).append(rec)
        return [Transaction(p, self.keys.get(p, ""), ts, tuple(grouped[(ts, p)]))
                for ts, p in self.pairs()]

    @staticmethod
    def of(txns: Sequence[Transaction], schemas: Mapping[str, Mapping[str, str]],
           strings: StringPool | None = None, type_field: str = "type",
           first_seq: int = 0) -> TxnBatch:
        """Columns of transactions given one by one (tests, conversions)."""
        strings = strings or StringPool.shared()
        rows: dict[str, list[tuple[int, int, int, Mapping[str, Any]]]] = {}
        seq = first_seq
        keys: dict[int, str] = {}
        for txn in sorted(txns, key=lambda t: t.ts):  # stable: arrival order within a ts
            keys[txn.partition] = txn.key
            for e in txn.events:
                rows.setdefault(e[type_field], []).append((txn.ts, seq, txn.partition, e))
                seq += 1
        by_type = {}
        for t, items in rows.items():
            cols = TypeColumns.from_values(
                [e for *_, e in items], schemas[t], strings,
                ts=np.array([i[0] for i in items], dtype=np.int64),
                seq=np.array([i[1] for i in items], dtype=np.int64),
                partition=np.array([i[2] for i in items], dtype=np.int64))
            if any(INGEST in e for *_, e in items):
                cols.ingest = np.array([e.get(INGEST, 0) for *_, e in items], dtype=np.int64)
            by_type[t] = cols
        return TxnBatch(EventBatch(by_type, strings), keys)


@dataclass
class RoutedBatch:
    """Routed transactions (router output), columnar: the transactions of
    `txns` that some stage may see, and per transaction (`txn_partition[i]`,
    `txn_ts[i]`) the stages that may see it (`active_sets[txn_active[i]]`) and,
    for context-independent plans, the stages whose outputs are dropped
    (`muted_sets[txn_muted[i]]`). `discards` are applied before the
    transactions at their ts (a context window ended)."""

    txns: TxnBatch
    txn_partition: np.ndarray
    txn_ts: np.ndarray
    txn_active: np.ndarray
    txn_muted: np.ndarray
    active_sets: list[tuple[str, ...]]
    muted_sets: list[tuple[str, ...]]
    discards: list[Discard] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.txn_ts) + len(self.discards)

    @staticmethod
    def of(items: Sequence[RoutedTransaction | Discard],
           schemas: Mapping[str, Mapping[str, str]],
           strings: StringPool | None = None) -> RoutedBatch:
        """Columns of routed transactions and discard orders given one by one."""
        sets: dict[tuple[str, ...], int] = {}
        muted: dict[tuple[str, ...], int] = {}
        discards: list[Discard] = []
        rows: list[tuple[int, int, int, int]] = []
        txns: list[Transaction] = []
        for item in items:
            if isinstance(item, Discard):
                discards.append(item)
                continue
            t = item.txn
            txns.append(t)
            if item.discard:
                discards.append(Discard(t.partition, t.ts, tuple(item.discard)))
            rows.append((t.partition, t.ts, sets.setdefault(tuple(item.active), len(sets)),
                         muted.setdefault(tuple(item.muted), len(muted))))
        cols = np.array(rows, dtype=np.int64).reshape(-1, 4)
        return RoutedBatch(TxnBatch.of(txns, schemas, strings), cols[:, 0].copy(),
                           cols[:, 1].copy(), cols[:, 2].astype(np.int32),
                           cols[:, 3].astype(np.int32), list(sets), list(muted), discards)

    def items(self) -> list[RoutedTransaction | Discard]:
        """The content one transaction at a time, in ts order (discards
        without a transaction of their own come first at their ts)."""
        by_pair = {(t.ts, t.partition): t for t in self.txns.transactions()}
        discards = {(d.ts, d.partition): d for d in self.discards}
        out: list[tuple[tuple[int, int, int], RoutedTransaction | Discard]] = []
        for i, (p, ts) in enumerate(zip(self.txn_partition.tolist(), self.txn_ts.tolist(),
                                        strict=True)):
            d = discards.pop((ts, p), None)
            txn = by_pair.get((ts, p), Transaction(p, self.txns.keys.get(p, ""), ts, ()))
            out.append(((ts, 1, i), RoutedTransaction(
                txn, self.active_sets[int(self.txn_active[i])],
                d.plan_ids if d else (), self.muted_sets[int(self.txn_muted[i])])))
        for i, d in enumerate(discards.values()):
            out.append(((d.ts, 0, i), d))
        return [item for _, item in sorted(out, key=lambda x: x[0])]


@dataclass
class Imports:
    """Results the deriver derived for the matcher (ExecutionPlan.imports),
    each at its own ts and partition, sent before the deriver's progress
    that covers them: the router adds them to the routed transactions of
    their ts."""

    batch: TxnBatch


@dataclass(frozen=True)
class Progress:
    """No transaction with ts < watermark will follow on this bus partition."""

    watermark: int
    source: str = "scheduler"


@dataclass(frozen=True)
class PlanSwitch:
    """Everything before this point of a Kafka partition ran with plan version
    `previous`, everything after with `plan` (a model upgrade, crossing the
    services in the data: no service switches before its inputs say so)."""

    plan: str
    previous: str
    watermark: int


@dataclass(frozen=True)
class DeadLetter:
    # "undecodable" | "schema" | "late" | "ahead" | "unknown_type" | "processing"
    reason: str
    detail: str
    topic: str
    partition: int
    offset: int
    raw: bytes = b""
    value: Mapping[str, Any] | None = None
    key: bytes | None = None
    headers: Headers = ()
    timestamp_ms: int = -1

    def identity(self) -> tuple:
        """What makes two dead letters the same (to compare runs)."""
        return (self.reason, self.topic, self.partition, self.offset)


def dead_letter_of(rec: InputRecord, reason: str, detail: str) -> DeadLetter:
    return DeadLetter(reason, detail, rec.topic, rec.partition, rec.offset, rec.raw, rec.value,
                      rec.key, rec.headers, rec.timestamp_ms)


@dataclass(frozen=True)
class ContextChange:
    """The context bit vector of a stream partition from `ts` on: it holds for
    transactions at t > ts (context windows are half-open (ti, tt])."""

    partition: int
    key: str
    ts: int
    vector: int  # effective vector: default bit set when no other context holds
    contexts: tuple[str, ...]  # names of the holding contexts, for humans


@dataclass(frozen=True)
class RoutedTransaction:
    """A transaction with the matcher stages (plan ids) that may see it, and
    the plans whose partial matches must be dropped before it (a context
    window of theirs ended). `muted`: context-independent plans only, stages
    that see the transaction but whose context does not hold (outputs dropped)."""

    txn: Transaction
    active: tuple[str, ...]
    discard: tuple[str, ...] = ()
    muted: tuple[str, ...] = ()


@dataclass(frozen=True)
class Discard:
    """Drop partial matches of `plan_ids` for `partition` (no event follows)."""

    partition: int
    ts: int
    plan_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Alert:
    """A derived event leaving the platform (or a context-deriving output).
    Slots: the matcher makes one per output, its fields written in place
    (alert_rows.pyx)."""

    plan_id: str
    event_type: str
    partition: int
    key: str
    start_ts: int
    end_ts: int
    fields: Mapping[str, Any] = field(default_factory=dict)
    topic: str | None = None
    # Kafka timestamp (ms) of the input that triggered it (0 = unknown), for latency.
    ingest_ms: int = field(default=0, compare=False)

    def identity(self) -> tuple:
        """What makes two alerts the same (used to compare runs, spot duplicates)."""
        return (self.plan_id, self.event_type, self.key, self.start_ts, self.end_ts,
                tuple(sorted((k, _plain(v)) for k, v in self.fields.items())))


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 9)
    return value


def coalesce_transactions(items: Sequence[Any], schemas: Mapping[str, Mapping[str, str]],
                          strings: StringPool | None = None) -> list[Any]:
    """`items` with each run of consecutive `Transaction`s turned into one
    `TxnBatch` (processors take transactions one by one too: tests, tools)."""
    out: list[Any] = []
    run: list[Transaction] = []
    for item in items:
        if isinstance(item, Transaction):
            run.append(item)
            continue
        if run:
            out.append(TxnBatch.of(run, schemas, strings))
            run = []
        out.append(item)
    if run:
        out.append(TxnBatch.of(run, schemas, strings))
    return out


def _rows(c: TypeColumns, lo: int, hi: int) -> TypeColumns:
    """Rows lo..hi of `c` as views (TxnBatch.by_ts: one call per timestamp
    and type, so it skips the generic take's null scan when `c` has none)."""
    nulls = {k: m for k, v in c.nulls.items() if (m := v[lo:hi]).any()} if c.nulls else {}
    return TypeColumns(c.ts[lo:hi], c.seq[lo:hi], c.partition[lo:hi],
                       {k: v[lo:hi] for k, v in c.columns.items()}, nulls,
                       None if c.ingest is None else c.ingest[lo:hi])
