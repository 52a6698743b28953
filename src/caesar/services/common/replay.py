"""Bookkeeping that lets a runner rebuild its state after a restart or a
regrouping of partitions: which stream partitions a Kafka partition owns, and
dropping records replayed from before the restored state."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from caesar.bus.records import Record
from caesar.codecs import Codec
from caesar.services.common.messages import PlanSwitch, Progress
from caesar.services.common.wire import PROGRESS, SWITCH, progress_from, switch_from

K = TypeVar("K")
V = TypeVar("V")
B = TypeVar("B")


def owned(mapping: Mapping[int, V], owner: Mapping[int, int], j: int) -> dict[int, V]:
    """The entries of a per-stream-partition map whose stream partition lives
    in Kafka partition j."""
    return owned_by(mapping, owner, j, lambda partition: partition)


def owned_by(mapping: Mapping[K, V], owner: Mapping[int, int], j: int,
             partition_of: Callable[[K], int]) -> dict[K, V]:
    """`owned` for a map whose keys hold the stream partition (`partition_of`)."""
    return {k: v for k, v in mapping.items() if owner.get(partition_of(k)) == j}


class SeqFilter:
    """Drops replayed records: per stream partition, a sequence number must grow."""

    def __init__(self) -> None:
        self.last: dict[int, int] = {}

    def fresh(self, partition: int, seq: int) -> bool:
        if seq < 0:
            return True
        if seq <= self.last.get(partition, -1):
            return False
        self.last[partition] = seq
        return True


def decode_fresh(codec: Codec, records: Sequence[Record], seen: SeqFilter, batch_schema: str,
                 seq_of: Callable[[dict[str, Any]], int],
                 batch_of: Callable[[int, dict[str, Any]], B]
                 ) -> dict[int, list[B | Progress | PlanSwitch]]:
    """A service's inputs per Kafka partition j, in order: its batches
    (`batch_of(j, value)`, replayed ones dropped by `seen` on `seq_of(value)`),
    progress marks and plan switches."""
    by_partition: dict[int, list[B | Progress | PlanSwitch]] = defaultdict(list)
    for r in records:
        if r.value is None:  # a tombstone: the services never write one here
            continue
        schema, value = codec.decode(r.value)
        if schema == batch_schema:
            if seen.fresh(r.partition, seq_of(value)):
                by_partition[r.partition].append(batch_of(r.partition, value))
        elif schema == PROGRESS:
            by_partition[r.partition].append(progress_from(value))
        elif schema == SWITCH:
            by_partition[r.partition].append(switch_from(value))
    return by_partition

