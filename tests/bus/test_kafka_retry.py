"""Unit: end offsets ride out transient leadership errors, fail fast otherwise."""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from caesar.bus.errors import BusError
from caesar.bus.kafka import KafkaBus
from caesar.bus.records import OutRecord, TopicPartition


class _FlakyMeta:
    """Stands in for librdkafka's consumer: fails `failures` times, then answers."""

    def __init__(self, code: int, failures: int) -> None:
        self.code, self.failures, self.calls = code, failures, 0
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def get_watermark_offsets(self, tp, timeout):
        self.calls += 1
        if self.calls <= self.failures:
            raise KafkaException(KafkaError(self.code, "Broker: Not leader for partition"))
        return 0, 42


def _bus(meta: _FlakyMeta, timeout_s: float = 5.0) -> KafkaBus:
    bus = KafkaBus(admin_timeout_s=timeout_s)
    bus._meta = meta
    return bus


def test_not_leader_is_retried_until_the_leader_answers():
    meta = _FlakyMeta(KafkaError.NOT_LEADER_FOR_PARTITION, failures=3)
    assert _bus(meta).end_offsets([TopicPartition("t", 0)]) == {TopicPartition("t", 0): 42}
    assert meta.calls == 4


def test_permanent_error_fails_at_once():
    meta = _FlakyMeta(KafkaError.TOPIC_AUTHORIZATION_FAILED, failures=1)
    with pytest.raises(BusError, match=r"cannot read end offset of t\[0\]"):
        _bus(meta).end_offsets([TopicPartition("t", 0)])
    assert meta.calls == 1


def test_transient_error_gives_up_at_the_timeout():
    meta = _FlakyMeta(KafkaError.NOT_LEADER_FOR_PARTITION, failures=10**6)
    with pytest.raises(BusError, match="Not leader"):
        _bus(meta, timeout_s=0.3).end_offsets([TopicPartition("t", 0)])
    assert 2 <= meta.calls < 20


def test_a_client_stuck_on_unknown_partition_is_replaced():
    """After a broker pause librdkafka's client answered "Unknown partition"
    for an existing partition until the process restarted: a new client is
    asked instead, and the stale one closed."""
    stale = _FlakyMeta(KafkaError._UNKNOWN_PARTITION, failures=10**6)
    fresh = _FlakyMeta(KafkaError._UNKNOWN_PARTITION, failures=0)
    bus = _bus(stale)
    bus._new_meta = lambda: fresh  # type: ignore[method-assign]
    assert bus.end_offsets([TopicPartition("t", 0)]) == {TopicPartition("t", 0): 42}
    assert (stale.calls, fresh.calls) == (1, 1)
    deadline = time.monotonic() + 5
    while not stale.closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stale.closed


def test_a_transaction_call_that_never_returns_gives_the_producer_up():
    """librdkafka's send_offsets_to_transaction can block past its timeout when
    the group coordinator went away (seen after a broker restart in the fault
    bench: every service stalled for good). The call is bounded: the producer
    is declared stuck, and the service loop replaces it."""
    import threading

    from caesar.bus.errors import ProducerFencedError, ProducerStuckError
    from caesar.bus.kafka import KafkaProducer

    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:9"})
    release = threading.Event()
    with pytest.raises(ProducerStuckError, match="no answer within 0 s") as caught:
        producer._bounded(release.wait, 30, what="sending offsets", within_s=0.3)
    release.set()
    assert isinstance(caught.value, ProducerFencedError)  # the loop replaces fenced ones

    def fails():
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))

    with pytest.raises(ProducerFencedError, match="fenced") as caught:
        producer._bounded(fails, what="sending offsets", within_s=5)
    assert not isinstance(caught.value, ProducerStuckError)
    producer._producer.flush(0)


def test_commit_and_abort_that_never_return_give_the_producer_up():
    """librdkafka's commit_transaction does not cap its own timeout and abort can
    block for minutes when the coordinator went away (a broker restart): both
    are bounded like send_offsets, so a service loop cannot hang in them."""
    import threading

    from caesar.bus.errors import ProducerStuckError
    from caesar.bus.kafka import KafkaProducer

    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:9"})
    real = producer._producer
    release = threading.Event()

    class _Hanging:
        def commit_transaction(self, timeout: float) -> None:
            release.wait()

        def abort_transaction(self, timeout: float) -> None:
            release.wait()

        def poll(self, timeout: float) -> int:
            return 0

    producer._producer = _Hanging()
    try:
        with pytest.raises(ProducerStuckError, match="committing the transaction"):
            producer.commit_transaction(timeout_s=0.1)
        with pytest.raises(ProducerStuckError, match="aborting the transaction"):
            producer.abort_transaction(timeout_s=0.1)
    finally:
        release.set()
        producer._producer = real
        real.flush(0)


def test_closing_a_fenced_producer_does_not_raise():
    """Seen in the soak (bench/faults/soak.py): a matcher's producer was fenced
    (its transaction had outlived the timeout); replacing it called close(),
    whose flush raised the fatal error, and the actor died instead of
    restoring its last commit in-process."""
    from caesar.bus.kafka import KafkaProducer

    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:9"})
    real = producer._producer

    class _Fenced:
        def flush(self, timeout: float) -> int:
            raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))

    producer._producer = _Fenced()
    producer.transactional = True
    producer.close()
    real.flush(0)


def test_a_producer_knows_when_its_broker_connection_went_down():
    """librdkafka reports a dropped connection through error_cb; the loop
    replaces such a producer before its next transaction."""
    from caesar.bus.kafka import KafkaProducer
    from caesar.runtime.processes import free_port

    producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{free_port()}"})
    deadline = time.monotonic() + 20
    while not producer.connection_lost() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert producer.connection_lost()


def test_flush_waits_out_the_delivery_timeout_then_names_the_failure():
    """A bulk load outlives a stalled broker: flush() waits as long as a record
    may wait (delivery_timeout_ms), not a fixed 30 s, then reports the record
    that timed out rather than an undelivered count."""
    from caesar.bus.kafka import producer_config
    from caesar.runtime.processes import free_port
    from caesar.settings import KafkaSettings

    settings = KafkaSettings(bootstrap_servers=f"127.0.0.1:{free_port()}",
                             delivery_timeout_ms=1500)
    bus = KafkaBus(settings)
    producer = bus.producer()
    producer.produce([OutRecord("t", b"x", partition=0)])
    started = time.monotonic()
    with pytest.raises(BusError, match=r"1 records failed delivery.*t\[0\].*timed out"):
        producer.flush()
    assert 1.0 < time.monotonic() - started < 6.5
    # A transactional producer's records cannot outlive its transaction.
    assert producer_config(KafkaSettings(transaction_timeout_ms=10_000), "id")[
        "message.timeout.ms"] == 10_000
    assert producer_config(KafkaSettings())["message.timeout.ms"] == 120_000
