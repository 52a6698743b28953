"""Columnar event batches: the matcher's input format.

A batch holds, per event type, typed columns: numbers as numpy arrays, strings
interned to int32 codes through one `StringPool` shared by a whole pipeline
(so equality tests on strings are integer tests). `seq` is the arrival order
across all types, so engines can merge types back into one ordered stream
(needed by strict contiguity and by negation at equal timestamps).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from caesar.events import grouping

# Attribute type names used in schemas and plans.
NUMPY_DTYPES: dict[str, np.dtype] = {
    "int": np.dtype(np.int64),
    "float": np.dtype(np.float64),
    "bool": np.dtype(np.int8),
    "string": np.dtype(np.int32),  # interned codes
}


class StringPool:
    """Interns strings to dense int32 codes; code -1 means null.

    Codes mean something only inside one process: the services exchange text
    (caesar.services.common.columns), and every processor of one process
    shares `StringPool.shared()`, so a batch passes from one to the next
    without re-coding its strings."""

    _shared: StringPool | None = None

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}
        self._strings: list[str] = []

    @classmethod
    def shared(cls) -> StringPool:
        """The pool of this process (what the pipeline's processors use)."""
        if cls._shared is None:
            cls._shared = cls()
        return cls._shared

    def codes(self, values: Iterable[str | None]) -> np.ndarray:
        """int32 codes of `values` (None -> -1)."""
        code = self.code
        return np.fromiter((-1 if v is None else code(v) for v in values), dtype=np.int32)

    def decode(self, codes: np.ndarray) -> list[str | None]:
        strings = self._strings
        return [None if c < 0 else strings[c] for c in codes.tolist()]

    def code(self, value: str) -> int:
        found = self._codes.get(value)
        if found is None:
            found = len(self._strings)
            self._codes[value] = found
            self._strings.append(value)
        return found

    def string(self, code: int) -> str | None:
        return None if code < 0 else self._strings[code]

    def __len__(self) -> int:
        return len(self._strings)


@dataclass
class TypeColumns:
    """All events of one type in a batch, in arrival order."""

    ts: np.ndarray  # int64 event time
    seq: np.ndarray  # int64 arrival order, global across types
    partition: np.ndarray  # int64 interned partition key
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    # Null masks for columns that have missing values (True = missing).
    nulls: dict[str, np.ndarray] = field(default_factory=dict)

    # Kafka timestamp (ms) of the input record each event came from (0 =
    # unknown); carried for latency measurement, never read by the engines.
    ingest: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    def take(self, rows: np.ndarray | slice) -> TypeColumns:
        """The rows `rows` (an index array or a boolean mask), in that order."""
        return TypeColumns(
            ts=self.ts[rows], seq=self.seq[rows], partition=self.partition[rows],
            columns={k: v[rows] for k, v in self.columns.items()},
            nulls=_nonempty({k: v[rows] for k, v in self.nulls.items()}),
            ingest=None if self.ingest is None else self.ingest[rows])

    @staticmethod
    def concat(parts: Sequence[TypeColumns]) -> TypeColumns:
        """Rows of `parts` one after the other (they must share their columns)."""
        parts = [p for p in parts if len(p)] or list(parts[:1])
        if len(parts) == 1:
            return parts[0]
        names = list(parts[0].columns)
        nulls: dict[str, np.ndarray] = {}
        for name in {n for p in parts for n in p.nulls}:
            nulls[name] = np.concatenate([
                p.nulls[name] if name in p.nulls else np.zeros(len(p), dtype=bool)
                for p in parts])
        ingest = None
        if any(p.ingest is not None for p in parts):
            ingest = np.concatenate([p.ingest if p.ingest is not None else
                                     np.zeros(len(p), dtype=np.int64) for p in parts])
        return TypeColumns(
            ts=np.concatenate([p.ts for p in parts]),
            seq=np.concatenate([p.seq for p in parts]),
            partition=np.concatenate([p.partition for p in parts]),
            columns={n: np.concatenate([p.columns[n] for p in parts]) for n in names},
            nulls=nulls, ingest=ingest)

    @staticmethod
    def empty(schema: Mapping[str, str]) -> TypeColumns:
        return TypeColumns(ts=_I64_EMPTY, seq=_I64_EMPTY, partition=_I64_EMPTY,
                           columns={a: np.empty(0, dtype=NUMPY_DTYPES[k])
                                    for a, k in schema.items()})

    @staticmethod
    def from_values(values: Sequence[Mapping[str, Any]], schema: Mapping[str, str],
                    strings: StringPool, ts: np.ndarray, seq: np.ndarray,
                    partition: np.ndarray) -> TypeColumns:
        """Columns of dict records of one type (absent attributes -> nulls)."""
        return TypeColumns.from_lists(_attribute_lists(values, schema), schema, strings,
                                      ts, seq, partition)

    @staticmethod
    def from_lists(lists: Mapping[str, list[Any]], schema: Mapping[str, str],
                   strings: StringPool, ts: np.ndarray, seq: np.ndarray,
                   partition: np.ndarray) -> TypeColumns:
        """Columns from one Python list of values per attribute (None -> null)."""
        cols: dict[str, np.ndarray] = {}
        nulls: dict[str, np.ndarray] = {}
        n = len(ts)
        for attr, kind in schema.items():
            column = lists[attr]
            mask = None
            if None in column:
                mask = np.fromiter((v is None for v in column), dtype=bool, count=n)
                nulls[attr] = mask
                fill: Any = "" if kind == "string" else 0
                column = [fill if v is None else v for v in column]
            if kind == "string":
                arr = strings.codes(column)
                if mask is not None:
                    arr[mask] = -1
            else:
                arr = np.array(column, dtype=NUMPY_DTYPES[kind]) if n else \
                    np.empty(0, dtype=NUMPY_DTYPES[kind])
            cols[attr] = arr
        return TypeColumns(ts=np.asarray(ts, dtype=np.int64), seq=np.asarray(seq, dtype=np.int64),
                           partition=np.asarray(partition, dtype=np.int64), columns=cols,
                           nulls=nulls)

    def values(self, strings: StringPool) -> list[dict[str, Any]]:
        """Rows as dicts of plain Python values (nulls -> None)."""
        n = len(self)
        out: list[dict[str, Any]] = [{} for _ in range(n)]
        for name, arr in self.columns.items():
            if arr.dtype == np.int32:
                vals: list[Any] = strings.decode(arr)
            elif arr.dtype == np.int8:
                vals = [bool(v) for v in arr.tolist()]
            else:
                vals = arr.tolist()
            mask = self.nulls.get(name)
            if mask is not None:
                for i in np.nonzero(mask)[0].tolist():
                    vals[i] = None
            for row, v in zip(out, vals, strict=True):
                row[name] = v
        return out


def _attribute_lists(values: Sequence[Mapping[str, Any]], attrs: Iterable[str]
                     ) -> dict[str, list[Any]]:
    """One list per attribute of the records' values (absent -> None). When
    every record has every attribute (a query's results do), the rows are
    read by one itemgetter and transposed in C rather than looked up one
    attribute at a time."""
    names = list(attrs)
    if not names or not values:
        return {a: [None] * len(values) for a in names}
    try:
        rows = list(map(itemgetter(*names), values))
    except (KeyError, TypeError):  # an absent attribute (or not a dict): one by one
        return {a: [r.get(a) for r in values] for a in names}
    if len(names) == 1:
        return {names[0]: rows}
    return dict(zip(names, map(list, zip(*rows, strict=True)), strict=True))


def _nonempty(nulls: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v for k, v in nulls.items() if v.any()}


_I64_EMPTY = np.empty(0, dtype=np.int64)


@dataclass
class EventBatch:
    by_type: dict[str, TypeColumns]
    strings: StringPool

    def __len__(self) -> int:
        return sum(len(c) for c in self.by_type.values())

    def timestamps(self) -> np.ndarray:
        """The distinct event times in the batch, ascending."""
        if not self.by_type:
            return _I64_EMPTY
        return distinct(np.concatenate([c.ts for c in self.by_type.values()]))

    def take(self, rows: Mapping[str, np.ndarray]) -> EventBatch:
        """Per type, the rows `rows[type]` (types missing from `rows` are dropped)."""
        out = {}
        for t, sel in rows.items():
            cols = self.by_type.get(t)
            if cols is not None:
                picked = cols.take(sel)
                if len(picked):
                    out[t] = picked
        return EventBatch(out, self.strings)

    def where(self, predicate: Any) -> EventBatch:
        """Rows for which `predicate(TypeColumns) -> bool mask` holds."""
        return self.take({t: predicate(c) for t, c in self.by_type.items()})

    def split_ts(self, ts: int) -> tuple[EventBatch, EventBatch]:
        """(rows with ts' < ts, rows with ts' >= ts)."""
        return self.where(lambda c: c.ts < ts), self.where(lambda c: c.ts >= ts)

    @staticmethod
    def concat(batches: Sequence[EventBatch]) -> EventBatch:
        if not batches:
            raise ValueError("EventBatch.concat needs at least one batch")
        if len(batches) == 1:
            return batches[0]
        by_type: dict[str, list[TypeColumns]] = {}
        for b in batches:
            for t, c in b.by_type.items():
                by_type.setdefault(t, []).append(c)
        return EventBatch({t: TypeColumns.concat(cs) for t, cs in by_type.items()},
                          batches[0].strings)

    def in_pool(self, strings: StringPool) -> EventBatch:
        """The same batch with its string codes in `strings` (a no-op when it
        is the batch's pool or no column holds strings)."""
        if strings is self.strings:
            return self
        by_type = {}
        for t, cols in self.by_type.items():
            recoded = {}
            for name, arr in cols.columns.items():
                if arr.dtype == np.int32 and len(arr):
                    uniq, inverse = np.unique(arr, return_inverse=True)
                    mapped = strings.codes(self.strings.decode(uniq))
                    recoded[name] = mapped[inverse.reshape(-1)]
            if recoded:
                cols = TypeColumns(cols.ts, cols.seq, cols.partition,
                                   {**cols.columns, **recoded}, cols.nulls, cols.ingest)
            by_type[t] = cols
        return EventBatch(by_type, strings)

    def records(self, type_field: str = "type") -> list[dict[str, Any]]:
        """Every event as a dict (type, attributes, "_ts", "_p", "_seq"), in seq order."""
        out = []
        for t, cols in self.by_type.items():
            for row, ts, seq, p in zip(cols.values(self.strings), cols.ts.tolist(),
                                       cols.seq.tolist(), cols.partition.tolist(), strict=True):
                row[type_field] = t
                row.update(_ts=ts, _p=p, _seq=seq)
                out.append(row)
        out.sort(key=lambda r: r["_seq"])
        return out

    @staticmethod
    def from_records(
        records: Iterable[Mapping[str, Any]],
        schemas: Mapping[str, Mapping[str, str]],
        strings: StringPool,
        *,
        type_field: str = "type",
        ts_field: str = "ts",
        partition_of: Any = None,
        first_seq: int = 0,
    ) -> EventBatch:
        """Build a batch from dict records (tests, embedded mode, the reference).

        `partition_of(record) -> int` gives the interned partition key; default 0.
        Attributes absent from a record become nulls.
        """
        rows: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
        for seq, record in enumerate(records, start=first_seq):
            rows.setdefault(record[type_field], []).append((seq, record))
        by_type: dict[str, TypeColumns] = {}
        for type_name, items in rows.items():
            schema = schemas[type_name]
            cols: dict[str, np.ndarray] = {}
            nulls: dict[str, np.ndarray] = {}
            for attr, kind in schema.items():
                values = [r.get(attr) for _, r in items]
                mask = np.array([v is None for v in values], dtype=bool)
                if kind == "string":
                    arr = np.array([-1 if v is None else strings.code(v) for v in values],
                                   dtype=NUMPY_DTYPES[kind])
                else:
                    arr = np.array([0 if v is None else v for v in values],
                                   dtype=NUMPY_DTYPES[kind])
                cols[attr] = arr
                if mask.any():
                    nulls[attr] = mask
            by_type[type_name] = TypeColumns(
                ts=np.array([r[ts_field] for _, r in items], dtype=np.int64),
                seq=np.array([s for s, _ in items], dtype=np.int64),
                partition=np.array([0 if partition_of is None else partition_of(r)
                                    for _, r in items], dtype=np.int64),
                columns=cols,
                nulls=nulls,
            )
        return EventBatch(by_type=by_type, strings=strings)


def _int_keys(*cols: np.ndarray) -> bool:
    """Can grouping.pyx take these columns (as int64, order and equality kept)?"""
    return all(c.dtype.kind in "ib" or (c.dtype.kind == "u" and c.dtype.itemsize < 8)
               for c in cols)


def distinct(values: np.ndarray) -> np.ndarray:
    """np.unique(values) of a 1-D integer array (grouping.pyx; distinct_reference)."""
    if _int_keys(values):
        return np.asarray(grouping.distinct(values), dtype=values.dtype)
    return distinct_reference(values)


def distinct_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(values, return_inverse=True) of a 1-D integer array
    (grouping.pyx; distinct_inverse_reference)."""
    if _int_keys(values):
        uniq, inverse = grouping.distinct_inverse(values)
        return np.asarray(uniq, dtype=values.dtype), inverse
    return distinct_inverse_reference(values)


def lex_groups(keys: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows in lexicographic order of their keys, where each group starts in
    that order, group of each row): grouping.pyx, lex_groups_reference for
    columns it does not take."""
    if 0 < len(keys) <= 8 and _int_keys(*keys):
        return grouping.lex_groups(keys)
    return lex_groups_reference(keys)


def distinct_reference(values: np.ndarray) -> np.ndarray:
    """np.unique(values) of a 1-D integer array, by a sort. NumPy 2's
    np.unique hashes every value (~120 µs for 3,000 rows of two values,
    against ~30 µs for a sort): a batch's partitions and timestamps, a few
    distinct values among thousands of rows, were ~5 % of the embedded
    pipeline's time."""
    if len(values) == 0:
        return values.copy()
    if bool((values == values[0]).all()):
        return values[:1].copy()
    ordered = np.sort(values)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def distinct_inverse_reference(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(values, return_inverse=True) of a 1-D integer array, by a
    sort (see `distinct_reference`): the distinct values ascending, and each row's
    place among them."""
    n = len(values)
    if n == 0 or bool((values == values[0]).all()):
        return values[:1].copy(), np.zeros(n, dtype=np.int64)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new = np.concatenate(([True], ordered[1:] != ordered[:-1]))
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return ordered[new], inverse


def lex_groups_reference(keys: Sequence[np.ndarray]
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows in lexicographic order of their keys, where each group starts in
    that order, group of each row): one stable lexsort, no row view."""
    n = len(keys[0])
    order = np.lexsort(tuple(reversed(keys)))
    change = np.zeros(n, dtype=bool)
    if n:
        change[0] = True
    for col in keys:
        s = col[order]
        change[1:] |= s[1:] != s[:-1]
    starts = np.flatnonzero(change)
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.cumsum(change) - 1
    return order, starts, inverse


def group_rows(keys: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Rows with equal values in every column of `keys` (int64 arrays of one
    length) form a group: (first row of each group, group of each row),
    groups numbered in lexicographic order of their key, as
    np.unique(np.stack(keys, axis=1), axis=0, return_index=True,
    return_inverse=True) gives them, without its row view."""
    order, starts, inverse = lex_groups(keys)
    return order[starts], inverse  # lexsort is stable: a group's first row leads it


def unique_pairs(a: np.ndarray, b: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (a, b) pairs of two int64 columns in lexicographic order:
    (their a, their b, the pair of each row, rows per pair), as
    np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True,
    return_counts=True) gives them, ~4x faster."""
    order, starts, inverse = lex_groups([a, b])
    first = order[starts]
    return a[first], b[first], inverse, np.diff(np.append(starts, len(a)))
