"""The bus every service runner talks to. Offsets follow Kafka: a committed
offset is the next offset to read. Two implementations: KafkaBus
(confluent-kafka) and InMemoryBus (embedded mode and unit tests)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, Protocol

from caesar.bus.records import OutRecord, Record, TopicPartition, TopicSpec

OffsetReset = Literal["earliest", "latest"]


class BusProducer(Protocol):
    def produce(self, records: Iterable[OutRecord]) -> None:
        """Queue a batch; delivery is confirmed by `flush`."""
        ...

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until every queued record is delivered; BusError if any failed."""
        ...

    def close(self) -> None: ...


class BusConsumer(Protocol):
    def subscribe(self, topics: Sequence[str]) -> None:
        """Join the consumer group for these topics (partitions assigned by the group)."""
        ...

    def assign(self, partitions: Sequence[TopicPartition],
               offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Read exactly these partitions (no group rebalancing); start at `offsets`,
        else at the group's committed offset, else per auto_offset_reset."""
        ...

    def assignment(self) -> list[TopicPartition]: ...

    def poll(self, max_records: int, timeout_s: float) -> list[Record]:
        """Up to `max_records` records; waits up to `timeout_s` for the first."""
        ...

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit synchronously: `offsets` (next offsets to read) or, when None,
        the position after the last record returned by `poll` per partition."""
        ...

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        ...

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Next poll of this partition starts at `offset`."""
        ...

    def close(self) -> None: ...


class Bus(Protocol):
    def producer(self) -> BusProducer: ...

    def consumer(self, group_id: str, *, auto_offset_reset: OffsetReset = "earliest"
                 ) -> BusConsumer: ...

    def create_topics(self, specs: Iterable[TopicSpec]) -> list[str]:
        """Create missing topics; returns the names created (existing ones are kept)."""
        ...

    def delete_topics(self, names: Iterable[str]) -> None: ...

    def list_topics(self) -> dict[str, int]:
        """Topic name -> partition count (internal `__` topics left out)."""
        ...

    def topic_config(self, name: str) -> dict[str, str]: ...

    def end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """Offset the next produced record of each partition will get."""
        ...

    def close(self) -> None: ...
