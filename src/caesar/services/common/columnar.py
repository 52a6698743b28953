"""Columnar batches <-> the Avro records of the internal topics
(schemas/transaction_batch.avsc, routed_batch.avsc): one Kafka record per
batch of transactions, numpy columns packed into `bytes` fields.

Integers travel as offsets from a base in the narrowest of 1, 2, 4 or 8
bytes; strings as indexes into a per-column dictionary (string codes are
only meaningful inside one process, caesar.events.batch.StringPool);
partition ids as indexes into the batch's keys. A Linear Road report costs
~25 bytes this way instead of ~120 as one Avro record per event.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from caesar.errors import CaesarError
from caesar.events.batch import NUMPY_DTYPES, EventBatch, StringPool, TypeColumns, group_rows
from caesar.services.common.messages import Discard, RoutedBatch, TxnBatch

BATCH_VERSION = 2
_WIDTHS = ((1, np.uint8), (2, np.uint16), (4, np.uint32), (8, np.uint64))
_KINDS = {np.dtype(np.int64): "INT", np.dtype(np.float64): "FLOAT", np.dtype(np.int8): "BOOL",
          np.dtype(np.int32): "STRING"}
# Rows per Kafka record: a record stays well below the broker's default 1 MB limit.
MAX_ROWS = 20_000


class BatchFormatError(CaesarError):
    """A batch record this version cannot read."""


# ------------------------------------------------------------ integers
def pack_ints(values: np.ndarray) -> dict[str, Any]:
    values = np.asarray(values, dtype=np.int64)
    if not len(values):
        return {"base": 0, "width": 1, "data": b""}
    base = int(values.min())
    span = int(values.max()) - base
    for width, dtype in _WIDTHS:
        if span < 1 << (8 * width):
            offsets = (values - base).astype(dtype) if width < 8 else \
                values.view(np.uint64) - np.uint64(base & 0xFFFFFFFFFFFFFFFF)
            return {"base": base, "width": width, "data": offsets.astype(dtype).tobytes()}
    raise AssertionError("unreachable")


def unpack_ints(col: Mapping[str, Any]) -> np.ndarray:
    width = col["width"]
    dtype = dict(_WIDTHS).get(width)
    if dtype is None:
        raise BatchFormatError(f"integer column of width {width} (1, 2, 4 or 8 expected)")
    raw = np.frombuffer(col["data"], dtype=np.dtype(dtype).newbyteorder("<"))
    if width == 8:
        return (raw.astype(np.uint64) + np.uint64(col["base"] & 0xFFFFFFFFFFFFFFFF)).view(np.int64)
    return raw.astype(np.int64) + col["base"]


# ------------------------------------------------------------ transactions
def batch_record(batch: TxnBatch, seq: int) -> dict[str, Any]:
    pids = batch.partitions()
    pool = batch.events.strings
    types = []
    for name, cols in batch.events.by_type.items():
        columns = []
        for attr, arr in cols.columns.items():
            kind = _KINDS.get(arr.dtype)
            if kind is None:
                raise BatchFormatError(f"{name}.{attr}: no wire form for dtype {arr.dtype}")
            col: dict[str, Any] = {"name": attr, "kind": kind, "ints": None, "floats": None,
                                   "nulls": None, "dictionary": []}
            if kind == "FLOAT":
                col["floats"] = arr.astype("<f8").tobytes()
            elif kind == "STRING":
                used, index = np.unique(arr, return_inverse=True)
                col["dictionary"] = ["" if c < 0 else pool.string(c) for c in used.tolist()]
                col["ints"] = pack_ints(index.reshape(-1))
            else:
                col["ints"] = pack_ints(arr)
            mask = cols.nulls.get(attr)
            if mask is not None and mask.any():
                col["nulls"] = mask.astype(np.uint8).tobytes()
            columns.append(col)
        types.append({
            "type": name, "rows": len(cols), "ts": pack_ints(cols.ts),
            "seq": pack_ints(cols.seq), "partition": pack_ints(np.searchsorted(pids, cols.partition)),
            "ingest_ms": None if cols.ingest is None else pack_ints(cols.ingest),
            "columns": columns})
    return {"version": BATCH_VERSION, "seq": seq,
            "keys": [{"partition": p, "key": batch.keys.get(p, "")} for p in pids.tolist()],
            "types": types}


def batch_from(rec: Mapping[str, Any], strings: StringPool) -> tuple[TxnBatch, int]:
    """(the batch with its strings coded in `strings`, its seq)."""
    if rec["version"] != BATCH_VERSION:
        raise BatchFormatError(f"transaction batch version {rec['version']}: this CAESAR reads "
                               f"version {BATCH_VERSION} (redeploy every service together)")
    pids = np.array([k["partition"] for k in rec["keys"]], dtype=np.int64)
    keys = {k["partition"]: k["key"] for k in rec["keys"]}
    by_type = {}
    for t in rec["types"]:
        n = t["rows"]
        columns: dict[str, np.ndarray] = {}
        nulls: dict[str, np.ndarray] = {}
        for col in t["columns"]:
            kind = col["kind"]
            if kind == "FLOAT":
                arr = np.frombuffer(col["floats"], dtype="<f8").astype(np.float64)
            elif kind == "STRING":
                codes = strings.codes(col["dictionary"])
                arr = codes[unpack_ints(col["ints"])] if n else codes[:0]
            else:
                arr = unpack_ints(col["ints"]).astype(NUMPY_DTYPES[kind.lower()])
            if col["nulls"] is not None:
                mask = np.frombuffer(col["nulls"], dtype=np.uint8).astype(bool)
                nulls[col["name"]] = mask
                if kind == "STRING":
                    arr[mask] = -1
            if len(arr) != n:
                raise BatchFormatError(f"{t['type']}.{col['name']}: {len(arr)} values for {n} rows")
            columns[col["name"]] = arr
        by_type[t["type"]] = TypeColumns(
            ts=unpack_ints(t["ts"]), seq=unpack_ints(t["seq"]),
            partition=pids[unpack_ints(t["partition"])], columns=columns, nulls=nulls,
            ingest=None if t["ingest_ms"] is None else unpack_ints(t["ingest_ms"]))
    return TxnBatch(EventBatch(by_type, strings), keys), rec["seq"]


def routed_record(batch: RoutedBatch, seq: int) -> dict[str, Any]:
    rec = batch_record(batch.txns, seq)
    pids = np.array(sorted({p["partition"] for p in rec["keys"]} |
                           set(batch.txn_partition.tolist())), dtype=np.int64)
    if len(pids) != len(rec["keys"]):  # transactions without events: name them too
        rec["keys"] = [{"partition": p, "key": batch.txns.keys.get(p, "")} for p in pids.tolist()]
        for t in rec["types"]:
            idx = np.searchsorted(pids, batch.txns.events.by_type[t["type"]].partition)
            t["partition"] = pack_ints(idx)
    return {"version": BATCH_VERSION, "batch": rec,
            "txn_partition": pack_ints(np.searchsorted(pids, batch.txn_partition)),
            "txn_ts": pack_ints(batch.txn_ts), "txn_active": pack_ints(batch.txn_active),
            "txn_muted": pack_ints(batch.txn_muted),
            "active_sets": [list(a) for a in batch.active_sets],
            "muted_sets": [list(m) for m in batch.muted_sets],
            "discards": [{"partition": d.partition, "partition_key": batch.txns.keys.get(
                d.partition, ""), "ts": d.ts, "plans": list(d.plan_ids)} for d in batch.discards]}


def routed_from(rec: Mapping[str, Any], strings: StringPool) -> tuple[RoutedBatch, int]:
    """(the routed batch, its seq)."""
    if rec["version"] != BATCH_VERSION:
        raise BatchFormatError(f"routed batch version {rec['version']}: this CAESAR reads "
                               f"version {BATCH_VERSION} (redeploy every service together)")
    txns, _ = batch_from(rec["batch"], strings)
    pids = np.array([k["partition"] for k in rec["batch"]["keys"]], dtype=np.int64)
    for d in rec["discards"]:
        txns.keys.setdefault(d["partition"], d["partition_key"])
    return RoutedBatch(
        txns, pids[unpack_ints(rec["txn_partition"])] if len(pids) else
        np.empty(0, dtype=np.int64), unpack_ints(rec["txn_ts"]),
        unpack_ints(rec["txn_active"]).astype(np.int32),
        unpack_ints(rec["txn_muted"]).astype(np.int32),
        [tuple(a) for a in rec["active_sets"]], [tuple(m) for m in rec["muted_sets"]],
        [Discard(d["partition"], d["ts"], tuple(d["plans"])) for d in rec["discards"]]), \
        rec["batch"]["seq"]


def transactions_in(rec: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(partition key, ts) of every transaction a TransactionBatch record
    carries, or every routed one of a RoutedBatch record (tools: hops.py)."""
    if "txn_ts" in rec:
        keys = [k["key"] for k in rec["batch"]["keys"]]
        idx = unpack_ints(rec["txn_partition"]).tolist()
        return [(keys[i], t) for i, t in zip(idx, unpack_ints(rec["txn_ts"]).tolist(),
                                             strict=True)]
    keys = [k["key"] for k in rec["keys"]]
    found: set[tuple[str, int]] = set()
    for t in rec["types"]:
        found.update((keys[i], ts) for i, ts in zip(unpack_ints(t["partition"]).tolist(),
                                                     unpack_ints(t["ts"]).tolist(), strict=True))
    return sorted(found, key=lambda kt: (kt[1], kt[0]))


# ------------------------------------------------------------ splitting
def chunks(batch: TxnBatch, max_rows: int = MAX_ROWS) -> Iterator[TxnBatch]:
    """The batch in pieces of at most ~max_rows events, cut between
    transactions (a transaction bigger than that is one piece)."""
    if len(batch) <= max_rows:
        yield batch
        return
    types = list(batch.events.by_type)
    cols = [batch.events.by_type[t] for t in types]
    ts = np.concatenate([c.ts for c in cols])
    part = np.concatenate([c.partition for c in cols])
    pairs, txn_of = group_rows([ts, part])
    sizes = np.bincount(txn_of, minlength=len(pairs))
    ends = np.cumsum(sizes)
    start_txn = 0
    offsets = np.cumsum([0] + [len(c) for c in cols])
    while start_txn < len(pairs):
        base = ends[start_txn - 1] if start_txn else 0
        stop = int(np.searchsorted(ends, base + max_rows, "right"))
        stop = max(stop, start_txn + 1)
        sel = (txn_of >= start_txn) & (txn_of < stop)
        rows = {t: np.nonzero(sel[offsets[i]:offsets[i + 1]])[0] for i, t in enumerate(types)}
        yield TxnBatch(batch.events.take(rows), batch.keys)
        start_txn = stop


def routed_chunks(batch: RoutedBatch, max_rows: int = MAX_ROWS) -> Iterator[RoutedBatch]:
    """A routed batch in pieces cut between transactions; the discard orders
    travel with the first piece (the matcher applies them in ts order, so
    still before the transactions they precede)."""
    if len(batch.txns) <= max_rows:
        yield batch
        return
    discards = batch.discards
    pairs = np.stack([batch.txn_ts, batch.txn_partition], axis=1)
    for piece in chunks(batch.txns, max_rows):
        mine = {(int(t), int(p)) for t, p in piece.pairs()}
        sel = np.array([(int(t), int(p)) in mine for t, p in pairs.tolist()], dtype=bool)
        yield RoutedBatch(piece, batch.txn_partition[sel], batch.txn_ts[sel],
                          batch.txn_active[sel], batch.txn_muted[sel], batch.active_sets,
                          batch.muted_sets, discards)
        discards = []
