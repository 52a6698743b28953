"""Linear Road position reports: the in-memory record and the 15-field LR text format."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple, TextIO

from caesar.errors import CaesarError

SEGMENT_FEET = 5280
SEGMENTS = 100
ROAD_FEET = SEGMENT_FEET * SEGMENTS
EXIT_LANE = 4
ENTRANCE_LANE = 0
LR_FIELDS = ("Type", "Time", "VID", "Spd", "XWay", "Lane", "Dir", "Seg", "Pos",
             "QID", "Sinit", "Send", "DOW", "TOD", "Day")


class LinearRoadFormatError(CaesarError):
    """A line of a Linear Road data file is not a valid 15-field record."""


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


def parse_lr_line(line: str, where: str = "") -> PositionReport | None:
    """A position report, or None for other record types (queries) and blank lines."""
    text = line.strip()
    if not text:
        return None
    parts = text.split(",")
    if len(parts) != 15:
        raise LinearRoadFormatError(
            f"{where}: expected 15 comma-separated fields ({', '.join(LR_FIELDS)}), "
            f"got {len(parts)}")
    try:
        values = [int(p.strip()) for p in parts]
    except ValueError as exc:
        raise LinearRoadFormatError(f"{where}: fields must be integers: {exc}") from None
    if values[0] != 0:
        return None
    _, time, vid, spd, xway, lane, direction, seg, pos = values[:9]
    report = PositionReport(time, vid, spd, xway, lane, direction, seg, pos)
    _check(report, where)
    return report


def _check(r: PositionReport, where: str) -> None:
    problems = []
    if r.time < 0:
        problems.append(f"Time {r.time} < 0")
    if not 0 <= r.spd <= 100:
        problems.append(f"Spd {r.spd} not in 0..100")
    if not 0 <= r.lane <= EXIT_LANE:
        problems.append(f"Lane {r.lane} not in 0..4")
    if r.dir not in (0, 1):
        problems.append(f"Dir {r.dir} not 0 or 1")
    if not 0 <= r.pos < ROAD_FEET:
        problems.append(f"Pos {r.pos} not in 0..{ROAD_FEET - 1}")
    elif r.seg != r.pos // SEGMENT_FEET:
        problems.append(f"Seg {r.seg} != Pos // 5280 = {r.pos // SEGMENT_FEET}")
    if problems:
        raise LinearRoadFormatError(f"{where}: " + "; ".join(problems))


def read_lr(source: str | Path | TextIO) -> Iterator[PositionReport]:
    """Position reports of a standard LR data file (other record types are skipped)."""
    if isinstance(source, (str, Path)):
        with open(source, encoding="ascii") as handle:
            yield from read_lr(handle)
        return
    name = getattr(source, "name", "<stream>")
    for number, line in enumerate(source, start=1):
        report = parse_lr_line(line, f"{name}:{number}")
        if report is not None:
            yield report


def write_lr(reports: Iterable[PositionReport], target: str | Path) -> int:
    count = 0
    with open(target, "w", encoding="ascii") as handle:
        for report in reports:
            handle.write(report.to_lr_line())
            handle.write("\n")
            count += 1
    return count


def minute(time: int) -> int:
    """LR minute of a time in seconds: seconds 0..59 are minute 1."""
    return time // 60 + 1
