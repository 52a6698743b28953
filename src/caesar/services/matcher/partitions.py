"""Stream partitions and context partitions of a model with CONTEXTS PER.

`PARTITION BY xway, dir` + `CONTEXTS PER seg`: transactions, context
vectors and routing are kept per context partition (xway, dir, seg), while
the queries that run in every context see a whole stream partition (xway,
dir) once, so work that does not depend on the context (a car's stops, the
segment statistics) is done once per event rather than once per segment it
matters to. Ids are the `partition_id` of the readable key text, as the
scheduler computes them: "0|1|37" for a context partition, "0|1" for its
stream partition.

A result of a stream-wide query goes back to the context partition named
by its own key attributes (an EnteringCar's seg); a result without them
stays in the stream partition, where only stream-wide queries read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from caesar.services.common.messages import partition_id
from caesar.services.matcher.key_table import KeyTable


class ContextPartitions:
    def __init__(self, stream_attrs: int, key_attrs: Sequence[str]) -> None:
        self.stream_attrs = stream_attrs
        self.key_attrs = tuple(key_attrs)
        self.text: dict[int, str] = {}  # id -> key text, both kinds
        self._stream: dict[int, int] = {}  # context or stream partition -> stream partition
        self._context: dict[tuple[int, tuple[Any, ...]], int] = {}
        # `_stream` of the ids `stream_of` was asked, in C; forgotten when
        # `_stream` changes
        self._memo = KeyTable(1)
        # the last array stream_of mapped, its answer and the version it was
        # made at: the stages of one run ask for the same input columns' array
        # again and again (LR: the aggregates and every stage reading
        # PositionReport, each second); the array is held so that its id
        # cannot come back as another's
        self._last: tuple[np.ndarray, np.ndarray, int] | None = None
        # counts the partitions learnt: what was derived from the known ones
        # (stream_id, the stage graph's table of homes) is stale once it moves
        self.version = 0

    def learn(self, keys: Mapping[int, str]) -> None:
        """Context partitions (id -> key text) seen in the input."""
        for pid, text in keys.items():
            if pid in self._stream:
                continue
            self.text[pid] = text
            stream_text = "|".join(text.split("|")[:self.stream_attrs])
            sid = partition_id(stream_text)
            self._stream[pid] = sid
            self._stream[sid] = sid
            self.text[sid] = stream_text
            self._memo.clear()
            self.version += 1

    def stream_id(self, pid: int) -> int:
        return self._stream.get(pid, pid)

    def is_stream(self, pid: int) -> bool:
        return self._stream.get(pid) == pid

    def stream_of(self, partitions: np.ndarray) -> np.ndarray:
        """The stream partition of every row (stream partitions, and ids not
        seen, map to themselves): each row's id looked up in a C table of
        the ids asked so far (key_table.pyx). `np.unique` here was ~5 % of
        the embedded pipeline's time on Linear Road (session 24), a binary
        search in the known ids then ~2 % (session 35)."""
        if not len(partitions) or not self._stream:
            return partitions
        last = self._last
        if last is not None and last[0] is partitions and last[2] == self.version:
            return last[1]
        rows = np.ascontiguousarray(partitions, dtype=np.int64).reshape(1, -1)
        stream = self._stream
        out = self._memo.lookup(rows, lambda ids: [stream.get(k[0], k[0]) for k in ids])
        out.flags.writeable = False  # shared by the callers of the same array
        self._last = (partitions, out, self.version)
        return out

    def context_of(self, stream: int, values: tuple[Any, ...]) -> int:
        """The context partition of a row of stream partition `stream` whose
        key attributes hold `values`."""
        found = self._context.get((stream, values))
        if found is None:
            text = "|".join([self.text.get(stream, "")] +
                            ["" if v is None else str(v) for v in values])
            found = partition_id(text)
            self._context[(stream, values)] = found
            self.text.setdefault(found, text)
            if found not in self._stream:
                self._stream[found] = stream
                self._memo.clear()
                self.version += 1
        return found

    def contexts_of(self, streams: np.ndarray, key_columns: Sequence[list[Any]]) -> np.ndarray:
        """`context_of` for every row (rows of a stream partition whose key values are known)."""
        out = np.empty(len(streams), dtype=np.int64)
        for i, (s, *vals) in enumerate(zip(streams.tolist(), *key_columns, strict=True)):
            out[i] = self.context_of(s, tuple(vals))
        return out

    def state(self) -> dict[str, Any]:
        return {"text": dict(self.text), "stream": dict(self._stream)}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.text.update(state.get("text", {}))
        self._stream.update(state.get("stream", {}))
        self._memo.clear()
        self.version += 1
