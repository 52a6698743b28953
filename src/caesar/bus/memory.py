"""An in-process bus with Kafka's semantics where the services can see them:
partitions with offsets, key partitioning by murmur2 (as Kafka's Java client),
consumer groups with committed offsets and partitions spread over members,
topic auto-creation on produce with one partition (as the broker's default).

Not modelled: compaction (every record is kept, the latest per key wins on
read-back as with an uncompacted segment), retention, transactions."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from caesar.bus.errors import BusError, UnknownTopicError
from caesar.bus.partitioner import partition_for_key
from caesar.bus.protocol import OffsetReset
from caesar.bus.records import OutRecord, Record, TopicPartition, TopicSpec


@dataclass
class _Topic:
    spec: TopicSpec
    logs: list[list[Record]]
    next_null_key: int = 0  # round-robin for records without key


@dataclass
class _Group:
    members: list[InMemoryConsumer] = field(default_factory=list)
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    generation: int = 0


class InMemoryBus:
    def __init__(self, *, auto_create_partitions: int = 1) -> None:
        self._cond = threading.Condition()
        self._topics: dict[str, _Topic] = {}
        self._groups: dict[str, _Group] = {}
        self._auto_create_partitions = auto_create_partitions
        self._member_ids = itertools.count()

    # admin ---------------------------------------------------------------
    def create_topics(self, specs: Iterable[TopicSpec]) -> list[str]:
        created = []
        with self._cond:
            for spec in specs:
                if spec.partitions < 1:
                    raise BusError(f"topic {spec.name}: partitions must be >= 1")
                if spec.name not in self._topics:
                    self._topics[spec.name] = _Topic(spec, [[] for _ in range(spec.partitions)])
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
            return {tp: len(self._log(tp)) for tp in partitions}

    def records(self, topic: str) -> list[Record]:
        """Every record of a topic, partition by partition (for tests and embedded runs)."""
        with self._cond:
            return [r for log in self._topic(topic).logs for r in log]

    def producer(self) -> InMemoryProducer:
        return InMemoryProducer(self)

    def consumer(self, group_id: str, *, auto_offset_reset: OffsetReset = "earliest"
                 ) -> InMemoryConsumer:
        return InMemoryConsumer(self, group_id, auto_offset_reset, next(self._member_ids))

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

    def _bump_generations(self) -> None:
        for group in self._groups.values():
            group.generation += 1
        self._cond.notify_all()

    def _append(self, records: Iterable[OutRecord]) -> None:
        now = int(time.time() * 1000)
        with self._cond:
            for rec in records:
                topic = self._topics.get(rec.topic)
                if topic is None:
                    spec = TopicSpec(rec.topic, self._auto_create_partitions)
                    topic = self._topics[rec.topic] = _Topic(spec, [[] for _ in range(spec.partitions)])
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
                log.append(Record(rec.topic, part, len(log), rec.key, rec.value,
                                  rec.timestamp_ms if rec.timestamp_ms is not None else now,
                                  tuple(rec.headers)))
            self._cond.notify_all()


class InMemoryProducer:
    def __init__(self, bus: InMemoryBus) -> None:
        self._bus = bus

    def produce(self, records: Iterable[OutRecord]) -> None:
        self._bus._append(records)

    def flush(self, timeout_s: float = 30.0) -> None:
        pass  # appends are synchronous

    def close(self) -> None:
        pass


class InMemoryConsumer:
    def __init__(self, bus: InMemoryBus, group_id: str, reset: OffsetReset, member: int) -> None:
        self._bus = bus
        self._group_id = group_id
        self._reset = reset
        self._member = member
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

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
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
            log = topic.logs[tp.partition]
            pos = self._positions[tp]
            chunk = log[pos: pos + (max_records - len(out))]
            if chunk:
                out.extend(chunk)
                self._positions[tp] = pos + len(chunk)
                self._consumed[tp] = pos + len(chunk)
        return out
