"""Linear Road input records and the 15-field LR text format.

A data file holds position reports (Type 0), account-balance queries (Type 2)
and daily-expenditure queries (Type 3), in time order; the historical-tolls
file holds `vid,day,xway,toll` lines (SPEC.md section 1). A line that cannot
be used is not fatal: `read_lr` skips it and reports it as a `BadLine` with
the reason (the producer sends those to the dead-letter topic).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TextIO

SEGMENT_FEET = 5280
SEGMENTS = 100
ROAD_FEET = SEGMENT_FEET * SEGMENTS
EXIT_LANE = 4
ENTRANCE_LANE = 0
LR_FIELDS = ("Type", "Time", "VID", "Spd", "XWay", "Lane", "Dir", "Seg", "Pos",
             "QID", "Sinit", "Send", "DOW", "TOD", "Day")
MAX_XWAY = 1000  # far above any LR run (L is a few hundred at most)
# 20 minutes of standard load, segments 78-82 (data/README.md says how it is made).
SAMPLE = Path(__file__).parent / "data" / "sample-L1-1200s-seed14-seg78-82.lr"


class PositionReport(NamedTuple):
    """An LR Type=0 record, fields as in schemas/PositionReport.avsc."""

    time: int
    vid: int
    spd: int
    xway: int
    lane: int
    dir: int
    seg: int
    pos: int

    def to_lr_line(self) -> str:
        # Unused query fields are -1, as in the published LR data files.
        return (f"0,{self.time},{self.vid},{self.spd},{self.xway},{self.lane},{self.dir},"
                f"{self.seg},{self.pos},-1,-1,-1,-1,-1,-1")


class BalanceQuery(NamedTuple):
    """LR Type=2: the car's account balance (the tolls charged today)."""

    time: int
    vid: int
    qid: int
    xway: int

    def to_lr_line(self) -> str:
        return f"2,{self.time},{self.vid},-1,{self.xway},-1,-1,-1,-1,{self.qid},-1,-1,-1,-1,-1"


class ExpenditureQuery(NamedTuple):
    """LR Type=3: the car's toll total on expressway `xway` on an earlier `day`."""

    time: int
    vid: int
    qid: int
    xway: int
    day: int

    def to_lr_line(self) -> str:
        return (f"3,{self.time},{self.vid},-1,{self.xway},-1,-1,-1,-1,{self.qid},"
                f"-1,-1,-1,-1,{self.day}")


LrRecord = PositionReport | BalanceQuery | ExpenditureQuery


class HistoricalToll(NamedTuple):
    """A line of the historical-tolls file: what `vid` paid on `xway` on `day`."""

    vid: int
    day: int
    xway: int
    toll: int

    def to_line(self) -> str:
        return f"{self.vid},{self.day},{self.xway},{self.toll}"


@dataclass(frozen=True)
class BadLine:
    """A line of an input file that was not used, and why (a dead letter)."""

    where: str  # file:line
    text: str
    reason: str


class LineError(ValueError):
    """Why a line is not a usable record."""


def parse_lr_line(line: str) -> LrRecord | None:
    """The record of one line; None for a blank line. Raises LineError."""
    text = line.strip()
    if not text:
        return None
    parts = text.split(",")
    if len(parts) != 15:
        raise LineError(f"expected 15 comma-separated fields ({', '.join(LR_FIELDS)}), "
                        f"got {len(parts)}")
    try:
        v = [int(p.strip()) for p in parts]
    except ValueError as exc:
        raise LineError(f"fields must be integers: {exc}") from None
    kind, time, vid = v[0], v[1], v[2]
    if time < 0:
        raise LineError(f"Time {time} < 0")
    if vid < 0:
        raise LineError(f"VID {vid} < 0")
    if kind == 0:
        report = PositionReport(time, vid, v[3], v[4], v[5], v[6], v[7], v[8])
        _check_report(report)
        return report
    if kind == 2:
        return BalanceQuery(time, vid, v[9], v[4])
    if kind == 3:
        return ExpenditureQuery(time, vid, v[9], v[4], v[14])
    if kind == 4:
        raise LineError("Type 4 (travel-time estimation) is not supported "
                        "(SPEC.md section 8)")
    raise LineError(f"Type {kind} is not an LR input record type (0, 2, 3, 4)")


def _check_report(r: PositionReport) -> None:
    # Spd is not checked: LR says 0..100, but the public generator writes a few
    # negative speeds and the public validator uses them like any other (SPEC 1).
    problems = []
    if not 0 <= r.xway < MAX_XWAY:
        problems.append(f"XWay {r.xway} not in 0..{MAX_XWAY - 1}")
    if not 0 <= r.lane <= EXIT_LANE:
        problems.append(f"Lane {r.lane} not in 0..4")
    if r.dir not in (0, 1):
        problems.append(f"Dir {r.dir} not 0 or 1")
    if not 0 <= r.pos < ROAD_FEET:
        problems.append(f"Pos {r.pos} not in 0..{ROAD_FEET - 1}")
    elif r.seg != r.pos // SEGMENT_FEET:
        problems.append(f"Seg {r.seg} != Pos // 5280 = {r.pos // SEGMENT_FEET}")
    if problems:
        raise LineError("; ".join(problems))


def read_lr(source: str | Path | TextIO,
            bad: Callable[[BadLine], None] | list[BadLine] | None = None) -> Iterator[LrRecord]:
    """The records of a standard LR data file, in file order.

    Lines that are not usable records are skipped and handed to `bad` (a list
    to append to, or a callback); without `bad`, a warning says how many."""
    if isinstance(source, (str, Path)):
        with open(source, encoding="ascii", errors="replace") as handle:
            yield from read_lr(handle, bad)
        return
    sink = bad.append if isinstance(bad, list) else bad
    skipped = 0
    name = getattr(source, "name", "<stream>")
    for number, line in enumerate(source, start=1):
        try:
            record = parse_lr_line(line)
        except LineError as exc:
            skipped += 1
            if sink is not None:
                sink(BadLine(f"{name}:{number}", line.rstrip("\n"), str(exc)))
            continue
        if record is not None:
            yield record
    if skipped and sink is None:
        warnings.warn(f"{name}: {skipped} unusable line(s) skipped", stacklevel=2)


def position_reports(records: Iterable[LrRecord]) -> Iterator[PositionReport]:
    return (r for r in records if isinstance(r, PositionReport))


def write_lr(records: Iterable[LrRecord], target: str | Path) -> int:
    count = 0
    with open(target, "w", encoding="ascii") as handle:
        for record in records:
            handle.write(record.to_lr_line())
            handle.write("\n")
            count += 1
    return count


def read_historical(source: str | Path,
                    wanted: set[tuple[int, int, int]] | None = None,
                    bad: list[BadLine] | None = None,
                    vids: set[int] | None = None) -> dict[tuple[int, int, int], int]:
    """The historical-tolls file as {(vid, day, xway): toll}; with `wanted`, only
    those keys, with `vids` only those cars (the public file has 69 days for
    every car)."""
    out: dict[tuple[int, int, int], int] = {}
    with open(source, encoding="ascii", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            parts = line.strip().split(",")
            if parts == [""]:
                continue
            try:
                vid, day, xway, toll = (int(p) for p in parts)
            except ValueError:
                if bad is not None:
                    bad.append(BadLine(f"{source}:{number}", line.rstrip("\n"),
                                       "expected 4 integers vid,day,xway,toll"))
                continue
            key = (vid, day, xway)
            if (wanted is None or key in wanted) and (vids is None or vid in vids):
                out[key] = toll
    return out


def write_historical(tolls: Iterable[HistoricalToll], target: str | Path) -> int:
    count = 0
    with open(target, "w", encoding="ascii") as handle:
        for t in tolls:
            handle.write(t.to_line())
            handle.write("\n")
            count += 1
    return count


def minute(time: int) -> int:
    """LR minute of a time in seconds: seconds 0..59 are minute 1."""
    return time // 60 + 1
