"""The bus on Apache Kafka (confluent-kafka / librdkafka)."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import (
    TopicPartition as KTopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from caesar.bus.errors import (
    BusError,
    ProducerFencedError,
    ProducerStuckError,
    TransactionAbortedError,
    UnknownTopicError,
)
from caesar.bus.protocol import BusConsumer, OffsetReset
from caesar.bus.records import Headers, OutRecord, Record, TopicPartition, TopicSpec
from caesar.bus.retire import retire
from caesar.settings import KafkaSettings

# Errors a consumer reports in-band that are not failures.
_BENIGN = {KafkaError._PARTITION_EOF}
# Records dropped by an aborted transaction (not a delivery failure).
_PURGED = {KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT}
# Metadata errors that clear once partition leadership settles.
_TRANSIENT = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
}
# Client errors that say a connection to the broker went down.
_CONNECTION_LOST = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
# Answers a client can keep giving from a stale view of the cluster.
_STALE = {KafkaError._UNKNOWN_PARTITION, KafkaError._TIMED_OUT}
# In-band consumer errors that do not go away by waiting.
_PERMANENT = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError._AUTHENTICATION,
    KafkaError._SSL,
    KafkaError._INVALID_ARG,
}


def producer_config(s: KafkaSettings, transactional_id: str | None = None) -> dict[str, Any]:
    """librdkafka properties of a producer (transactional when given an id)."""
    conf: dict[str, Any] = {
        **s.client_config(),
        "linger.ms": s.linger_ms,
        "batch.size": s.producer_batch_bytes,
        "acks": "all",
        "enable.idempotence": True,
        # Same key -> partition mapping as Kafka's Java client (and the
        # InMemoryBus); librdkafka's default is CRC32-based.
        "partitioner": "murmur2_random",
        "message.timeout.ms": s.delivery_timeout_ms,
        **s.producer,
    }
    if transactional_id is not None:
        conf["transactional.id"] = transactional_id
        conf["transaction.timeout.ms"] = s.transaction_timeout_ms
        # librdkafka refuses a record timeout beyond the transaction's.
        conf["message.timeout.ms"] = min(int(conf["message.timeout.ms"]),
                                         s.transaction_timeout_ms)
    return conf


class KafkaBus:
    def __init__(self, settings: KafkaSettings | None = None, *,
                 admin_timeout_s: float = 30.0) -> None:
        self.settings = settings or KafkaSettings()
        self._admin_timeout_s = admin_timeout_s
        self._admin: AdminClient | None = None
        self._meta: Consumer | None = None
        self._lock = threading.Lock()

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            conf: dict[str, str | int | float | bool] = {**self.settings.client_config()}
            self._admin = AdminClient(conf)
        return self._admin

    def producer(self, transactional_id: str | None = None) -> KafkaProducer:
        return KafkaProducer(producer_config(self.settings, transactional_id), transactional_id,
                             self._admin_timeout_s)

    def consumer(self, group_id: str, *, auto_offset_reset: OffsetReset = "earliest",
                 read_committed: bool = True) -> KafkaConsumer:
        s = self.settings
        conf: dict[str, Any] = {
            **s.client_config(),
            "group.id": group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": auto_offset_reset,
            # EOF events tell where a partition ends past transaction markers
            # (the position alone stops before an abort marker): see position().
            "enable.partition.eof": True,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
            **s.consumer,
        }
        return KafkaConsumer(conf)

    # admin ---------------------------------------------------------------
    def create_topics(self, specs: Iterable[TopicSpec]) -> list[str]:
        specs = list(specs)
        if not specs:
            return []
        new = [NewTopic(s.name, num_partitions=s.partitions,
                        replication_factor=s.replication_factor, config=dict(s.config))
               for s in specs]
        futures = self.admin.create_topics(new, operation_timeout=self._admin_timeout_s,
                                           request_timeout=self._admin_timeout_s)
        created = []
        for name, fut in futures.items():
            try:
                fut.result(timeout=self._admin_timeout_s)
                created.append(name)
            except KafkaException as exc:
                if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                raise BusError(f"cannot create topic {name}: {exc.args[0].str()}") from exc
        if created:
            self._wait_for_metadata(created)
        return created

    def _wait_for_metadata(self, names: list[str]) -> None:
        # CreateTopics returns before every broker knows the leaders; wait so a
        # producer or consumer started right after sees the partitions.
        deadline = time.monotonic() + self._admin_timeout_s
        pending = set(names)
        while pending and time.monotonic() < deadline:
            md = self.admin.list_topics(timeout=self._admin_timeout_s)
            pending = {n for n in pending
                       if n not in md.topics or md.topics[n].error is not None
                       or any(p.leader < 0 for p in md.topics[n].partitions.values())}
            if pending:
                time.sleep(0.05)
        if pending:
            raise BusError(f"topics {sorted(pending)} have no partition leaders after "
                           f"{self._admin_timeout_s:.0f} s")

    def delete_topics(self, names: Iterable[str]) -> None:
        names = list(names)
        if not names:
            return
        for name, fut in self.admin.delete_topics(
                names, operation_timeout=self._admin_timeout_s).items():
            try:
                fut.result(timeout=self._admin_timeout_s)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise BusError(f"cannot delete topic {name}: {exc.args[0].str()}") from exc

    def list_topics(self) -> dict[str, int]:
        try:
            md = self.admin.list_topics(timeout=self._admin_timeout_s)
        except KafkaException as exc:
            raise BusError(f"cannot reach Kafka at {self.settings.bootstrap_servers}: "
                           f"{exc.args[0].str()}") from exc
        return {name: len(t.partitions) for name, t in md.topics.items()
                if not name.startswith("__")}

    def topic_config(self, name: str) -> dict[str, str]:
        resource = ConfigResource(ResourceType.TOPIC, name)
        fut = self.admin.describe_configs([resource],
                                          request_timeout=self._admin_timeout_s)[resource]
        try:
            entries = fut.result(timeout=self._admin_timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise UnknownTopicError(f"topic {name!r} does not exist") from exc
            raise BusError(f"cannot describe topic {name}: {exc.args[0].str()}") from exc
        return {key: entry.value for key, entry in entries.items() if entry.value is not None}

    def end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        with self._lock:
            return {TopicPartition(*tp): self._high_watermark(tp) for tp in partitions}

    def _meta_consumer(self) -> Consumer:
        if self._meta is None:
            self._meta = self._new_meta()
        return self._meta

    def _new_meta(self) -> Consumer:
        # read_committed: the high offset is the last stable offset
        return Consumer({**self.settings.client_config(),
                         "group.id": f"caesar-meta-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False,
                         "isolation.level": "read_committed"})

    def _drop_meta(self) -> None:
        """Forget the metadata consumer: after a broker pause librdkafka can
        keep answering "Unknown partition" for a partition that exists (60 s
        seen here, until the process restarted); a new client asks afresh.
        Retired aside, since closing can block on the connection it lost."""
        if self._meta is not None:
            retire(self._meta, "meta")
            self._meta = None

    def _high_watermark(self, tp: TopicPartition) -> int:
        # A broker answers NOT_LEADER / LEADER_NOT_AVAILABLE while leadership
        # of a fresh partition settles; such errors are retried (with a new
        # client) until the admin timeout, anything else fails at once.
        deadline = time.monotonic() + self._admin_timeout_s
        delay = 0.05
        while True:
            try:
                _, high = self._meta_consumer().get_watermark_offsets(
                    KTopicPartition(tp.topic, tp.partition), timeout=self._admin_timeout_s)
                return high
            except KafkaException as exc:
                err = exc.args[0]
                transient = err.retriable() or err.code() in _TRANSIENT | _STALE
                if not transient or time.monotonic() + delay > deadline:
                    raise BusError(f"cannot read end offset of {tp.topic}[{tp.partition}]: "
                                   f"{err.str()}") from exc
                if err.code() in _STALE:
                    self._drop_meta()
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def close(self) -> None:
        with self._lock:
            if self._meta is not None:
                self._meta.close()
                self._meta = None
        self._admin = None


class _Health:
    """What a producer's error callback saw."""

    def __init__(self) -> None:
        self.lost = False

    def on_error(self, err: KafkaError) -> None:
        if err.code() in _CONNECTION_LOST:
            self.lost = True


class KafkaProducer:
    def __init__(self, conf: dict[str, Any], transactional_id: str | None = None,
                 timeout_s: float = 30.0) -> None:
        # The error callback must not reach back to this object: a cycle would
        # leave destroying the librdkafka handle to the garbage collector, on
        # whichever thread it runs (retire.py).
        self._health = _Health()
        self._producer = Producer({"error_cb": self._health.on_error, **conf})
        self._errors: list[str] = []
        self._delivery_timeout_s = float(conf.get("message.timeout.ms", 300_000)) / 1000
        self.transactional = transactional_id is not None
        self.transactional_id = transactional_id
        if transactional_id is not None:
            # Fences an older producer with this id and aborts its open transaction.
            self._bounded(self._producer.init_transactions, timeout_s,
                          what=f"initialising transactions for {transactional_id!r}",
                          within_s=4 * timeout_s)

    def connection_lost(self) -> bool:
        self._producer.poll(0)  # serves the error callbacks queued since the last call
        return self._health.lost

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None and err.code() not in _PURGED:
            self._errors.append(f"{msg.topic()}[{msg.partition()}]: {err.str()}")

    def produce(self, records: Iterable[OutRecord]) -> None:
        produce = self._producer.produce
        for rec in records:
            kwargs: dict[str, Any] = {"on_delivery": self._on_delivery}
            if rec.partition is not None:
                kwargs["partition"] = rec.partition
            if rec.timestamp_ms is not None:
                kwargs["timestamp"] = rec.timestamp_ms
            if rec.headers:
                kwargs["headers"] = list(rec.headers)
            while True:
                try:
                    produce(rec.topic, rec.value, rec.key, **kwargs)
                    break
                except BufferError:
                    # Local queue full: let librdkafka send, then retry.
                    self._producer.poll(0.05)
                except KafkaException as exc:
                    raise BusError(f"cannot produce to {rec.topic}"
                                   f"{'' if rec.partition is None else f'[{rec.partition}]'}: "
                                   f"{exc.args[0].str()}") from exc
        self._producer.poll(0)

    def flush(self, timeout_s: float | None = None) -> None:
        if timeout_s is None:
            # Each record is delivered or fails within its delivery timeout.
            timeout_s = self._delivery_timeout_s + 5.0
        left = self._producer.flush(timeout_s)
        if left:
            raise BusError(f"{left} records not delivered within {timeout_s} s "
                           "(is the broker reachable?)")
        if self._errors:
            errors, self._errors = self._errors, []
            raise BusError(f"{len(errors)} records failed delivery, first: {errors[0]}")

    # transactions ------------------------------------------------------
    def _txn_call(self, call: Any, *args: Any, what: str, retry_s: float = 120.0) -> None:
        """Run a transaction API call, retrying what librdkafka says is retriable
        and mapping the rest to TransactionAbortedError / ProducerFencedError."""
        deadline = time.monotonic() + retry_s
        while True:
            try:
                call(*args)
                return
            except KafkaException as exc:
                err = exc.args[0]
                if err.fatal():
                    raise ProducerFencedError(f"{what}: {err.str()}") from exc
                if err.txn_requires_abort():
                    raise TransactionAbortedError(f"{what}: {err.str()}") from exc
                if err.retriable() and time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                raise BusError(f"{what}: {err.str()}") from exc

    def begin_transaction(self) -> None:
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            err = exc.args[0]
            cls = ProducerFencedError if err.fatal() else BusError
            raise cls(f"begin transaction: {err.str()}") from exc

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int],
                                    consumer: BusConsumer, timeout_s: float = 30.0) -> None:
        if not offsets:
            return
        tps = [KTopicPartition(tp[0], tp[1], off) for tp, off in offsets.items()]
        meta = consumer._consumer.consumer_group_metadata()  # type: ignore[attr-defined]
        self._bounded(self._producer.send_offsets_to_transaction, tps, meta, timeout_s,
                      what="sending offsets to the transaction", within_s=2 * timeout_s)

    def _bounded(self, call: Any, *args: Any, what: str, within_s: float) -> None:
        """_txn_call in a helper thread, given up after `within_s`: librdkafka's
        transaction calls can block forever, past their own timeout, when the
        coordinator went away (a broker restart): send_offsets_to_transaction
        (confluentinc/librdkafka#5456, #5511), commit (its timeout is not
        capped, MaterializeInc/materialize#30508) and abort (#3779). Then this
        producer is unusable: ProducerStuckError, and the loop replaces it (the
        new instance fences this one and aborts its transaction). The blocked
        thread is left behind."""
        done = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                self._txn_call(call, *args, what=what, retry_s=within_s / 2)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the caller
                failure.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, name=f"txn-{self.transactional_id}", daemon=True).start()
        if not done.wait(within_s):
            raise ProducerStuckError(f"{what}: no answer within {within_s:.0f} s (the "
                                     "coordinator moved or restarted); replacing the producer")
        if failure:
            raise failure[0]

    def commit_transaction(self, timeout_s: float = 30.0) -> None:
        self._bounded(self._producer.commit_transaction, timeout_s,
                      what="committing the transaction", within_s=2 * timeout_s)
        if self._errors:  # delivery failures of a committed transaction cannot happen
            errors, self._errors = self._errors, []
            raise TransactionAbortedError(f"{len(errors)} records failed: {errors[0]}")

    def abort_transaction(self, timeout_s: float = 30.0) -> None:
        self._bounded(self._producer.abort_transaction, timeout_s,
                      what="aborting the transaction", within_s=2 * timeout_s)
        self._producer.poll(0)
        self._errors = []

    def close(self) -> None:
        if self.transactional:
            # Whatever is still open dies with the producer (its transaction is
            # aborted by the next producer with this id, or by its timeout). A
            # fenced producer (fatal error) raises on flush: nothing of it can
            # be delivered any more, and its replacement must go on.
            with contextlib.suppress(KafkaException):
                self._producer.flush(0)
            return
        self.flush()


class KafkaConsumer:
    def __init__(self, conf: dict[str, Any]) -> None:
        self._consumer = Consumer(conf)
        self._consumed: dict[TopicPartition, int] = {}
        self._eof: dict[TopicPartition, int] = {}  # end offset a fetch reported
        self._pending_seeks: dict[TopicPartition, int] = {}
        self._assigned: list[TopicPartition] = []
        self._closed = False
        self.last_error: str | None = None  # last transient error librdkafka reported

    def _on_assign(self, consumer: Consumer, partitions: list[KTopicPartition]) -> None:
        for p in partitions:
            off = self._pending_seeks.pop(TopicPartition(p.topic, p.partition), None)
            if off is not None:
                p.offset = off
        consumer.assign(partitions)
        self._assigned = [TopicPartition(p.topic, p.partition) for p in partitions]

    def _on_revoke(self, consumer: Consumer, partitions: list[KTopicPartition]) -> None:
        gone = {TopicPartition(p.topic, p.partition) for p in partitions}
        self._assigned = [tp for tp in self._assigned if tp not in gone]
        self._consumed = {tp: o for tp, o in self._consumed.items() if tp not in gone}

    def subscribe(self, topics: Sequence[str]) -> None:
        self._consumer.subscribe(list(topics), on_assign=self._on_assign,
                                 on_revoke=self._on_revoke, on_lost=self._on_revoke)

    def assign(self, partitions: Sequence[TopicPartition],
               offsets: Mapping[TopicPartition, int] | None = None) -> None:
        offsets = offsets or {}
        ktps = []
        for tp in partitions:
            tp = TopicPartition(*tp)
            start = offsets.get(tp, self._pending_seeks.pop(tp, None))
            ktps.append(KTopicPartition(tp.topic, tp.partition)
                        if start is None else KTopicPartition(tp.topic, tp.partition, start))
        self._consumer.assign(ktps)
        self._assigned = [TopicPartition(*tp) for tp in partitions]
        self._eof = {}

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition) for p in self._consumer.assignment()]

    def position(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        got = self._consumer.position([KTopicPartition(tp[0], tp[1]) for tp in partitions])
        out: dict[TopicPartition, int | None] = {}
        for p in got:
            tp = TopicPartition(p.topic, p.partition)
            pos = p.offset if p.offset >= 0 else None
            eof = self._eof.get(tp)
            # librdkafka leaves the position before aborted records and their
            # marker when nothing visible follows; the EOF event knows better.
            out[tp] = eof if eof is not None and (pos is None or eof > pos) else pos
        return out

    def poll(self, max_records: int, timeout_s: float) -> list[Record]:
        if self._closed:
            raise BusError("consumer is closed")
        out: list[Record] = []
        for m in self._fetch(max_records, timeout_s):
            err = m.error()
            if err is not None:
                self._in_band(m, err)
                continue
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            # librdkafka sets these on every message that is not an error.
            assert topic is not None and partition is not None and offset is not None
            _, ts = m.timestamp()
            out.append(Record(topic, partition, offset, m.key(), m.value(), ts,
                              _headers(m.headers())))
        consumed = self._consumed
        for r in out:
            consumed[TopicPartition(r.topic, r.partition)] = r.offset + 1
        return out

    def _fetch(self, max_records: int, timeout_s: float) -> list[Any]:
        """librdkafka's consume() waits until it has max_records or the timeout
        passed; take what is already fetched, and block only for the first record."""
        consumer = self._consumer
        msgs = consumer.consume(num_messages=max_records, timeout=0)
        if msgs:
            return list(msgs)
        first = consumer.poll(timeout_s)
        if first is None:
            return []
        if max_records > 1:
            return [first, *consumer.consume(num_messages=max_records - 1, timeout=0)]
        return [first]

    def _in_band(self, m: Any, err: Any) -> None:
        """librdkafka reports transient conditions in-band (coordinator moves,
        a topic not created yet) and recovers by itself, as the Java client
        does: remember them. Fail only on what never heals."""
        if err.fatal() or err.code() in _PERMANENT:
            raise BusError(f"consuming {m.topic()}: {err.str()}")
        if err.code() == KafkaError._PARTITION_EOF:
            topic, part, end = m.topic(), m.partition(), m.offset()
            if topic is not None and part is not None and end is not None:
                self._eof[TopicPartition(topic, part)] = end
        elif err.code() not in _BENIGN:
            self.last_error = err.str()

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        chosen = dict(self._consumed) if offsets is None else dict(offsets)
        if not chosen:
            return
        try:
            self._consumer.commit(offsets=[KTopicPartition(tp[0], tp[1], off)
                                           for tp, off in chosen.items()], asynchronous=False)
        except KafkaException as exc:
            raise BusError(f"commit failed: {exc.args[0].str()}") from exc

    def committed(self, partitions: Sequence[TopicPartition], timeout_s: float = 30.0
                  ) -> dict[TopicPartition, int | None]:
        try:
            got = self._consumer.committed([KTopicPartition(tp[0], tp[1]) for tp in partitions],
                                           timeout=timeout_s)
        except KafkaException as exc:
            raise BusError(f"cannot read committed offsets: {exc.args[0].str()}") from exc
        return {TopicPartition(p.topic, p.partition): (None if p.offset == OFFSET_INVALID or p.offset < 0
                                                       else p.offset) for p in got}

    def seek(self, partition: TopicPartition, offset: int) -> None:
        tp = TopicPartition(*partition)
        self._consumed.pop(tp, None)
        self._eof.pop(tp, None)
        if tp not in self.assignment():
            # Not assigned yet (group join in progress): apply on assignment.
            self._pending_seeks[tp] = offset
            return
        try:
            self._consumer.seek(KTopicPartition(tp.topic, tp.partition, offset))
        except KafkaException:
            # Assigned but fetching not started yet: re-assign at the offset.
            current = [KTopicPartition(p.topic, p.partition, offset)
                       if (p.topic, p.partition) == tp else p
                       for p in self._consumer.position(self._consumer.assignment())]
            self._consumer.assign(current)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._consumer.close()


def _headers(raw: Sequence[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None] | None
             ) -> Headers:
    """A consumed message's headers (librdkafka gives a list of (name, bytes or None))."""
    if not raw:
        return ()
    pairs = raw.items() if isinstance(raw, Mapping) else raw
    return tuple((k, v.encode() if isinstance(v, str) else v) for k, v in pairs)
