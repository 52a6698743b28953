"""Reading partitions to their end: what restoring state and reading a
topic back (tests, the CLI, benchmarks) need. The end is taken when the read
starts (the last stable offset: committed data only); offsets have gaps
(transaction markers, aborted records), so progress is the consumer's
position, never "the last offset seen + 1"."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping, Sequence

from caesar.bus.errors import BusError
from caesar.bus.protocol import Bus
from caesar.bus.records import Record, TopicPartition


def read_to_end(bus: Bus, partitions: Sequence[TopicPartition],
                start: Mapping[TopicPartition, int] | None = None, *,
                timeout_s: float = 60.0, batch: int = 5000) -> Iterator[list[Record]]:
    """Batches of the committed records of `partitions` from `start` (default 0)
    up to their end offsets as of the call. BusError if the end is not reached
    within `timeout_s` of the last progress (never loops without progress)."""
    tps = [TopicPartition(*tp) for tp in partitions]
    end = bus.end_offsets(tps)
    begin = {tp: (start or {}).get(tp, 0) for tp in tps}
    todo = [tp for tp in tps if begin[tp] < end[tp]]
    if not todo:
        return
    consumer = bus.consumer(f"caesar-reader-{uuid.uuid4().hex[:12]}")
    try:
        consumer.assign(todo, {tp: begin[tp] for tp in todo})
        deadline = time.monotonic() + timeout_s
        while todo:
            records = consumer.poll(batch, 0.2)
            if records:
                deadline = time.monotonic() + timeout_s
                past = [r for r in records if r.offset < end[r.topic_partition]]
                if past:
                    yield past
            positions = consumer.position(todo)
            left = [tp for tp in todo if (positions.get(tp) or 0) < end[tp]]
            if len(left) < len(todo):
                deadline = time.monotonic() + timeout_s
            todo = left
            if todo and time.monotonic() > deadline:
                where = ", ".join(f"{tp.topic}[{tp.partition}] at {positions.get(tp)} of "
                                  f"{end[tp]}" for tp in todo)
                raise BusError(f"reading to the end stalled: {where}")
    finally:
        consumer.close()


def read_all(bus: Bus, partitions: Sequence[TopicPartition],
             start: Mapping[TopicPartition, int] | None = None, *,
             timeout_s: float = 60.0) -> list[Record]:
    return [r for chunk in read_to_end(bus, partitions, start, timeout_s=timeout_s)
            for r in chunk]
