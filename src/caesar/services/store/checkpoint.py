"""A service's state in its changelog topic, one changelog partition per Kafka
partition j of the service's inputs, so whichever actor owns j after a
regrouping restores exactly j's state.

A checkpoint of partition j is written inside the runner's Kafka transaction
(ServiceLoop.commit), together with the outputs and the input offsets it
covers, so it becomes visible exactly when they do:

    "j/0" ... "j/n-1"   chunks of the state (msgpack, state_format.py,
                        compressed with LZ4), each below the broker's
                        message limit
    "j"                 the header: format, chunk count, size, CRC, the input
                        offsets the state covers, and the group of partitions
                        whose shared state it holds (ServiceLoop's
                        one_transaction; none for per-partition state)
    tombstones          for chunk keys of a bigger earlier checkpoint

Keys repeat from checkpoint to checkpoint, so the compacted topic keeps one
checkpoint per partition. Restoring reads only the tail of partition j (the
newest header is the last record of its transaction, its chunks right before
it), not the whole log: restart time does not grow with uptime. A small
Checkpoint record per partition goes to the checkpoints topic for operators.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import lz4.frame

from caesar.bus.errors import BusError
from caesar.bus.protocol import Bus, BusProducer
from caesar.bus.reading import read_to_end
from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.codecs import Codec
from caesar.errors import CaesarError
from caesar.services.store.state_format import (
    PICKLE_FORMAT,
    STATE_FORMAT,
    StateFormatError,
    pack,
    unpack,
)

CHUNK_BYTES = 512 * 1024  # below Kafka's default 1 MB message limit
# LZ4 (fastest level) since checkpoints of LR's peak state became frequent:
# 0.05 CPU-s instead of zlib level 1's 0.24 for the matcher's 74 MB, at 13.6
# instead of 8 MB on the broker; zlib checkpoints are still read.
_DECOMPRESS = {"lz4": lz4.frame.decompress, "zlib": zlib.decompress}
CHANGELOG = "caesar.ChangelogRecord"
CHECKPOINT = "caesar.Checkpoint"
log = logging.getLogger(__name__)


class StoreError(CaesarError):
    """A state store cannot be written or restored."""


class StateStore:
    """The changelog of one service (all its Kafka partitions)."""

    def __init__(self, bus: Bus, codec: Codec, *, changelog_topic: str, checkpoints_topic: str,
                 service: str, restore_timeout_s: float = 60.0, first_window: int = 4) -> None:
        self.bus, self.codec = bus, codec
        self.changelog_topic, self.checkpoints_topic = changelog_topic, checkpoints_topic
        self.service = service
        self.restore_timeout_s = restore_timeout_s
        self.first_window = first_window  # offsets read first from the end (load)
        self._chunks: dict[int, int] = {}  # partition -> chunks of its last checkpoint
        self.epoch: dict[int, int] = {}
        # partition -> the group named by its checkpoint last loaded (None: none named)
        self.groups: dict[int, tuple[int, ...] | None] = {}
        self.bytes_written = 0
        self.last_bytes = 0  # size of the newest state written (compressed), for metrics
        # What restoring read from the changelog since reset_read_counts (the
        # records and bytes of every window scanned): restart cost, for metrics.
        self.read_records = 0
        self.read_bytes = 0

    # ------------------------------------------------------------ write
    def write(self, producer: BusProducer, j: int, state: Any,
              covers: Mapping[TopicPartition, int], ts: int,
              group: Sequence[int] | None = None) -> int:
        """Queue partition j's checkpoint into the producer's open transaction;
        returns its size in bytes. `group`: the partitions whose shared state
        it is written with (all committed in that one transaction)."""
        blob = lz4.frame.compress(pack(state), compression_level=0)
        self.last_bytes = len(blob)
        chunks = [blob[i:i + CHUNK_BYTES] for i in range(0, len(blob), CHUNK_BYTES)] or [b""]
        offsets = [{"topic": tp.topic, "partition": tp.partition, "offset": off}
                   for tp, off in sorted(covers.items())]
        wall = int(time.time() * 1000)
        out = [OutRecord(self.changelog_topic,
                         self._record(f"{j}/{i}".encode(), chunk, [], ts, wall),
                         f"{j}/{i}".encode(), partition=j)
               for i, chunk in enumerate(chunks)]
        meta: dict[str, Any] = {"format": STATE_FORMAT, "service": self.service, "partition": j,
                                "chunks": len(chunks), "bytes": len(blob),
                                "crc": zlib.crc32(blob), "compression": "lz4"}
        if group is not None:
            meta["group"] = list(group)
        header = pack(meta)
        out.append(OutRecord(self.changelog_topic,
                             self._record(str(j).encode(), header, offsets, ts, wall),
                             str(j).encode(), partition=j))
        out += [OutRecord(self.changelog_topic, None, f"{j}/{i}".encode(), partition=j)
                for i in range(len(chunks), self._chunks.get(j, 0))]
        self._chunks[j] = len(chunks)
        self.epoch[j] = self.epoch.get(j, 0) + 1
        checkpoint = self.codec.encode(CHECKPOINT, {
            "version": 1, "service": self.service, "actor": f"{self.service}-p{j}",
            "epoch": self.epoch[j], "inputs": offsets, "changelogs": [],
            "state_format": STATE_FORMAT, "wall_ms": wall})
        out.append(OutRecord(self.checkpoints_topic, checkpoint,
                             f"{self.service}/{j}".encode()))
        producer.produce(out)
        self.bytes_written += len(blob)
        return len(blob)

    def _record(self, key: bytes, state: bytes, offsets: list, ts: int, wall: int) -> bytes:
        return self.codec.encode(CHANGELOG, {
            "version": 1, "store": self.service, "state_format": STATE_FORMAT, "key": key,
            "state": state, "covers": offsets, "ts": ts, "wall_ms": wall})

    # ------------------------------------------------------------ restore
    def reset_read_counts(self) -> None:
        self.read_records = self.read_bytes = 0

    def load(self, j: int) -> tuple[Any, dict[TopicPartition, int]] | None:
        """Partition j's newest committed state and the input offsets it covers,
        or None when it has none."""
        tp = TopicPartition(self.changelog_topic, j)
        end = self._end_offset(tp)
        # A checkpoint that fits one chunk is the last 3 offsets (chunk, header,
        # commit marker): start there and widen only for a bigger one, so a
        # restore reads about one checkpoint, not the last dozens of them
        # (a 64-offset window read ~20 checkpoints: 11 MB for a 1.2 MB state).
        window = self.first_window
        while True:
            start = max(0, end - window)
            found = self._scan(tp, j, start)
            if found is not None:
                return found
            if start == 0:
                return None
            window *= 4

    def _end_offset(self, tp: TopicPartition) -> int:
        """End offset, waiting out a partition whose leader is not elected yet."""
        deadline = time.monotonic() + self.restore_timeout_s
        while True:
            try:
                return self.bus.end_offsets([tp]).get(tp, 0)
            except BusError as exc:
                if time.monotonic() > deadline:
                    raise StoreError(f"{self.service}: cannot read {tp.topic}[{tp.partition}]: "
                                     f"{exc}") from exc
                time.sleep(0.5)

    def _scan(self, tp: TopicPartition, j: int, start: int
              ) -> tuple[Any, dict[TopicPartition, int]] | None:
        """The newest complete checkpoint found reading from `start`; None when
        the window holds no header or not all of its chunks."""
        header, chunks = self._read_window(tp, j, start)
        if header is None:
            return None
        record = self._decode(header.value)
        if record["state_format"] != STATE_FORMAT:
            raise StoreError(self._format_message(record["state_format"], tp))
        meta = unpack(record["state"])
        if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT:
            raise StoreError(f"{self.service}: the checkpoint header of {tp.topic}[{j}] is not "
                             f"state format {STATE_FORMAT}")
        parts = []
        for i in range(int(meta["chunks"])):
            chunk = chunks.get(f"{j}/{i}".encode())
            if chunk is None or chunk.offset > header.offset:
                return None  # not in this window: read from further back
            parts.append(self._decode(chunk.value)["state"] or b"")
        blob = b"".join(parts)
        if zlib.crc32(blob) != meta["crc"] or len(blob) != meta["bytes"]:
            raise StoreError(f"{self.service}: checkpoint of {tp.topic}[{j}] is corrupted "
                             f"(size or CRC mismatch)")
        compression = meta.get("compression", "zlib")  # (zlib: written before lz4)
        if compression not in _DECOMPRESS:
            raise StoreError(f"{self.service}: checkpoint of {tp.topic}[{j}] is compressed "
                             f"with {compression!r}; this CAESAR reads {sorted(_DECOMPRESS)}")
        try:
            state = unpack(_DECOMPRESS[compression](blob))
        except (zlib.error, RuntimeError) as exc:  # lz4 reports corrupt frames as RuntimeError
            raise StoreError(f"{self.service}: checkpoint of {tp.topic}[{j}] does not "
                             f"decompress: {exc}") from exc
        except StateFormatError as exc:
            raise StoreError(f"{self.service}: checkpoint of {tp.topic}[{j}]: {exc}") from exc
        self._chunks[j] = int(meta["chunks"])
        group = meta.get("group")
        self.groups[j] = tuple(int(p) for p in group) if isinstance(group, list) else None
        covers = {TopicPartition(o["topic"], o["partition"]): o["offset"]
                  for o in record["covers"]}
        return state, covers

    def _read_window(self, tp: TopicPartition, j: int, start: int
                     ) -> tuple[Record | None, dict[bytes, Record]]:
        """The last header of partition j from `start` on, and the chunks
        (tombstones applied) seen up to the end."""
        header: Record | None = None
        chunks: dict[bytes, Record] = {}
        head_key = str(j).encode()
        try:
            for batch in read_to_end(self.bus, [tp], {tp: start},
                                     timeout_s=self.restore_timeout_s):
                self.read_records += len(batch)
                self.read_bytes += sum(len(r.value or b"") + len(r.key or b"") for r in batch)
                for rec in batch:
                    if rec.key == head_key:
                        header = rec if rec.value is not None else None
                    elif rec.key is not None and rec.value is None:
                        chunks.pop(rec.key, None)
                    elif rec.key is not None:
                        chunks[rec.key] = rec
        except BusError as exc:
            raise StoreError(f"{self.service}: restoring {tp.topic}[{j}]: {exc}") from exc
        return header, chunks

    def _decode(self, value: bytes | None) -> dict[str, Any]:
        try:
            return self.codec.decode_as(CHANGELOG, value or b"")
        except Exception as exc:
            raise StoreError(f"{self.service}: a record of {self.changelog_topic} is not a "
                             f"changelog record: {exc}") from exc

    def _format_message(self, fmt: int, tp: TopicPartition) -> str:
        if fmt == PICKLE_FORMAT:
            why = ("it was written with pickle by an earlier CAESAR version; pickled bytes "
                   "from a topic are never loaded (they could run code)")
        else:
            why = f"this CAESAR reads state format {STATE_FORMAT} only"
        return (f"{self.service}: {tp.topic}[{tp.partition}] holds state format {fmt}: {why}. "
                f"Start from empty state: delete the topic {tp.topic} (and reset the "
                f"consumer groups' offsets) or deploy with fresh topic names")
