"""The one event stream every engine of the peer benchmark reads.

SASE workload (SIGMOD 2006, section 5): 20 types E0..E19 drawn uniformly,
five integer attributes attr1..attr5 uniform in [0, V_i), one event per time
unit (so windows count events, as in the paper). The stream is held as numpy
columns; CAESAR gets it as columnar batches, the JVM harnesses as one binary
file (see bench/peers/java/common/caesar/peers/Events.java).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from caesar.events.batch import EventBatch, StringPool, TypeColumns

NUM_TYPES = 20
ATTRS = ("attr1", "attr2", "attr3", "attr4", "attr5")
TYPE_NAMES = tuple(f"E{i}" for i in range(NUM_TYPES))
MAGIC = b"CSRPEER1"
DEFAULT_DOMAINS = (10_000, 1_000, 100, 100, 10)


@dataclass(frozen=True)
class Stream:
    seq: np.ndarray  # int64 arrival number (what matches are reported by)
    ts: np.ndarray  # int64 event time, non-decreasing
    type: np.ndarray  # int64 type number (E<type>)
    attrs: np.ndarray  # int64 (n, 5): attr1..attr5

    def __len__(self) -> int:
        return int(self.seq.shape[0])


def sase_stream(n: int, domains: tuple[int, ...] = DEFAULT_DOMAINS, seed: int = 7,
                num_types: int = NUM_TYPES) -> Stream:
    """n events, one per time unit, types uniform in E0..E{num_types-1}."""
    rng = np.random.default_rng(seed)
    types = rng.integers(0, num_types, n).astype(np.int64)
    attrs = np.stack([rng.integers(0, d, n) for d in domains], axis=1).astype(np.int64)
    ts = np.arange(n, dtype=np.int64)
    return Stream(seq=ts.copy(), ts=ts, type=types, attrs=attrs)


def write_events(stream: Stream, path: Path) -> Path:
    """The binary file the JVM harnesses load (little-endian int64 rows:
    seq, ts, type, attr1..attr5)."""
    rows = np.empty((len(stream), 8), dtype="<i8")
    rows[:, 0] = stream.seq
    rows[:, 1] = stream.ts
    rows[:, 2] = stream.type
    rows[:, 3:] = stream.attrs
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.write(MAGIC)
        fh.write(np.array([len(stream), 8], dtype="<i8").tobytes())
        fh.write(rows.tobytes())
    return path


def to_batches(stream: Stream, batch_size: int = 10_000, pool: StringPool | None = None,
               partition_by: str | None = None) -> list[EventBatch]:
    """The stream as CAESAR's columnar batches: one stream partition, or with
    `partition_by` one per value of that attribute (the id the scheduler
    would intern it to)."""
    pcol = ATTRS.index(partition_by) if partition_by else None
    pool = pool or StringPool()
    out = []
    for start in range(0, len(stream), batch_size):
        end = min(start + batch_size, len(stream))
        types = stream.type[start:end]
        by_type = {}
        for t in np.unique(types):
            sel = np.nonzero(types == t)[0] + start
            by_type[TYPE_NAMES[int(t)]] = TypeColumns(
                ts=stream.ts[sel], seq=stream.seq[sel],
                partition=(np.zeros(sel.size, dtype=np.int64) if pcol is None
                           else np.ascontiguousarray(stream.attrs[sel, pcol])),
                columns={a: np.ascontiguousarray(stream.attrs[sel, i])
                         for i, a in enumerate(ATTRS)})
        out.append(EventBatch(by_type=by_type, strings=pool))
    return out


def max_ts(batch: EventBatch) -> int:
    return int(max(int(c.ts.max()) for c in batch.by_type.values()))
