"""The service loop replaces a Kafka client that a broker pause left stale:
librdkafka's consumer kept timing out on committed() (a restore waited 60 s,
then the actor restarted) while a new consumer got the answer at once."""

from __future__ import annotations

from typing import Any

from test_acep_service import IN, OUT, SharedCount

from caesar.bus.errors import BusError
from caesar.bus.memory import InMemoryBus
from caesar.bus.records import OutRecord, TopicPartition, TopicSpec
from caesar.services.common.loop import ServiceLoop


class StaleFirstConsumer:
    """An in-memory bus whose first consumer never answers committed()."""

    def __init__(self, bus: InMemoryBus) -> None:
        self.bus = bus
        self.consumers: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.bus, name)

    def consumer(self, group_id: str, **kwargs: Any) -> Any:
        consumer = self.bus.consumer(group_id, **kwargs)
        if not self.consumers:
            def stale(*args: Any, **kw: Any) -> Any:
                raise BusError("cannot read committed offsets: Local: Timed out")
            consumer.committed = stale
        self.consumers.append(consumer)
        return consumer


def loop_on(bus: Any) -> ServiceLoop:
    loop = ServiceLoop(bus=bus, group_id="g", transactional_prefix="g",
                       handler_factory=SharedCount, partitions=(0, 1), store=None,
                       poll_timeout_s=0.0, commit_interval_s=0.0)
    loop.start()
    return loop


def test_a_consumer_that_cannot_read_committed_offsets_is_replaced():
    bus = InMemoryBus()
    bus.create_topics([TopicSpec(IN, 2), TopicSpec(OUT, 1)])
    bus.producer().produce([OutRecord(IN, b"x", None, partition=j) for j in (0, 1, 0, 1)])
    first = loop_on(bus)
    while first.run_once():
        pass
    first.commit()
    first.close()

    stale = StaleFirstConsumer(bus)
    again = loop_on(stale)  # restores from the group's committed offsets
    assert len(stale.consumers) == 2 and again.consumer is stale.consumers[1]
    bus.producer().produce([OutRecord(IN, b"y", None, partition=0)])
    while again.run_once():
        pass
    assert again.handler.count == 1  # type: ignore[attr-defined]  (only the new record)
    again.close()


class StaleFirstProducers:
    """An in-memory bus whose first transactional producers time out on
    every send_offsets_to_transaction while aborts succeed: the coordinator
    connection a broker pause left stale."""

    def __init__(self, bus: InMemoryBus, stale: int) -> None:
        self.bus, self.stale, self.made = bus, stale, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.bus, name)

    def producer(self, transactional_id: str | None = None) -> Any:
        producer = self.bus.producer(transactional_id)
        if transactional_id is not None:
            self.made += 1
            if self.made <= self.stale:
                def stale(*args: Any, **kw: Any) -> Any:
                    raise BusError("Failed to add offsets to transaction: Local: Timed out")
                producer.send_offsets_to_transaction = stale
        return producer


def test_a_producer_that_keeps_failing_commits_is_replaced():
    bus = InMemoryBus()
    bus.create_topics([TopicSpec(IN, 2), TopicSpec(OUT, 1)])
    stale = StaleFirstProducers(bus, stale=2)  # the two partitions' first producers
    loop = ServiceLoop(bus=stale, group_id="g", transactional_prefix="g",
                       handler_factory=SharedCount, partitions=(0, 1), store=None,
                       poll_timeout_s=0.0, commit_interval_s=0.0, max_failed_commits=4)
    loop.start()
    bus.producer().produce([OutRecord(IN, b"x", None, partition=j) for j in (0, 1, 0, 1)])
    for _ in range(20):
        loop.run_once()
    assert loop.stats.commits >= 1 and stale.made > 2
    assert loop.consumer is not None
    assert loop.consumer.committed([TopicPartition(IN, 0), TopicPartition(IN, 1)]) == {
        TopicPartition(IN, 0): 2, TopicPartition(IN, 1): 2}
    loop.close()


class StaleFirstConsumerOffsets:
    """An in-memory bus on which offsets sent with its first consumer's
    group metadata never reach the transaction (whichever producer sends
    them): only a new consumer gets commits through."""

    def __init__(self, bus: InMemoryBus) -> None:
        self.bus = bus
        self.consumers: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.bus, name)

    def consumer(self, group_id: str, **kwargs: Any) -> Any:
        consumer = self.bus.consumer(group_id, **kwargs)
        self.consumers.append(consumer)
        return consumer

    def producer(self, transactional_id: str | None = None) -> Any:
        producer = self.bus.producer(transactional_id)
        send = producer.send_offsets_to_transaction

        def checked(offsets: Any, consumer: Any, **kw: Any) -> Any:
            if consumer is self.consumers[0]:
                raise BusError("Failed to add offsets to transaction: Local: Timed out")
            return send(offsets, consumer, **kw)
        producer.send_offsets_to_transaction = checked
        return producer


def test_commits_that_keep_failing_with_new_producers_get_a_new_consumer():
    bus = InMemoryBus()
    bus.create_topics([TopicSpec(IN, 2), TopicSpec(OUT, 1)])
    stale = StaleFirstConsumerOffsets(bus)
    loop = ServiceLoop(bus=stale, group_id="g", transactional_prefix="g",
                       handler_factory=SharedCount, partitions=(0, 1), store=None,
                       poll_timeout_s=0.0, commit_interval_s=0.0, max_failed_commits=4)
    loop.start()
    bus.producer().produce([OutRecord(IN, b"x", None, partition=j) for j in (0, 1, 0, 1)])
    for _ in range(20):
        loop.run_once()
    assert loop.stats.commits >= 1 and loop.consumer is stale.consumers[-1]
    assert loop.consumer.committed([TopicPartition(IN, 0), TopicPartition(IN, 1)]) == {
        TopicPartition(IN, 0): 2, TopicPartition(IN, 1): 2}
    loop.close()


class LostConnectionFirstProducers:
    """An in-memory bus whose first transactional producers report a lost
    broker connection (and would block in their next transaction)."""

    def __init__(self, bus: InMemoryBus, lost: int) -> None:
        self.bus, self.lost, self.made = bus, lost, 0
        self.used_lost = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.bus, name)

    def producer(self, transactional_id: str | None = None) -> Any:
        producer = self.bus.producer(transactional_id)
        if transactional_id is not None:
            self.made += 1
            if self.made <= self.lost:
                producer.connection_lost = lambda: True
                begin = producer.begin_transaction

                def counted() -> None:
                    self.used_lost += 1
                    begin()
                producer.begin_transaction = counted
        return producer


def test_a_producer_that_lost_its_connection_is_replaced_before_its_next_transaction():
    bus = InMemoryBus()
    bus.create_topics([TopicSpec(IN, 2), TopicSpec(OUT, 1)])
    lost = LostConnectionFirstProducers(bus, lost=2)
    loop = ServiceLoop(bus=lost, group_id="g", transactional_prefix="g",
                       handler_factory=SharedCount, partitions=(0, 1), store=None,
                       poll_timeout_s=0.0, commit_interval_s=0.0)
    loop.start()
    bus.producer().produce([OutRecord(IN, b"x", None, partition=j) for j in (0, 1, 0, 1)])
    while loop.run_once():
        pass
    assert (lost.made, lost.used_lost, loop.stats.aborts) == (4, 0, 0)
    assert loop.consumer is not None
    assert loop.consumer.committed([TopicPartition(IN, 0), TopicPartition(IN, 1)]) == {
        TopicPartition(IN, 0): 2, TopicPartition(IN, 1): 2}
    loop.close()
