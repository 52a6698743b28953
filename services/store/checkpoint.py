"""Keyed state of a service actor in a compacted changelog topic, plus a
checkpoint record naming the input offsets that state covers.

State is the actor's processors' snapshot (pickled, behind a version header),
keyed by the actor id. Recovery reads the changelog to its end, takes the
newest record of the actor, restores it and resumes the inputs at the offsets
it covers: work after those offsets is redone (at-least-once; downstream
services drop replayed transactions by their per-partition sequence number).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Mapping
from typing import Any

from shared.bus.protocol import Bus, BusProducer
from shared.bus.records import OutRecord, TopicPartition
from shared.codecs import Codec
from shared.errors import CaesarError

STATE_FORMAT = 1
CHANGELOG = "caesar.ChangelogRecord"
CHECKPOINT = "caesar.Checkpoint"


class StoreError(CaesarError):
    """A state store cannot be written or restored."""


class CheckpointStore:
    def __init__(self, bus: Bus, codec: Codec, *, changelog_topic: str, checkpoints_topic: str,
                 service: str, actor: str, restore_timeout_s: float = 60.0) -> None:
        self.bus, self.codec = bus, codec
        self.changelog_topic, self.checkpoints_topic = changelog_topic, checkpoints_topic
        self.service, self.actor = service, actor
        self.key = actor.encode()
        self.restore_timeout_s = restore_timeout_s
        self.epoch = 0

    def write(self, producer: BusProducer, state: Any, covers: Mapping[TopicPartition, int],
              ts: int) -> None:
        """Queue the changelog record and the checkpoint; the caller flushes the
        producer before committing input offsets (see ServiceLoop.commit)."""
        self.epoch += 1
        blob = pickle.dumps((STATE_FORMAT, self.epoch, state), protocol=pickle.HIGHEST_PROTOCOL)
        offsets = [{"topic": tp.topic, "partition": tp.partition, "offset": off}
                   for tp, off in sorted(covers.items())]
        wall = int(time.time() * 1000)
        changelog = self.codec.encode(CHANGELOG, {
            "version": 1, "store": self.service, "state_format": STATE_FORMAT, "key": self.key,
            "state": blob, "covers": offsets, "ts": ts, "wall_ms": wall})
        checkpoint = self.codec.encode(CHECKPOINT, {
            "version": 1, "service": self.service, "actor": self.actor, "epoch": self.epoch,
            "inputs": offsets, "changelogs": [], "state_format": STATE_FORMAT, "wall_ms": wall})
        producer.produce([OutRecord(self.changelog_topic, changelog, self.key, partition=0),
                          OutRecord(self.checkpoints_topic, checkpoint, self.key, partition=0)])

    def load(self) -> tuple[Any, dict[TopicPartition, int]] | None:
        """The newest state of this actor and the input offsets it covers, or None."""
        tp = TopicPartition(self.changelog_topic, 0)
        end = self.bus.end_offsets([tp]).get(tp, 0)
        if end == 0:
            return None
        consumer = self.bus.consumer(f"caesar-restore-{self.actor}")
        try:
            consumer.assign([tp], {tp: 0})
            latest = None
            position = 0
            deadline = time.monotonic() + self.restore_timeout_s
            while position < end:
                if time.monotonic() > deadline:  # never loop without progress
                    raise StoreError(f"{self.actor}: restoring {self.changelog_topic} stalled at "
                                     f"offset {position} of {end}")
                for rec in consumer.poll(1000, 1.0):
                    position = rec.offset + 1
                    if rec.key == self.key and rec.value is not None:
                        latest = rec.value
        finally:
            consumer.close()
        if latest is None:
            return None
        record = self.codec.decode_as(CHANGELOG, latest)
        if record["state"] is None:
            return None
        fmt, epoch, state = pickle.loads(record["state"])
        if fmt != STATE_FORMAT:
            raise StoreError(f"{self.actor}: state format {fmt} cannot be read by format "
                             f"{STATE_FORMAT}; reset the changelog {self.changelog_topic}")
        self.epoch = epoch
        covers = {TopicPartition(o["topic"], o["partition"]): o["offset"] for o in record["covers"]}
        return state, covers
