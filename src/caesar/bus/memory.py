"""An in-process bus with Kafka's semantics where the services can see them:
partitions with offsets, key partitioning by murmur2 (as Kafka's Java client),
consumer groups with committed offsets and partitions spread over members,
topic auto-creation on produce with one partition (as the broker's default),
and transactions: records of a transaction are appended as they are produced
but read-committed consumers see them only once it commits (never if it
aborts), a partition's last stable offset stops them at its oldest open
transaction, commit/abort markers take an offset each (offsets have gaps, as
on Kafka), offsets sent to a transaction are committed with it, and a new
producer with the same transactional id fences the old one and aborts its
open transaction; with `transaction_timeout_s`, a transaction open longer
than that is aborted (the broker's transaction.timeout.ms, checked when its
producer next calls).

Not modelled: compaction (every record is kept, the latest per key wins on
read-back as with an uncompacted segment), retention.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from caesar.bus.errors import (
    BusError,
    ProducerFencedError,
    TransactionAbortedError,
    UnknownTopicError,
)
from caesar.bus.partitioner import partition_for_key
from caesar.bus.protocol import BusConsumer, OffsetReset
from caesar.bus.records import OutRecord, Record, TopicPartition, TopicSpec

PLAIN = 0  # a record written outside any transaction
MARKER = -1  # a commit/abort marker (never returned by poll)


@dataclass
class _Topic:
    spec: TopicSpec
    logs: list[list[Record]]
    # Per record: PLAIN, MARKER or the id of the transaction that wrote it.
    owners: list[list[int]]
    next_null_key: int = 0  # round-robin for records without key


@dataclass
class _Group:
    members: list[InMemoryConsumer] = field(default_factory=list)
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    generation: int = 0


@dataclass
class _Txn:
    id: int
    began: float = field(default_factory=time.monotonic)
    first: dict[TopicPartition, int] = field(default_factory=dict)  # first offset written
    offsets: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)  # group -> tp -> off


class InMemoryBus:
    def __init__(self, *, auto_create_partitions: int = 1,
                 transaction_timeout_s: float | None = None) -> None:
        self._cond = threading.Condition()
        self.transaction_timeout_s = transaction_timeout_s
        self._topics: dict[str, _Topic] = {}
        self._groups: dict[str, _Group] = {}
        self._auto_create_partitions = auto_create_partitions
        self._member_ids = itertools.count()
        self._txn_ids = itertools.count(1)
        self._open: dict[int, _Txn] = {}  # open transactions by id
        self._aborted: set[int] = set()
        self._epochs: dict[str, int] = {}  # transactional id -> current producer epoch
        self._open_by_producer: dict[str, int] = {}  # transactional id -> open txn id

    # admin ---------------------------------------------------------------
    def create_topics(self, specs: Iterable[TopicSpec]) -> list[str]:
        created = []
        with self._cond:
            for spec in specs:
                if spec.partitions < 1:
                    raise BusError(f"topic {spec.name}: partitions must be >= 1")
                if spec.name not in self._topics:
                    self._topics[spec.name] = _new_topic(spec)
                    created.append(spec.name)
            self._bump_generations()
        return created

    def delete_topics(self, names: Iterable[str]) -> None:
        with self._cond:
            for name in names:
                self._topics.pop(name, None)
            self._bump_generations()

    def list_topics(self) -> dict[str, int]:
        with self._cond:
            return {name: len(t.logs) for name, t in self._topics.items()}

    def topic_config(self, name: str) -> dict[str, str]:
        with self._cond:
            return dict(self._topic(name).spec.config)

    def end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        with self._cond:
            return {tp: self._stable_end(tp) for tp in partitions}

    def records(self, topic: str) -> list[Record]:
        """Every committed record of a topic, partition by partition (what a
        read-committed consumer reading it from the start gets; for tests)."""
        with self._cond:
            t = self._topic(topic)
            out = []
            for part, log in enumerate(t.logs):
                end = self._stable_end(TopicPartition(topic, part))
                owners = t.owners[part]
                out += [r for r, o in zip(log[:end], owners[:end], strict=True)
                        if o == PLAIN or (o > 0 and o not in self._aborted)]
            return out

    def producer(self, transactional_id: str | None = None) -> InMemoryProducer:
        return InMemoryProducer(self, transactional_id)

    def consumer(self, group_id: str, *, auto_offset_reset: OffsetReset = "earliest",
                 read_committed: bool = True) -> InMemoryConsumer:
        return InMemoryConsumer(self, group_id, auto_offset_reset, next(self._member_ids),
                                read_committed)

    def close(self) -> None:
        pass

    # internals (called with the lock held) ---------------------------------
    def _topic(self, name: str) -> _Topic:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"topic {name!r} does not exist")
        return topic

    def _log(self, tp: TopicPartition) -> list[Record]:
        logs = self._topic(tp.topic).logs
        if not 0 <= tp.partition < len(logs):
            raise UnknownTopicError(f"topic {tp.topic!r} has no partition {tp.partition}")
        return logs[tp.partition]

    def _stable_end(self, tp: TopicPartition) -> int:
        """Last stable offset: the first offset of the oldest open transaction."""
        end = len(self._log(tp))
        for txn in self._open.values():
            first = txn.first.get(tp)
            if first is not None and first < end:
                end = first
        return end

    def _bump_generations(self) -> None:
        for group in self._groups.values():
            group.generation += 1
        self._cond.notify_all()

    def _append(self, records: Iterable[OutRecord], owner: int = PLAIN,
                txn: _Txn | None = None) -> None:
        now = int(time.time() * 1000)
        with self._cond:
            for rec in records:
                topic = self._topics.get(rec.topic)
                if topic is None:
                    topic = self._topics[rec.topic] = _new_topic(
                        TopicSpec(rec.topic, self._auto_create_partitions))
                    self._bump_generations()
                n = len(topic.logs)
                if rec.partition is not None:
                    if not 0 <= rec.partition < n:
                        raise UnknownTopicError(f"topic {rec.topic!r} has no partition {rec.partition}")
                    part = rec.partition
                elif rec.key is not None:
                    part = partition_for_key(rec.key, n)
                else:
                    part = topic.next_null_key % n
                    topic.next_null_key += 1
                log = topic.logs[part]
                if txn is not None:
                    txn.first.setdefault(TopicPartition(rec.topic, part), len(log))
                log.append(Record(rec.topic, part, len(log), rec.key, rec.value,
                                  rec.timestamp_ms if rec.timestamp_ms is not None else now,
                                  tuple(rec.headers)))
                topic.owners[part].append(owner)
            self._cond.notify_all()

    def _end_txn(self, txn: _Txn, commit: bool) -> None:
        """Write a marker into every partition the transaction touched; on commit,
        commit its offsets; on abort, hide its records."""
        now = int(time.time() * 1000)
        with self._cond:
            for tp in txn.first:
                log = self._log(tp)
                log.append(Record(tp.topic, tp.partition, len(log), None, None, now,
                                  (("__txn", b"commit" if commit else b"abort"),)))
                self._topics[tp.topic].owners[tp.partition].append(MARKER)
            if commit:
                for group_id, offsets in txn.offsets.items():
                    group = self._groups.setdefault(group_id, _Group())
                    group.committed.update(offsets)
            else:
                self._aborted.add(txn.id)
            self._open.pop(txn.id, None)
            self._cond.notify_all()


def _new_topic(spec: TopicSpec) -> _Topic:
    return _Topic(spec, [[] for _ in range(spec.partitions)],
                  [[] for _ in range(spec.partitions)])


class InMemoryProducer:
    def __init__(self, bus: InMemoryBus, transactional_id: str | None = None) -> None:
        self._bus = bus
        self.transactional_id = transactional_id
        self.transactional = transactional_id is not None
        self._txn: _Txn | None = None
        self._epoch = 0
        if transactional_id is not None:
            with bus._cond:  # init_transactions: fence the previous producer, abort its txn
                self._epoch = bus._epochs.get(transactional_id, 0) + 1
                bus._epochs[transactional_id] = self._epoch
                previous = bus._open_by_producer.pop(transactional_id, None)
                if previous is not None and previous in bus._open:
                    bus._end_txn(bus._open[previous], commit=False)

    def _check(self) -> None:
        if self.transactional_id is None:
            raise BusError("not a transactional producer")
        if self._bus._epochs.get(self.transactional_id) != self._epoch:
            raise ProducerFencedError(f"producer {self.transactional_id!r} was fenced by a "
                                      "newer instance with the same transactional id")
        timeout = self._bus.transaction_timeout_s
        txn = self._txn
        if (timeout is not None and txn is not None and txn.id in self._bus._open
                and time.monotonic() - txn.began > timeout):
            self._bus._end_txn(txn, commit=False)  # as the coordinator does on its timeout
            self._bus._open_by_producer.pop(self.transactional_id, None)

    def produce(self, records: Iterable[OutRecord]) -> None:
        if self.transactional_id is None:
            self._bus._append(records)
            return
        with self._bus._cond:
            self._check()
            if self._txn is None:
                raise BusError("produce outside a transaction on a transactional producer "
                               "(call begin_transaction first)")
            self._bus._append(records, self._txn.id, self._txn)

    def flush(self, timeout_s: float | None = None) -> None:
        pass  # appends are synchronous

    def begin_transaction(self) -> None:
        with self._bus._cond:
            self._check()
            if self._txn is not None:
                raise BusError("a transaction is already open")
            self._txn = _Txn(next(self._bus._txn_ids))
            self._bus._open[self._txn.id] = self._txn
            self._bus._open_by_producer[self.transactional_id] = self._txn.id  # type: ignore[index]

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int],
                                    consumer: BusConsumer, timeout_s: float = 30.0) -> None:
        with self._bus._cond:
            self._check()
            if self._txn is None:
                raise BusError("no open transaction")
            group = consumer._group_id  # type: ignore[attr-defined]
            self._txn.offsets.setdefault(group, {}).update(
                {TopicPartition(*tp): off for tp, off in offsets.items()})

    def commit_transaction(self, timeout_s: float = 30.0) -> None:
        with self._bus._cond:
            self._check()
            txn, self._txn = self._txn, None
            if txn is None:
                raise BusError("no open transaction")
            if txn.id not in self._bus._open:
                raise TransactionAbortedError("the transaction was aborted")
            self._bus._end_txn(txn, commit=True)
            self._bus._open_by_producer.pop(self.transactional_id, None)  # type: ignore[arg-type]

    def abort_transaction(self, timeout_s: float = 30.0) -> None:
        with self._bus._cond:
            self._check()
            txn, self._txn = self._txn, None
            if txn is not None and txn.id in self._bus._open:
                self._bus._end_txn(txn, commit=False)
            self._bus._open_by_producer.pop(self.transactional_id, None)  # type: ignore[arg-type]

    def connection_lost(self) -> bool:
        return False  # in process: there is no connection to lose

    def close(self) -> None:
        pass


class InMemoryConsumer:
    def __init__(self, bus: InMemoryBus, group_id: str, reset: OffsetReset, member: int,
                 read_committed: bool = True) -> None:
        self._bus = bus
        self._group_id = group_id
        self._reset = reset
        self._member = member
        self._read_committed = read_committed
        self._topics: tuple[str, ...] = ()
        self._manual: list[TopicPartition] | None = None
        self._assigned: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._consumed: dict[TopicPartition, int] = {}
        self._generation = -1
        self._rotation = 0
        self._closed = False
        with bus._cond:
            self._group = bus._groups.setdefault(group_id, _Group())

    def subscribe(self, topics: Sequence[str]) -> None:
        with self._bus._cond:
            self._topics = tuple(topics)
            self._manual = None
            if self not in self._group.members:
                self._group.members.append(self)
            self._group.generation += 1
            self._bus._cond.notify_all()

    def assign(self, partitions: Sequence[TopicPartition],
               offsets: Mapping[TopicPartition, int] | None = None) -> None:
        with self._bus._cond:
            if self in self._group.members:
                self._group.members.remove(self)
                self._group.generation += 1
            self._manual = [TopicPartition(*tp) for tp in partitions]
            self._set_assignment(self._manual)
            for tp, off in (offsets or {}).items():
                self._positions[TopicPartition(*tp)] = off

    def assignment(self) -> list[TopicPartition]:
        with self._bus._cond:
            self._refresh()
            return list(self._assigned)

    def position(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        with self._bus._cond:
            self._refresh()
            out: dict[TopicPartition, int | None] = {}
            for tp in partitions:
                tp = TopicPartition(*tp)
                if tp in self._positions:
                    self._skip_invisible(tp)
                out[tp] = self._positions.get(tp)
            return out

    def poll(self, max_records: int, timeout_s: float) -> list[Record]:
        if self._closed:
            raise BusError("consumer is closed")
        deadline = time.monotonic() + timeout_s
        cond = self._bus._cond
        with cond:
            while True:
                self._refresh()
                out = self._take(max_records)
                remaining = deadline - time.monotonic()
                if out or remaining <= 0:
                    return out
                cond.wait(remaining)

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        with self._bus._cond:
            chosen = dict(self._consumed) if offsets is None else dict(offsets)
            for tp, off in chosen.items():
                self._group.committed[TopicPartition(*tp)] = off

    def committed(self, partitions: Sequence[TopicPartition], timeout_s: float = 30.0
                  ) -> dict[TopicPartition, int | None]:
        with self._bus._cond:
            return {tp: self._group.committed.get(TopicPartition(*tp)) for tp in partitions}

    def seek(self, partition: TopicPartition, offset: int) -> None:
        with self._bus._cond:
            self._refresh()
            tp = TopicPartition(*partition)
            if tp not in self._assigned:
                raise BusError(f"cannot seek {tp.topic}[{tp.partition}]: not assigned to this consumer")
            self._positions[tp] = offset

    def close(self) -> None:
        with self._bus._cond:
            if self in self._group.members:
                self._group.members.remove(self)
                self._group.generation += 1
                self._bus._cond.notify_all()
            self._closed = True

    # internals (lock held) -------------------------------------------------
    def _refresh(self) -> None:
        if self._manual is not None or self._generation == self._group.generation:
            return
        self._generation = self._group.generation
        self._set_assignment(self._group_share())

    def _group_share(self) -> list[TopicPartition]:
        """Range assignment per topic over the members subscribed to it (Kafka's default)."""
        mine: list[TopicPartition] = []
        for topic in self._topics:
            t = self._bus._topics.get(topic)
            if t is None:
                continue
            members = sorted((m for m in self._group.members if topic in m._topics),
                             key=lambda m: m._member)
            n, k = len(t.logs), len(members)
            idx = members.index(self)
            per, extra = divmod(n, k)
            start = idx * per + min(idx, extra)
            count = per + (1 if idx < extra else 0)
            mine.extend(TopicPartition(topic, p) for p in range(start, start + count))
        return mine

    def _set_assignment(self, partitions: list[TopicPartition]) -> None:
        kept = set(partitions)
        self._positions = {tp: o for tp, o in self._positions.items() if tp in kept}
        self._consumed = {tp: o for tp, o in self._consumed.items() if tp in kept}
        for tp in partitions:
            if tp not in self._positions:
                committed = self._group.committed.get(tp)
                if committed is not None:
                    self._positions[tp] = committed
                elif self._reset == "earliest":
                    self._positions[tp] = 0
                else:
                    self._positions[tp] = len(self._bus._log(tp)) if tp.topic in self._bus._topics else 0
        self._assigned = list(partitions)

    def _visible_end(self, tp: TopicPartition) -> int:
        if self._read_committed:
            return self._bus._stable_end(tp)
        return len(self._bus._log(tp))

    def _visible(self, owner: int) -> bool:
        if owner == MARKER:
            return False
        return not (self._read_committed and owner > 0 and owner in self._bus._aborted)

    def _skip_invisible(self, tp: TopicPartition) -> None:
        """Move the position past markers and aborted records (as a fetch does)."""
        topic = self._bus._topics.get(tp.topic)
        if topic is None or tp.partition >= len(topic.logs):
            return
        owners = topic.owners[tp.partition]
        end = self._visible_end(tp)
        pos = self._positions[tp]
        while pos < end and not self._visible(owners[pos]):
            pos += 1
        self._positions[tp] = pos

    def _take(self, max_records: int) -> list[Record]:
        out: list[Record] = []
        parts = self._assigned
        if not parts:
            return out
        start = self._rotation % len(parts)
        self._rotation += 1
        for tp in parts[start:] + parts[:start]:
            if len(out) >= max_records:
                break
            topic = self._bus._topics.get(tp.topic)
            if topic is None or tp.partition >= len(topic.logs):
                continue
            log, owners = topic.logs[tp.partition], topic.owners[tp.partition]
            end = self._visible_end(tp)
            pos = self._positions[tp]
            taken = False
            while pos < end and len(out) < max_records:
                if self._visible(owners[pos]):
                    out.append(log[pos])
                    taken = True
                pos += 1
            self._positions[tp] = pos
            if taken:
                self._consumed[tp] = out[-1].offset + 1
        return out
