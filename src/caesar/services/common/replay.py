"""Bookkeeping that lets a runner rebuild its state after a restart or a
regrouping of partitions: which stream partitions a Kafka partition owns, and
dropping records replayed from before the restored state."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


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
