"""Linear Road standard data: the public generator's output as numpy columns.

The standard data is not part of the repository. Make it with the public
generator (github.com/walmartlabs/LinearGenerator), outside the repository:

    git clone https://github.com/walmartlabs/LinearGenerator /work/lrdata/gen
    cd /work/lrdata/gen && mkdir -p classes && \\
        javac -d classes $(find src -name '*.java')
    java -cp classes com.walmart.linearroad.generator.LinearGen -o /work/lrdata/L1.dat -x 1

(1 expressway, 3 hours: ~23.1M position reports, ~2,140/s on average, the
peak near 2,870/s over minutes 100-130; ~6 minutes on this machine). Pass
the file with --data or CAESAR_LR_DATA. The first read parses the 1.2 GB
text file (~15 s with pyarrow) and caches the position reports as .npz next
to it (or under ~/.cache/caesar/lr when that folder is read-only).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

FIELDS = ("time", "vid", "spd", "xway", "lane", "dir", "seg", "pos")
ENV = "CAESAR_LR_DATA"
# The 30 peak minutes of the standard profile (minutes 100-130: ~2,860 reports/s).
PEAK = (6000, 7800)


class StandardDataMissing(SystemExit):
    pass


def data_path(given: str | Path | None) -> Path:
    path = Path(given or os.environ.get(ENV, "") or "/work/lrdata/L1.dat")
    if not path.exists():
        raise StandardDataMissing(
            f"Linear Road standard data not found at {path}: pass --data FILE or set {ENV} "
            "(how to generate it: bench/linear_road/standard.py)")
    return path


@dataclass(frozen=True)
class Reports:
    """Position reports in time order, one int64 column per field."""

    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.columns["time"])

    def window(self, start: int, end: int) -> Reports:
        """Reports with start <= time < end."""
        t = self.columns["time"]
        lo, hi = np.searchsorted(t, start, "left"), np.searchsorted(t, end, "left")
        return Reports({k: v[lo:hi] for k, v in self.columns.items()})

    def xways(self, n: int) -> Reports:
        """n expressways: copy i of every report on expressway i, vid + i * 10^7
        (how the LR generator makes L expressways: independent roads)."""
        if n == 1:
            return self
        parts = []
        for i in range(n):
            cols = dict(self.columns)
            cols["xway"] = cols["xway"] + i
            cols["vid"] = cols["vid"] + i * 10_000_000
            parts.append(cols)
        merged = {k: np.concatenate([p[k] for p in parts]) for k in FIELDS}
        order = np.argsort(merged["time"], kind="stable")
        return Reports({k: v[order] for k, v in merged.items()})

    def seconds(self) -> Iterator[tuple[int, Reports]]:
        t = self.columns["time"]
        if not len(t):
            return
        cuts = np.flatnonzero(np.r_[True, t[1:] != t[:-1], True])
        for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
            yield int(t[a]), Reports({k: v[a:b] for k, v in self.columns.items()})

    def records(self) -> list[dict[str, Any]]:
        """The reports as dicts (what a decoded input record holds)."""
        cols = [self.columns[f].tolist() for f in FIELDS]
        return [dict(zip(FIELDS, row, strict=True)) for row in zip(*cols, strict=True)]

    def position_reports(self) -> list[Any]:
        from caesar.examples.linear_road.records import PositionReport

        cols = [self.columns[f].tolist() for f in FIELDS]
        return [PositionReport(*row) for row in zip(*cols, strict=True)]

    def rate(self) -> float:
        t = self.columns["time"]
        return len(t) / max(1, int(t[-1]) - int(t[0]) + 1) if len(t) else 0.0


def load(path: str | Path | None = None) -> Reports:
    src = data_path(path)
    cache = src.with_suffix(".reports.npz")
    if not os.access(src.parent, os.W_OK):
        cache = Path.home() / ".cache" / "caesar" / "lr" / (src.stem + ".reports.npz")
    if cache.exists() and cache.stat().st_mtime >= src.stat().st_mtime:
        with np.load(cache) as z:
            return Reports({k: z[k].astype(np.int64) for k in FIELDS})
    cols = _parse(src)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, **{k: v.astype(np.int32) for k, v in cols.items()})
    return Reports(cols)


def _parse(path: Path) -> dict[str, np.ndarray]:
    """Type-0 records (position reports) of an LR data file, time-ordered."""
    import pyarrow.csv as pc

    names = [f"c{i}" for i in range(15)]
    table = pc.read_csv(
        str(path), read_options=pc.ReadOptions(column_names=names, block_size=1 << 26),
        convert_options=pc.ConvertOptions(include_columns=names[:9],
                                          column_types=dict.fromkeys(names[:9], "int64")))
    kind = table.column("c0").to_numpy()
    keep = kind == 0
    cols = {f: table.column(f"c{i + 1}").to_numpy()[keep] for i, f in enumerate(FIELDS)}
    order = np.argsort(cols["time"], kind="stable")
    return {k: v[order].astype(np.int64) for k, v in cols.items()}
