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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from caesar.bus.errors import BusError
from caesar.bus.protocol import Bus
from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.services.common.latency import LatencyHistogram
from caesar.services.store.checkpoint import CheckpointStore

log = logging.getLogger(__name__)


class Handler(Protocol):
    """State is kept per Kafka partition j of the service's inputs (a keyed
    store: key = service + j), so an actor owning other partitions after a
    regrouping restores exactly the state of the partitions it got."""

    def handle(self, records: Sequence[Record]) -> list[OutRecord]: ...

    def partition_inputs(self, j: int) -> list[TopicPartition]: ...

    def idle(self, idle_s: float) -> list[OutRecord]:
        """Called when a poll returned nothing; `idle_s` since the last record."""
        ...

    def snapshot_partition(self, j: int) -> Any: ...

    def restore_partition(self, j: int, state: Any) -> None: ...

    def event_time(self) -> int: ...


@dataclass
class LoopStats:
    records_in: int = 0
    records_out: int = 0
    batches: int = 0
    commits: int = 0
    restored_from: dict[str, int] = field(default_factory=dict)
    # How long the oldest record of each batch waited between the previous hop
    # producing it (its Kafka timestamp) and this loop handling it.
    hop_ms: LatencyHistogram = field(default_factory=LatencyHistogram)


class ServiceLoop:
    def __init__(self, *, bus: Bus, group_id: str, inputs: Sequence[TopicPartition],
                 handler: Handler, stores: Mapping[int, CheckpointStore] | None = None,
                 batch_size: int = 2000,
                 poll_timeout_s: float = 0.2, commit_interval_s: float = 1.0) -> None:
        self.bus = bus
        self.group_id = group_id
        self.inputs = list(inputs)
        self.handler = handler
        self.stores = dict(stores or {})
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
        for j, store in self.stores.items():
            loaded = store.load()
            if loaded is None:
                continue
            state, covers = loaded
            self.handler.restore_partition(j, state)
            for tp in self.handler.partition_inputs(j):
                if tp in covers:
                    offsets[tp] = covers[tp]
                    self.stats.restored_from[f"{tp.topic}[{tp.partition}]"] = covers[tp]
        if self.stats.restored_from:
            log.info("%s restored; resuming at %s", self.group_id, self.stats.restored_from)
        if len(offsets) < len(self.inputs):
            committed = self._committed()
            for tp in self.inputs:
                if tp not in offsets:
                    offsets[tp] = committed.get(tp) or 0
        self.positions = dict(offsets)
        self.consumer.assign(self.inputs, offsets)

    def lag(self) -> int:
        """Records in the inputs not handled yet (end offsets - positions)."""
        end = self.bus.end_offsets(self.inputs)
        return sum(max(0, end[tp] - self.positions.get(tp, 0)) for tp in self.inputs)

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
            self.stats.hop_ms.observe(time.time() * 1000 - min(r.timestamp_ms for r in records))
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
        ts = self.handler.event_time()
        for j, store in self.stores.items():
            covers = {tp: self.positions[tp] for tp in self.handler.partition_inputs(j)
                      if tp in self.positions}
            store.write(self.producer, self.handler.snapshot_partition(j), covers, ts)
        self.producer.flush()
        self.consumer.commit(dict(self.positions))
        self._last_commit = time.monotonic()
        self._dirty = False
        self.stats.commits += 1

    def run(self, should_stop: Callable[[], bool], max_idle_s: float | None = None) -> None:
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
