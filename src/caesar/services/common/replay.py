"""Bookkeeping that lets a runner rebuild its state after a restart or a
regrouping of partitions: which stream partitions a Kafka partition owns, and
dropping records replayed from before the restored state."""

from __future__ import annotations

from collections.abc import Mapping


def owned(mapping: Mapping, owner: Mapping[int, int], j: int, key=lambda k: k) -> dict:
    """The entries of a per-stream-partition map whose stream partition lives
    in Kafka partition j."""
    return {k: v for k, v in mapping.items() if owner.get(key(k)) == j}


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
