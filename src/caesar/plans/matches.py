"""Matches as columns: what a columnar engine returns instead of one
DerivedEvent per match. With dense matches the Python objects were most of
the matcher's cost (bench/peers, V1=100: 0.6 matches per event); columns
hold the same facts in a few NumPy arrays per plan, and `events()` makes
the DerivedEvents when a caller wants them after all."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from caesar.plans.engine import DerivedEvent


@dataclass(eq=False)
class MatchColumns:
    """One output type's matches of one plan, in the order they were made.
    Row i's event seqs are `seqs[seq_offsets[i]:seq_offsets[i + 1]]`
    (component order; a Kleene component contributes all its events), and
    `order[i]` is its place among every match of the same call."""

    plan_id: str
    event_type: str
    order: np.ndarray
    partition: np.ndarray
    start_ts: np.ndarray
    end_ts: np.ndarray
    seq_offsets: np.ndarray
    seqs: np.ndarray
    fields: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.order.shape[0])

    def event_seqs(self, i: int) -> tuple[int, ...]:
        return tuple(self.seqs[self.seq_offsets[i]:self.seq_offsets[i + 1]].tolist())

    def seq_matrix(self) -> np.ndarray:
        """The seqs as an (n, k) matrix when every match has k events (no
        Kleene component); ValueError otherwise."""
        n = len(self)
        if n == 0:
            return np.empty((0, 0), dtype=np.int64)
        widths = np.diff(self.seq_offsets)
        if not (widths == widths[0]).all():
            raise ValueError(f"{self.plan_id}: matches have different lengths "
                             "(a Kleene component); use seq_offsets")
        return self.seqs.reshape(n, int(widths[0]))

    def events(self) -> list[DerivedEvent]:
        cols = {name: col.tolist() for name, col in self.fields.items()}
        part, start, end = (self.partition.tolist(), self.start_ts.tolist(),
                            self.end_ts.tolist())
        seqs, off = self.seqs.tolist(), self.seq_offsets.tolist()
        return [DerivedEvent(self.plan_id, self.event_type, part[i], start[i], end[i],
                             {name: col[i] for name, col in cols.items()},
                             tuple(seqs[off[i]:off[i + 1]]))
                for i in range(len(self))]


class MatchBatch:
    """Every match of one `process` or `advance` call of a columnar engine,
    grouped by plan and output type. `events()` gives the DerivedEvents in
    the order the object engine returns them."""

    __slots__ = ("columns",)

    def __init__(self, columns: list[MatchColumns] | None = None) -> None:
        self.columns: list[MatchColumns] = columns or []

    def __len__(self) -> int:
        return sum(len(c) for c in self.columns)

    def __iter__(self) -> Iterator[MatchColumns]:
        return iter(self.columns)

    def __add__(self, other: MatchBatch) -> MatchBatch:
        """This call's matches, then the other's (its order shifted after ours)."""
        shift = len(self)
        return MatchBatch(self.columns + [replace(c, order=c.order + shift)
                                          for c in other.columns])

    def events(self) -> list[DerivedEvent]:
        if len(self.columns) == 1:
            return self.columns[0].events()
        tagged = [(o, ev) for c in self.columns
                  for o, ev in zip(c.order.tolist(), c.events(), strict=True)]
        tagged.sort(key=lambda t: t[0])
        return [ev for _o, ev in tagged]

    def __repr__(self) -> str:
        return f"MatchBatch({len(self)} matches in {len(self.columns)} columns)"
