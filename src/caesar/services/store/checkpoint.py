"""Keyed state of a service actor in a compacted changelog topic, plus a
checkpoint record naming the input offsets that state covers.

State is the actor's processors' snapshot (pickled, zlib, split into chunks
below the broker's message limit), named by a header record keyed by the
actor id that carries the format version, epoch and covered offsets. Recovery reads the changelog to its end, takes the
newest record of the actor, restores it and resumes the inputs at the offsets
it covers: work after those offsets is redone (at-least-once; downstream
services drop replayed transactions by their per-partition sequence number).
"""

from __future__ import annotations

import pickle
import time
import zlib
from collections.abc import Mapping
from typing import Any

from caesar.bus.errors import BusError
from caesar.bus.protocol import Bus, BusProducer
from caesar.bus.records import OutRecord, TopicPartition
from caesar.codecs import Codec
from caesar.errors import CaesarError

STATE_FORMAT = 2
CHUNK_BYTES = 512 * 1024  # below Kafka's default 1 MB message limit
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
        self._previous_chunks: list[bytes] = []
        self.bytes_written = 0
        self.last_bytes = 0  # size of the newest state written (compressed), for metrics

    def write(self, producer: BusProducer, state: Any, covers: Mapping[TopicPartition, int],
              ts: int) -> None:
        """Queue the state (compressed, in chunks below Kafka's message limit),
        then the header naming them with the input offsets they cover, then
        tombstones for the previous epoch's chunks. The caller flushes the
        producer before committing input offsets (see ServiceLoop.commit);
        one partition keeps the order, so a delivered header implies its chunks."""
        self.epoch += 1
        blob = zlib.compress(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), 1)
        self.last_bytes = len(blob)
        chunks = [blob[i:i + CHUNK_BYTES] for i in range(0, len(blob), CHUNK_BYTES)] or [b""]
        offsets = [{"topic": tp.topic, "partition": tp.partition, "offset": off}
                   for tp, off in sorted(covers.items())]
        wall = int(time.time() * 1000)
        out: list[OutRecord] = []
        chunk_keys = []
        for i, chunk in enumerate(chunks):
            key = f"{self.actor}/{self.epoch}/{i}".encode()
            chunk_keys.append(key)
            out.append(OutRecord(self.changelog_topic, self._changelog(key, chunk, [], ts, wall),
                                 key, partition=0))
        header = pickle.dumps((STATE_FORMAT, self.epoch, len(chunks)))
        out.append(OutRecord(self.changelog_topic,
                             self._changelog(self.key, header, offsets, ts, wall), self.key,
                             partition=0))
        out += [OutRecord(self.changelog_topic, None, key, partition=0)
                for key in self._previous_chunks]
        self._previous_chunks = chunk_keys
        checkpoint = self.codec.encode(CHECKPOINT, {
            "version": 1, "service": self.service, "actor": self.actor, "epoch": self.epoch,
            "inputs": offsets, "changelogs": [], "state_format": STATE_FORMAT, "wall_ms": wall})
        out.append(OutRecord(self.checkpoints_topic, checkpoint, self.key, partition=0))
        producer.produce(out)
        self.bytes_written = len(blob)

    def _end_offset(self, tp: TopicPartition) -> int:
        """End offset, waiting out a topic whose leader is not elected yet."""
        deadline = time.monotonic() + self.restore_timeout_s
        while True:
            try:
                return self.bus.end_offsets([tp]).get(tp, 0)
            except BusError as exc:
                if time.monotonic() > deadline:
                    raise StoreError(f"{self.actor}: cannot read {tp.topic}: {exc}") from exc
                time.sleep(0.5)

    def _changelog(self, key: bytes, state: bytes, offsets: list, ts: int, wall: int) -> bytes:
        return self.codec.encode(CHANGELOG, {
            "version": 1, "store": self.service, "state_format": STATE_FORMAT, "key": key,
            "state": state, "covers": offsets, "ts": ts, "wall_ms": wall})

    def load(self) -> tuple[Any, dict[TopicPartition, int]] | None:
        """The newest state of this actor and the input offsets it covers, or None."""
        tp = TopicPartition(self.changelog_topic, 0)
        end = self._end_offset(tp)
        if end == 0:
            return None
        header, chunks = self._read_changelog(tp, end)
        if header is None:
            return None
        return self._assemble(header, chunks)

    def _read_changelog(self, tp: TopicPartition, end: int
                        ) -> tuple[bytes | None, dict[bytes, bytes]]:
        """This actor's newest header and its live state chunks, read up to `end`."""
        consumer = self.bus.consumer(f"caesar-restore-{self.actor}")
        header = None
        chunks: dict[bytes, bytes] = {}
        prefix = f"{self.actor}/".encode()
        try:
            consumer.assign([tp], {tp: 0})
            position = 0
            deadline = time.monotonic() + self.restore_timeout_s
            while position < end:
                if time.monotonic() > deadline:  # never loop without progress
                    raise StoreError(f"{self.actor}: restoring {self.changelog_topic} stalled at "
                                     f"offset {position} of {end}")
                for rec in consumer.poll(1000, 1.0):
                    position = rec.offset + 1
                    if rec.key == self.key and rec.value is not None:
                        header = rec.value
                    elif rec.key is not None and rec.key.startswith(prefix):
                        if rec.value is None:
                            chunks.pop(rec.key, None)
                        else:
                            chunks[rec.key] = rec.value
        finally:
            consumer.close()
        return header, chunks

    def _assemble(self, header: bytes, chunks: dict[bytes, bytes]
                  ) -> tuple[Any, dict[TopicPartition, int]]:
        """The state the header names, from its chunks, and the offsets it covers."""
        record = self.codec.decode_as(CHANGELOG, header)
        fmt, epoch, count = pickle.loads(record["state"])
        if fmt != STATE_FORMAT:
            raise StoreError(f"{self.actor}: state format {fmt} cannot be read by format "
                             f"{STATE_FORMAT}; reset the changelog {self.changelog_topic}")
        parts = []
        for i in range(count):
            raw = chunks.get(f"{self.actor}/{epoch}/{i}".encode())
            if raw is None:
                raise StoreError(f"{self.actor}: chunk {i} of checkpoint epoch {epoch} is missing "
                                 f"from {self.changelog_topic}")
            parts.append(self.codec.decode_as(CHANGELOG, raw)["state"])
        state = pickle.loads(zlib.decompress(b"".join(parts)))
        self.epoch = epoch
        self._previous_chunks = [f"{self.actor}/{epoch}/{i}".encode() for i in range(count)]
        covers = {TopicPartition(o["topic"], o["partition"]): o["offset"] for o in record["covers"]}
        return state, covers
