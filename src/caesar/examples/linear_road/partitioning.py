"""Stream partitioning of position reports (SPEC.md section 1, "Stream partition key").

Plain: key "<xway>:<dir>", one copy of each report.
Segment fan-out: a partition per segment `pseg` that holds the reports of the
segment and of the segments 1..5 downstream of it (the 0-4 downstream segments
whose accidents matter to it, plus one more for the report that clears an
accident at the 4th), so CAESAR contexts, which hold per stream partition, are
per segment. Each report goes to the (up to) 6 partitions whose neighbourhood
contains its segment, with `pseg` set; outputs come only from the copy with
`pseg = seg`.
"""

from __future__ import annotations

from typing import Any

from caesar.examples.linear_road.records import SEGMENTS, PositionReport

NEIGHBOURHOOD = 5
NO_PSEG = -1  # the schema default: a report that was not fanned out


def fanout_segments(seg: int, direction: int) -> list[int]:
    """The partitions (pseg) that receive a report of segment `seg`."""
    step = 1 if direction == 0 else -1
    return [p for p in (seg - k * step for k in range(NEIGHBOURHOOD + 1)) if 0 <= p < SEGMENTS]


def partition_key(xway: int, direction: int, pseg: int = NO_PSEG) -> str:
    return f"{xway}:{direction}" if pseg == NO_PSEG else f"{xway}:{direction}:{pseg}"


def wire_records(report: PositionReport, fanout: bool) -> list[tuple[str, dict[str, Any]]]:
    """(Kafka key, PositionReport record) pairs to send for one report."""
    record = report._asdict()
    if not fanout:
        return [(partition_key(report.xway, report.dir), {**record, "pseg": NO_PSEG})]
    return [(partition_key(report.xway, report.dir, p), {**record, "pseg": p})
            for p in fanout_segments(report.seg, report.dir)]
