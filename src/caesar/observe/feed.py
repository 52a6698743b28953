"""Reads the deriver's context changes from their topic into a timeline."""

from __future__ import annotations

import logging
import threading
import uuid

from caesar.bus.protocol import Bus
from caesar.bus.records import TopicPartition
from caesar.codecs import Codec
from caesar.observe.timeline import ContextTimeline
from caesar.services.common.messages import END_OF_TIME
from caesar.services.common.wire import CHANGE, PROGRESS, change_from, progress_from

log = logging.getLogger(__name__)


class ContextFeed:
    """A thread consuming the context-change topic from its start (compacted:
    the newest change per stream partition survives) into `timeline`."""

    def __init__(self, bus: Bus, codec: Codec, topic: str, timeline: ContextTimeline,
                 *, poll_s: float = 0.5) -> None:
        self.bus, self.codec, self.topic, self.timeline = bus, codec, topic, timeline
        self.poll_s = poll_s
        self.bad_records = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="caesar-context-feed",
                                        daemon=True)

    def start(self) -> ContextFeed:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        partitions = self.bus.list_topics().get(self.topic, 0)
        consumer = self.bus.consumer(f"caesar-observer-{uuid.uuid4().hex[:8]}")
        tps = [TopicPartition(self.topic, j) for j in range(partitions)]
        consumer.assign(tps, dict.fromkeys(tps, 0))
        try:
            while not self._stop.is_set():
                for record in consumer.poll(1000, self.poll_s):
                    if record.value is None:  # a tombstone
                        continue
                    try:
                        # The topic also carries the deriver's progress records.
                        schema, value = self.codec.decode(record.value)
                        if schema == PROGRESS:
                            self._progress(progress_from(value).watermark)
                            continue
                        if schema != CHANGE:
                            continue
                        change, _ = change_from(value)
                    except Exception:  # not ours to fix: count it, keep the view going
                        self.bad_records += 1
                        log.warning("undecodable context change at %s[%d]@%d", record.topic,
                                    record.partition, record.offset, exc_info=True)
                        continue
                    self.timeline.apply(change.key, change.ts, change.contexts)
        finally:
            consumer.close()

    def _progress(self, watermark: int) -> None:
        if watermark < END_OF_TIME:  # END_OF_TIME: a bounded input ended, not a time
            self.timeline.advance(watermark - 1)
