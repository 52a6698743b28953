"""Bulk Avro single-object encoding for flat integer records, with numpy.

A record whose fields are all `int`, `long` or `boolean` (no unions, no
nesting) is a run of varints after its 10-byte header: every byte below 0x80
ends one. So a whole batch of such records decodes at once: join the
values, drop the headers, mark the varint ends, add the 7-bit groups of each
varint with one `np.add.reduceat` and undo the zigzag. Encoding is the same
backwards. ~50x faster than fastavro one record at a time, which matters for
input topics at the Linear Road load (12,000 records/s at L = 4).

Anything that does not fit (another header, a varint too long for its
type, a wrong number of fields, a boolean other than 0/1) makes `decode`
return None: the caller then decodes record by record, which names the bad
records (they go to the dead letters).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from caesar.codecs.schemas import SchemaEntry
from caesar.codecs.single_object import HEADER_LEN, MAGIC

_MAX_BYTES = {"int": 5, "long": 10, "boolean": 1}
_U7 = np.uint64(0x7F)


def flat_fields(entry: SchemaEntry) -> list[tuple[str, str]] | None:
    """(name, Avro type) of every field, if the schema is a flat integer record."""
    raw = entry.raw
    if not isinstance(raw, dict) or raw.get("type") != "record":
        return None
    out = []
    for f in raw.get("fields", []):
        t = f.get("type")
        if isinstance(t, dict) and t.get("logicalType") is None:
            t = t.get("type")
        if not isinstance(t, str) or t not in _MAX_BYTES:
            return None
        out.append((f["name"], t))
    return out or None


class FlatCodec:
    """Bulk decode/encode of single-object records of one flat integer schema."""

    def __init__(self, entry: SchemaEntry) -> None:
        fields = flat_fields(entry)
        if fields is None:
            raise ValueError(f"{entry.name} is not a flat record of int/long/boolean fields")
        self.entry = entry
        self.names = [n for n, _ in fields]
        self.types = [t for _, t in fields]
        self.header = np.frombuffer(MAGIC + entry.fingerprint_bytes, dtype=np.uint8)
        self.max_bytes = np.array([_MAX_BYTES[t] for t in self.types], dtype=np.int64)

    # ------------------------------------------------------------ decode
    def decode(self, values: Sequence[bytes]) -> dict[str, np.ndarray] | None:
        """Columns (int64; booleans 0/1) of the records, or None if any of them
        is not a well-formed record of this schema."""
        n, f = len(values), len(self.names)
        if n == 0:
            return {name: np.empty(0, dtype=np.int64) for name in self.names}
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=n)
        if int(lengths.min()) < HEADER_LEN + f:
            return None
        buf = np.frombuffer(b"".join(values), dtype=np.uint8)
        starts = np.cumsum(lengths) - lengths
        heads = buf[starts[:, None] + np.arange(HEADER_LEN)]
        if not (heads == self.header).all():
            return None
        body_mask = np.ones(len(buf), dtype=bool)
        body_mask[(starts[:, None] + np.arange(HEADER_LEN)).ravel()] = False
        body = buf[body_mask]
        ends = body < 0x80
        body_len = lengths - HEADER_LEN
        body_start = np.cumsum(body_len) - body_len
        if not (np.add.reduceat(ends.astype(np.int64), body_start) == f).all():
            return None
        if not ends[-1]:
            return None
        end_pos = np.flatnonzero(ends)
        var_start = np.empty(len(end_pos), dtype=np.int64)
        var_start[0] = 0
        var_start[1:] = end_pos[:-1] + 1
        var_len = end_pos - var_start + 1
        if (var_len.reshape(n, f) > self.max_bytes).any():
            return None
        which = np.repeat(np.arange(len(end_pos)), var_len)
        shift = ((np.arange(len(body)) - var_start[which]) * 7).astype(np.uint64)
        groups = (body.astype(np.uint64) & _U7) << shift
        raw = np.add.reduceat(groups, var_start)
        zig = (raw >> np.uint64(1)).view(np.int64) ^ -(raw & np.uint64(1)).view(np.int64)
        table = zig.reshape(n, f)
        out = {}
        for i, (name, t) in enumerate(zip(self.names, self.types, strict=True)):
            col = raw.reshape(n, f)[:, i].view(np.int64) if t == "boolean" else table[:, i]
            if t == "boolean" and ((col < 0) | (col > 1)).any():
                return None
            if t == "int" and ((col < -(2**31)) | (col >= 2**31)).any():
                return None
            out[name] = np.ascontiguousarray(col)
        return out

    # ------------------------------------------------------------ encode
    def encode(self, columns: Mapping[str, Any]) -> list[bytes]:
        """Single-object records of the rows of `columns` (one array per field)."""
        cols = [np.asarray(columns[name], dtype=np.int64) for name in self.names]
        n = len(cols[0]) if cols else 0
        if n == 0:
            return []
        # zigzag for int/long; a boolean is its one byte, 0 or 1
        zig = [(c != 0).astype(np.uint64) if t == "boolean" else ((c << 1) ^ (c >> 63)).view(np.uint64)
               for c, t in zip(cols, self.types, strict=True)]
        nbytes = [_varint_len(z) for z in zig]
        rec_len = HEADER_LEN + np.sum(nbytes, axis=0)
        starts = np.cumsum(rec_len) - rec_len
        buf = np.empty(int(rec_len.sum()), dtype=np.uint8)
        buf[starts[:, None] + np.arange(HEADER_LEN)] = self.header
        pos = starts + HEADER_LEN
        for z, nb in zip(zig, nbytes, strict=True):
            for k in range(int(nb.max())):
                has = nb > k
                byte = ((z >> np.uint64(7 * k)) & _U7).astype(np.uint8)
                byte |= np.where(nb > k + 1, 0x80, 0).astype(np.uint8)
                buf[(pos + k)[has]] = byte[has]
            pos = pos + nb
        data = buf.tobytes()
        bounds = np.append(starts, len(buf)).tolist()
        return [data[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _varint_len(z: np.ndarray) -> np.ndarray:
    """Bytes of each unsigned varint (1..10)."""
    out = np.ones(len(z), dtype=np.int64)
    for k in range(1, 10):
        out += z >= np.uint64(1 << (7 * k))
    return out
