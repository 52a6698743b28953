"""The bus every service runner talks to. Offsets follow Kafka: a committed
offset is the next offset to read. Two implementations: KafkaBus
(confluent-kafka) and InMemoryBus (embedded mode and unit tests)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, Protocol

from caesar.bus.records import OutRecord, Record, TopicPartition, TopicSpec

OffsetReset = Literal["earliest", "latest"]


class BusProducer(Protocol):
    transactional: bool

    def produce(self, records: Iterable[OutRecord]) -> None:
        """Queue a batch; delivery is confirmed by `flush` (or the commit)."""
        ...

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every queued record is delivered; BusError if any failed or
        is still queued after `timeout_s` (None: the delivery timeout)."""
        ...

    # Transactions (producers made with a transactional id only).
    def begin_transaction(self) -> None: ...

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int],
                                    consumer: BusConsumer, timeout_s: float = 30.0) -> None:
        """Commit `offsets` for `consumer`'s group as part of the transaction."""
        ...

    def commit_transaction(self, timeout_s: float = 30.0) -> None:
        """TransactionAbortedError: nothing of it became visible (abort, rewind);
        ProducerFencedError: this producer is finished."""
        ...

    def abort_transaction(self, timeout_s: float = 30.0) -> None: ...

    def connection_lost(self) -> bool:
        """Has this producer lost its connection to the broker since it was
        made? (A transactional producer that did cannot be trusted with the
        next transaction: see ServiceLoop._begin.)"""
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

    def position(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        """Offset of the next record a poll can return (past skipped transaction
        markers and aborted records once they were fetched); None = unknown yet."""
        ...

    def poll(self, max_records: int, timeout_s: float) -> list[Record]:
        """Up to `max_records` records; waits up to `timeout_s` for the first."""
        ...

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit synchronously: `offsets` (next offsets to read) or, when None,
        the position after the last record returned by `poll` per partition."""
        ...

    def committed(self, partitions: Sequence[TopicPartition], timeout_s: float = 30.0
                  ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None: nothing committed); BusError
        when the group coordinator does not answer within `timeout_s`."""
        ...

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Next poll of this partition starts at `offset`."""
        ...

    def close(self) -> None: ...


class Bus(Protocol):
    def producer(self, transactional_id: str | None = None) -> BusProducer:
        """A producer; with `transactional_id`, a transactional one (ready: any
        earlier producer with this id is fenced and its open transaction aborted)."""
        ...

    def consumer(self, group_id: str, *, auto_offset_reset: OffsetReset = "earliest",
                 read_committed: bool = True) -> BusConsumer: ...

    def create_topics(self, specs: Iterable[TopicSpec]) -> list[str]:
        """Create missing topics; returns the names created (existing ones are kept)."""
        ...

    def delete_topics(self, names: Iterable[str]) -> None: ...

    def list_topics(self) -> dict[str, int]:
        """Topic name -> partition count (internal `__` topics left out)."""
        ...

    def topic_config(self, name: str) -> dict[str, str]: ...

    def end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """End offset as a read-committed consumer sees it: the last stable
        offset (the first offset of the oldest open transaction, else the log end)."""
        ...

    def close(self) -> None: ...
