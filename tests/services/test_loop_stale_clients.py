"""The service loop replaces a Kafka client that a broker pause or restart
left stale: librdkafka's consumer kept timing out on committed() (a restore
waited 60 s, then the actor restarted) while a new consumer got the answer
at once; a producer reused after a failed commit, or one that lost its
connection, blocked in its next transaction."""

from __future__ import annotations

import time
from typing import Any

import pytest
from test_acep_service import IN, OUT, SharedCount

from caesar.bus.errors import BusError, TransactionAbortedError
from caesar.bus.memory import InMemoryBus
from caesar.bus.records import OutRecord, TopicPartition, TopicSpec
from caesar.services.common.loop import ServiceLoop

TIMED_OUT = "Failed to add offsets to transaction: Local: Timed out"


class WrappedBus:
    """An in-memory bus whose clients a subclass spoils as they are made
    (`spoil_consumer`, `spoil_producer`); it keeps the consumers made and
    counts the transactional producers."""

    def __init__(self, bus: InMemoryBus) -> None:
        self.bus = bus
        self.consumers: list[Any] = []
        self.made = 0  # transactional producers

    def __getattr__(self, name: str) -> Any:
        return getattr(self.bus, name)

    def consumer(self, group_id: str, **kwargs: Any) -> Any:
        consumer = self.bus.consumer(group_id, **kwargs)
        self.spoil_consumer(consumer)
        self.consumers.append(consumer)
        return consumer

    def producer(self, transactional_id: str | None = None) -> Any:
        producer = self.bus.producer(transactional_id)
        if transactional_id is not None:
            self.made += 1
            self.spoil_producer(producer)
        return producer

    def spoil_consumer(self, consumer: Any) -> None:
        pass  # (a hook: clients stay as they are unless a subclass spoils them)

    def spoil_producer(self, producer: Any) -> None:
        pass  # (a hook, as above)


def new_bus() -> InMemoryBus:
    bus = InMemoryBus()
    bus.create_topics([TopicSpec(IN, 2), TopicSpec(OUT, 1)])
    return bus


def produce_two_each(bus: InMemoryBus) -> None:
    bus.producer().produce([OutRecord(IN, b"x", None, partition=j) for j in (0, 1, 0, 1)])


def loop_on(bus: Any, **options: Any) -> ServiceLoop:
    loop = ServiceLoop(bus=bus, group_id="g", transactional_prefix="g",
                       handler_factory=SharedCount, partitions=(0, 1), store=None,
                       poll_timeout_s=0.0, commit_interval_s=0.0, **options)
    loop.start()
    return loop


def assert_committed_two_each(loop: ServiceLoop) -> None:
    assert loop.consumer is not None
    assert loop.consumer.committed([TopicPartition(IN, 0), TopicPartition(IN, 1)]) == {
        TopicPartition(IN, 0): 2, TopicPartition(IN, 1): 2}


class StaleFirstConsumer(WrappedBus):
    """The first consumer never answers committed()."""

    def spoil_consumer(self, consumer: Any) -> None:
        if not self.consumers:
            def stale(*args: Any, **kw: Any) -> Any:
                raise BusError("cannot read committed offsets: Local: Timed out")
            consumer.committed = stale


def test_a_consumer_that_cannot_read_committed_offsets_is_replaced():
    bus = new_bus()
    produce_two_each(bus)
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


class StaleFirstProducers(WrappedBus):
    """The first `stale` transactional producers time out on every
    send_offsets_to_transaction while aborts succeed: the coordinator
    connection a broker pause left stale."""

    def __init__(self, bus: InMemoryBus, stale: int) -> None:
        super().__init__(bus)
        self.stale = stale

    def spoil_producer(self, producer: Any) -> None:
        if self.made <= self.stale:
            def stale(*args: Any, **kw: Any) -> Any:
                raise BusError(TIMED_OUT)
            producer.send_offsets_to_transaction = stale


def test_a_producer_that_keeps_failing_commits_is_replaced():
    bus = new_bus()
    stale = StaleFirstProducers(bus, stale=2)  # the two partitions' first producers
    loop = loop_on(stale, max_failed_commits=4)
    produce_two_each(bus)
    for _ in range(20):
        loop.run_once()
    assert loop.stats.commits >= 1 and stale.made > 2
    assert_committed_two_each(loop)
    loop.close()


class StaleFirstConsumerOffsets(WrappedBus):
    """Offsets sent with the first consumer's group metadata never reach the
    transaction (whichever producer sends them): only a new consumer gets
    commits through."""

    def spoil_producer(self, producer: Any) -> None:
        send = producer.send_offsets_to_transaction

        def checked(offsets: Any, consumer: Any, **kw: Any) -> Any:
            if consumer is self.consumers[0]:
                raise BusError(TIMED_OUT)
            return send(offsets, consumer, **kw)
        producer.send_offsets_to_transaction = checked


def test_commits_that_keep_failing_with_new_producers_get_a_new_consumer():
    bus = new_bus()
    stale = StaleFirstConsumerOffsets(bus)
    loop = loop_on(stale, max_failed_commits=4)
    produce_two_each(bus)
    for _ in range(20):
        loop.run_once()
    assert loop.stats.commits >= 1 and loop.consumer is stale.consumers[-1]
    assert_committed_two_each(loop)
    loop.close()


class LostConnectionFirstProducers(WrappedBus):
    """The first `lost` transactional producers report a lost broker
    connection (and would block in their next transaction); `used_lost`
    counts transactions begun on them."""

    def __init__(self, bus: InMemoryBus, lost: int) -> None:
        super().__init__(bus)
        self.lost, self.used_lost = lost, 0

    def spoil_producer(self, producer: Any) -> None:
        if self.made <= self.lost:
            producer.connection_lost = lambda: True
            begin = producer.begin_transaction

            def counted() -> None:
                self.used_lost += 1
                begin()
            producer.begin_transaction = counted


def test_a_producer_that_lost_its_connection_is_replaced_before_its_next_transaction():
    bus = new_bus()
    lost = LostConnectionFirstProducers(bus, lost=2)
    loop = loop_on(lost)
    produce_two_each(bus)
    while loop.run_once():
        pass
    assert (lost.made, lost.used_lost, loop.stats.aborts) == (4, 0, 0)
    assert_committed_two_each(loop)
    loop.close()


def test_the_memory_bus_aborts_a_transaction_open_past_its_timeout():
    bus = InMemoryBus(transaction_timeout_s=0.05)
    bus.create_topics([TopicSpec(OUT, 1)])
    producer = bus.producer("t")
    producer.begin_transaction()
    producer.produce([OutRecord(OUT, b"x", None, partition=0)])
    time.sleep(0.1)
    with pytest.raises(TransactionAbortedError):
        producer.commit_transaction()
    assert bus.records(OUT) == []
    producer.begin_transaction()  # the producer goes on with a new transaction
    producer.produce([OutRecord(OUT, b"y", None, partition=0)])
    producer.commit_transaction()
    assert [r.value for r in bus.records(OUT)] == [b"y"]


def test_a_slow_commit_does_not_space_the_next_past_the_transaction_timeout():
    """Seen after a broker kill: a commit that took 12 s while the broker came
    back spaced the next one 3x that, past the 10 s transaction timeout; the
    broker aborted each transaction before its commit, the spacing stayed (no
    commit succeeded to measure a new one) and the deriver redid the same
    records every 35 s for good. A transaction is committed within a third of
    the timeout, and a failed commit forgets the old cost."""
    bus = InMemoryBus(transaction_timeout_s=0.3)
    bus.create_topics([TopicSpec(IN, 2), TopicSpec(OUT, 1)])
    loop = loop_on(bus, max_open_s=0.1)
    loop.commit_interval_s, loop.max_commit_share = 0.01, 0.25
    loop._commit_cost = 2.0  # the last commit took 2 s: spacing 6 s
    produce_two_each(bus)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and not loop.stats.commits:
        loop.run_once()
    assert (loop.stats.commits, loop.stats.aborts) == (1, 0)
    assert_committed_two_each(loop)
    loop.close()


def test_a_failed_commit_forgets_what_the_last_commit_cost():
    """Without the `max_open_s` bound, the old cost still must not outlive a
    failure: after the broker aborted the transaction the next one commits
    at the interval, not 3x the 2 s of a commit made before the fault."""
    bus = InMemoryBus(transaction_timeout_s=0.2)
    bus.create_topics([TopicSpec(IN, 2), TopicSpec(OUT, 1)])
    loop = loop_on(bus)
    loop.commit_interval_s, loop.max_commit_share = 0.01, 0.25
    loop._commit_cost = 0.1  # spacing 0.3 s: past the timeout once
    produce_two_each(bus)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and not loop.stats.commits:
        loop.run_once()
    assert loop.stats.aborts == 1 and loop.stats.commits == 1
    assert_committed_two_each(loop)
    loop.close()
