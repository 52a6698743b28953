"""Shared tables: a plain single-version store (the serial oracle's and the
push-based engine's) and the multi-version store the schedulers use.

Versions are ordered by position `(ts, rank, seq)`: the application
timestamp of the s-transaction, the writing actor's rank inside it (the
model's declaration order), and the write's number inside the step. A read
at `(ts, rank)` sees, per key, the newest version at or before
`(ts, rank, +inf)` — the LWM rule "a read sees the newest version with
timestamp <= its ts", refined by the declaration order inside one timestamp.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from typing import Protocol

from caesar.plans.tables import TableSchema, Value

Row = dict[str, Value]
Key = tuple[Value, ...]
Position = tuple[int, int]  # (ts, rank): a step of an s-transaction
Version = tuple[int, int, int]  # (ts, rank, seq)
TOP = 1 << 62  # seq above any real one


class TableView(Protocol):
    """What a step reads and writes (one step, one position)."""

    schemas: dict[str, TableSchema]

    def get(self, table: str, key: Key) -> Row | None: ...

    def rows(self, table: str) -> Iterator[tuple[Key, Row]]: ...

    def put(self, table: str, key: Key, row: Row | None) -> None:
        """Write `row` (None deletes) under `key`."""
        ...


def key_of(schema: TableSchema, row: Mapping[str, Value]) -> Key:
    return tuple(row[k] for k in schema.key)


class PlainTables:
    """The current state only: what a push-based engine without a scheduler
    sees, and the serial reference executor's store."""

    def __init__(self, schemas: tuple[TableSchema, ...]) -> None:
        self.schemas = {s.name: s for s in schemas}
        self.data: dict[str, dict[Key, Row]] = {s.name: {} for s in schemas}
        for s in schemas:
            for values in s.initial:
                row = dict(zip(s.column_names(), values, strict=True))
                self.data[s.name][key_of(s, row)] = row

    def view(self, at: Position) -> TableView:
        return _PlainView(self)

    def snapshot(self) -> dict[str, dict[Key, Row]]:
        return {t: dict(rows) for t, rows in self.data.items()}


class _PlainView:
    def __init__(self, tables: PlainTables) -> None:
        self.t = tables
        self.schemas = tables.schemas

    def get(self, table: str, key: Key) -> Row | None:
        return self.t.data[table].get(key)

    def rows(self, table: str) -> Iterator[tuple[Key, Row]]:
        return iter(sorted(self.t.data[table].items(), key=lambda kv: _sort_key(kv[0])))

    def put(self, table: str, key: Key, row: Row | None) -> None:
        if row is None:
            self.t.data[table].pop(key, None)
        else:
            self.t.data[table][key] = dict(row)


def _sort_key(key: Key) -> tuple[tuple[int, str], ...]:
    # Keys may mix None-free values of one column type; order by type, then text.
    return tuple((0, f"{v:+030.10f}") if isinstance(v, int | float) else (1, str(v))
                 for v in key)


class VersionedTables:
    """Per key, its versions in position order (None = deleted)."""

    def __init__(self, schemas: tuple[TableSchema, ...]) -> None:
        self.schemas = {s.name: s for s in schemas}
        # Reads at a timestamp >= floor are exact; older versions may have
        # been collected (None: nothing collected yet).
        self.floor: int | None = None
        self.data: dict[str, dict[Key, tuple[list[Version], list[Row | None]]]] = {
            s.name: {} for s in schemas}
        for s in schemas:
            for values in s.initial:
                row = dict(zip(s.column_names(), values, strict=True))
                self.data[s.name][key_of(s, row)] = ([(-TOP, 0, 0)], [row])

    def view(self, at: Position) -> TableView:
        return _VersionedView(self, at)

    def read(self, table: str, key: Key, bound: Version) -> Row | None:
        entry = self.data[table].get(key)
        if entry is None:
            return None
        versions, rows = entry
        i = bisect.bisect_right(versions, bound)
        return rows[i - 1] if i else None

    def write(self, table: str, key: Key, version: Version, row: Row | None) -> None:
        versions, rows = self.data[table].setdefault(key, ([], []))
        i = bisect.bisect_right(versions, version)
        versions.insert(i, version)
        rows.insert(i, None if row is None else dict(row))

    def gc(self, below: Position) -> int:
        """Drop the versions no step at or after `below` can read (all but
        the newest one before it, per key); returns how many were dropped."""
        bound = (below[0], below[1], -1)
        self.floor = below[0] if self.floor is None else max(self.floor, below[0])
        dropped = 0
        for table in self.data.values():
            for key in list(table):
                versions, rows = table[key]
                i = bisect.bisect_right(versions, bound)
                if i > 1:
                    del versions[:i - 1]
                    del rows[:i - 1]
                    dropped += i - 1
                if len(versions) == 1 and rows[0] is None and versions[0] < bound:
                    del table[key]
                    dropped += 1
        return dropped

    def version_count(self) -> int:
        return sum(len(v) for t in self.data.values() for v, _ in t.values())

    def snapshot(self, ts: int = TOP) -> dict[str, dict[Key, Row]]:
        """The rows every step up to timestamp `ts` wrote (default: all);
        exact for `ts` >= `floor`."""
        top = (ts, TOP, TOP)
        out: dict[str, dict[Key, Row]] = {}
        for name, table in self.data.items():
            out[name] = {}
            for key in table:
                row = self.read(name, key, top)
                if row is not None:
                    out[name][key] = row
        return out


class _VersionedView:
    def __init__(self, tables: VersionedTables, at: Position) -> None:
        self.t = tables
        self.schemas = tables.schemas
        self.bound: Version = (at[0], at[1], TOP)
        self.at = at
        self.seq = 0

    def get(self, table: str, key: Key) -> Row | None:
        return self.t.read(table, key, self.bound)

    def rows(self, table: str) -> Iterator[tuple[Key, Row]]:
        out = []
        for key in list(self.t.data[table]):
            row = self.t.read(table, key, self.bound)
            if row is not None:
                out.append((key, row))
        out.sort(key=lambda kv: _sort_key(kv[0]))
        return iter(out)

    def put(self, table: str, key: Key, row: Row | None) -> None:
        self.seq += 1
        self.t.write(table, key, (self.at[0], self.at[1], self.seq), row)
