"""Columnar event batches: the matcher's input format.

A batch holds, per event type, typed columns: numbers as numpy arrays, strings
interned to int32 codes through one `StringPool` shared by a whole pipeline
(so equality tests on strings are integer tests). `seq` is the arrival order
across all types, so engines can merge types back into one ordered stream
(needed by strict contiguity and by negation at equal timestamps).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Attribute type names used in schemas and plans.
NUMPY_DTYPES: dict[str, np.dtype] = {
    "int": np.dtype(np.int64),
    "float": np.dtype(np.float64),
    "bool": np.dtype(np.int8),
    "string": np.dtype(np.int32),  # interned codes
}


class StringPool:
    """Interns strings to dense int32 codes; code -1 means null."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}
        self._strings: list[str] = []

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

    def __len__(self) -> int:
        return int(self.ts.shape[0])


@dataclass
class EventBatch:
    by_type: dict[str, TypeColumns]
    strings: StringPool

    def __len__(self) -> int:
        return sum(len(c) for c in self.by_type.values())

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
