"""Records the services exchange, as plain data (the runners turn them into
Avro on Kafka; embedded mode passes them as they are).

Stream partitions are identified by `partition`: a stable 63-bit hash of the
partition key text, so every service (each with its own StringPool) agrees on
it without coordination; `key` keeps the readable text for output.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

FORMAT_VERSION = 1
END_OF_TIME = 2**62  # watermark that flushes everything (end of a bounded input)


def partition_key(event: Mapping[str, Any], partition_by: Sequence[str]) -> str:
    """Readable stream partition key: the partition attributes joined by '|'."""
    return "|".join("" if event.get(a) is None else str(event.get(a)) for a in partition_by)


def partition_id(key: str) -> int:
    """Stable across processes and runs (unlike hash()); non-negative int64."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


@dataclass(frozen=True)
class InputRecord:
    """One record read from an input topic, already decoded by the runner;
    `error` is set (and `value` None) when it could not be decoded."""

    topic: str
    partition: int
    offset: int
    value: Mapping[str, Any] | None
    raw: bytes = b""
    error: str | None = None


@dataclass(frozen=True)
class Transaction:
    """All events of one timestamp and one stream partition (paper 6.2)."""

    partition: int
    key: str
    ts: int
    events: tuple[Mapping[str, Any], ...]  # each has "type" and the ts field


@dataclass(frozen=True)
class Progress:
    """No transaction with ts < watermark will follow on this bus partition."""

    watermark: int
    source: str = "scheduler"


@dataclass(frozen=True)
class DeadLetter:
    reason: str  # "undecodable" | "schema" | "late" | "unknown_type"
    detail: str
    topic: str
    partition: int
    offset: int
    raw: bytes = b""
    value: Mapping[str, Any] | None = None


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


@dataclass(frozen=True)
class Alert:
    """A derived event leaving the platform (or a context-deriving output)."""

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
