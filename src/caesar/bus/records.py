"""Plain records that cross the bus, independent of the Kafka client."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

Headers = tuple[tuple[str, bytes | None], ...]  # Kafka allows null header values


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class Record:
    """A consumed record with its position."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int  # Kafka record timestamp (CreateTime unless the topic says otherwise)
    headers: Headers = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def header(self, name: str) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None


@dataclass(frozen=True, slots=True)
class OutRecord:
    """A record to produce. `partition` None = by key (murmur2, as Kafka's Java client)."""

    topic: str
    value: bytes | None
    key: bytes | None = None
    headers: Headers = ()
    partition: int | None = None
    timestamp_ms: int | None = None  # None = now


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int = 1
    config: dict[str, str] = field(default_factory=dict)

    @property
    def compacted(self) -> bool:
        return "compact" in self.config.get("cleanup.policy", "")
