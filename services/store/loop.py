"""The runner loop every service shares: poll a batch from the bus, hand it
to the service's handler (decode -> processors -> encode), produce the
outputs, and commit in one fixed order:

    1. outputs produced (queued)          3. producer flushed (all delivered)
    2. changelog + checkpoint queued      4. input offsets committed

so a committed input offset is always covered by delivered outputs and a
delivered state. On start the loop restores the newest state and resumes the
inputs at the offsets that state covers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from services.store.checkpoint import CheckpointStore
from shared.bus.errors import BusError
from shared.bus.protocol import Bus
from shared.bus.records import OutRecord, Record, TopicPartition

log = logging.getLogger(__name__)


class Handler(Protocol):
    def handle(self, records: Sequence[Record]) -> list[OutRecord]: ...

    def idle(self, idle_s: float) -> list[OutRecord]:
        """Called when a poll returned nothing; `idle_s` since the last record."""
        ...

    def snapshot(self) -> Any: ...

    def restore(self, state: Any) -> None: ...

    def event_time(self) -> int: ...


@dataclass
class LoopStats:
    records_in: int = 0
    records_out: int = 0
    batches: int = 0
    commits: int = 0
    restored_from: dict[str, int] = field(default_factory=dict)


class ServiceLoop:
    def __init__(self, *, bus: Bus, group_id: str, inputs: Sequence[TopicPartition],
                 handler: Handler, store: CheckpointStore | None, batch_size: int = 2000,
                 poll_timeout_s: float = 0.2, commit_interval_s: float = 1.0) -> None:
        self.bus = bus
        self.group_id = group_id
        self.inputs = list(inputs)
        self.handler = handler
        self.store = store
        self.batch_size = batch_size
        self.poll_timeout_s = poll_timeout_s
        self.commit_interval_s = commit_interval_s
        self.producer = bus.producer()
        self.consumer = bus.consumer(group_id)
        self.positions: dict[TopicPartition, int] = {}
        self.stats = LoopStats()
        self._last_commit = time.monotonic()
        self._last_record = time.monotonic()
        self._dirty = False

    def start(self) -> None:
        offsets: dict[TopicPartition, int] = {}
        if self.store is not None:
            loaded = self.store.load()
            if loaded is not None:
                state, covers = loaded
                self.handler.restore(state)
                offsets = {tp: covers[tp] for tp in self.inputs if tp in covers}
                self.stats.restored_from = {f"{tp.topic}[{tp.partition}]": o
                                            for tp, o in offsets.items()}
                log.info("%s restored; resuming at %s", self.group_id, self.stats.restored_from)
        if len(offsets) < len(self.inputs):
            committed = self._committed()
            for tp in self.inputs:
                if tp not in offsets:
                    offsets[tp] = committed.get(tp) or 0
        self.positions = dict(offsets)
        self.consumer.assign(self.inputs, offsets)

    def _committed(self, timeout_s: float = 60.0) -> dict[TopicPartition, int | None]:
        """Committed offsets; a group coordinator still loading is waited out."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.consumer.committed(self.inputs)
            except BusError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def run_once(self) -> int:
        records = self.consumer.poll(self.batch_size, self.poll_timeout_s)
        now = time.monotonic()
        if records:
            self._last_record = now
            outputs = self.handler.handle(records)
            for r in records:
                self.positions[TopicPartition(r.topic, r.partition)] = r.offset + 1
            self.stats.records_in += len(records)
            self.stats.batches += 1
            self._dirty = True
        else:
            outputs = self.handler.idle(now - self._last_record)
            if outputs:
                self._dirty = True
        if outputs:
            self.producer.produce(outputs)
            self.stats.records_out += len(outputs)
        if self._dirty and now - self._last_commit >= self.commit_interval_s:
            self.commit()
        return len(records) + len(outputs)  # anything moved

    def commit(self) -> None:
        """Fixed order: outputs are queued already -> changelog -> flush -> offsets."""
        if self.store is not None:
            self.store.write(self.producer, self.handler.snapshot(), self.positions,
                             self.handler.event_time())
        self.producer.flush()
        self.consumer.commit(dict(self.positions))
        self._last_commit = time.monotonic()
        self._dirty = False
        self.stats.commits += 1

    def run(self, should_stop, max_idle_s: float | None = None) -> None:
        self.start()
        idle_since = time.monotonic()
        while not should_stop():
            if self.run_once():
                idle_since = time.monotonic()
            elif max_idle_s is not None and time.monotonic() - idle_since > max_idle_s:
                break
        if self._dirty:
            self.commit()

    def close(self) -> None:
        try:
            self.producer.flush()
        finally:
            self.consumer.close()
            self.producer.close()


@dataclass
class ServiceConfig:
    """What a service runner needs besides its processors."""

    plan: Any  # ExecutionPlan
    topics: Any  # shared.settings.TopicSettings
    codec: Any  # shared.codecs.Codec
    partitions: tuple[int, ...]  # Kafka partitions (of the internal topics) this actor owns
    actor_id: str
    allowance: int = 0
    idle_flush_s: float | None = None  # scheduler: release everything after this much quiet
    engine_factory: Any = None

    @property
    def routed_topic(self) -> str:
        return self.topics.transactions + ".routed"

    def input_topics(self) -> list[str]:
        return list(dict.fromkeys(t.topic or self.topics.input_topic(t.name)
                                  for t in self.plan.event_types if t.topic is not None))


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
