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
               partition_by: str | None = None, with_ts: bool = False) -> list[EventBatch]:
    """The stream as CAESAR's columnar batches: one stream partition, or with
    `partition_by` one per value of that attribute (the id the scheduler
    would intern it to); `with_ts`: the timestamp as an attribute `ts` too
    (a model's events declare it; the TPStream query aggregates it)."""
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
                         for i, a in enumerate(ATTRS)} | ({"ts": stream.ts[sel]} if with_ts
                                                         else {}))
        out.append(EventBatch(by_type=by_type, strings=pool))
    return out


def max_ts(batch: EventBatch) -> int:
    return int(max(int(c.ts.max()) for c in batch.by_type.values()))


def situation_stream(n: int, keys: int = 100, run_max: int = 15, seed: int = 11) -> Stream:
    """The TPStream workload's stream: type E1, per key (attr1) two on/off
    states A (attr2 > 50 when on) and B (attr3 > 50), each holding for runs
    of 1..run_max of the key's events. Events go round-robin over the keys,
    in a fresh random order per round, so a key's next event comes within
    2 rounds and a situation lasts under run_max rounds. Both states are off
    in the first round and a last round switches them off: every situation
    starts after the first event of its key and ends before the stream does
    (a 2-phase matcher, which reports at the end of the last situation, can
    then see every match). One event per time unit, ts = seq."""
    if n < 2 * keys:
        raise ValueError(f"a situation stream of {keys} keys needs at least {2 * keys} events")
    rng = np.random.default_rng(seed)
    on = np.zeros((keys, 2), dtype=bool)
    left = rng.integers(1, run_max + 1, (keys, 2))  # events to go in the current run
    key = np.empty(n, dtype=np.int64)
    state = np.zeros((n, 2), dtype=bool)
    i, first = 0, True
    while i < n - keys:
        for k in rng.permutation(keys).tolist():
            if i == n - keys:
                break
            if not first:
                for j in (0, 1):
                    if left[k, j] == 0:
                        on[k, j] = not on[k, j]
                        left[k, j] = rng.integers(1, run_max + 1)
                    left[k, j] -= 1
            key[i], state[i] = k, on[k]
            i += 1
        first = False
    key[n - keys:] = rng.permutation(keys)  # the closing round: state stays off
    high, low = rng.integers(51, 100, (n, 2)), rng.integers(0, 51, (n, 2))
    values = np.where(state, high, low)
    ts = np.arange(n, dtype=np.int64)
    zeros = np.zeros(n, dtype=np.int64)
    attrs = np.stack([key, values[:, 0], values[:, 1], zeros, zeros], axis=1).astype(np.int64)
    return Stream(seq=ts.copy(), ts=ts, type=np.ones(n, dtype=np.int64), attrs=attrs)
