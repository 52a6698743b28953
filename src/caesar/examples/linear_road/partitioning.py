"""Stream partitioning of position reports (SPEC.md section 1, "Stream partition key"),
and their millisecond event time `ts`.

Plain: key "<xway>:<dir>", one copy of each report.
Segment fan-out: a partition per segment `pseg` that holds the reports of the
segment and of the segments 1..5 downstream of it (the 0-4 downstream segments
whose accidents matter to it, plus one more for the report of a car leaving the
4th), so CAESAR contexts, which hold per stream partition, are per segment.
Each report goes to the (up to) 6 partitions whose neighbourhood contains its
segment, with `pseg` set; outputs come only from the copy with `pseg = seg`.

`ts = 1000 * time + k`, `k` the rank of the copy among the copies of its second
at its position on its partition, in input order: reports of one second at one
place (two cars stopping there, cars entering a segment at its start) reach the
model in input order, as the LR validator takes them, and a result stamped at
the last millisecond of a second or minute follows all of them. Reports at
different positions share the second's first millisecond, so the services
handle a second in a few steps (SPEC.md section 1). `second` returns the copies
of one second ordered by `ts`, so that every Kafka partition receives
non-decreasing timestamps.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from caesar.errors import CaesarError
from caesar.examples.linear_road.records import SEGMENTS, PositionReport
from caesar.plans.execution import ExecutionPlan

NEIGHBOURHOOD = 5
NO_PSEG = -1  # the schema default: a report that was not fanned out
MS_PER_S = 1000
MAX_RANK = 998  # 999 is the last millisecond of a second: results computed at its end


class PartitionOverflow(CaesarError):
    """More reports in one second at one position than `ts` can order."""


def fanout_segments(seg: int, direction: int) -> list[int]:
    """The partitions (pseg) that receive a report of segment `seg`."""
    step = 1 if direction == 0 else -1
    return [p for p in (seg - k * step for k in range(NEIGHBOURHOOD + 1)) if 0 <= p < SEGMENTS]


def partition_key(xway: int, direction: int, pseg: int = NO_PSEG) -> str:
    return f"{xway}:{direction}" if pseg == NO_PSEG else f"{xway}:{direction}:{pseg}"


def copies(report: PositionReport, fanout: bool) -> list[tuple[str, dict[str, Any]]]:
    """(Kafka key, PositionReport record without `ts`) pairs to send for one report."""
    record = report._asdict()
    if not fanout:
        return [(partition_key(report.xway, report.dir), {**record, "pseg": NO_PSEG})]
    return [(partition_key(report.xway, report.dir, p), {**record, "pseg": p})
            for p in fanout_segments(report.seg, report.dir)]


def second(reports: Iterable[PositionReport], fanout: bool) -> list[tuple[str, dict[str, Any]]]:
    """The wire records of reports that share one second, with `ts`, in `ts` order."""
    ranks: dict[tuple[str, int], int] = {}
    out = []
    for report in reports:
        for key, record in copies(report, fanout):
            rank = ranks.get((key, report.pos), 0)
            if rank > MAX_RANK:
                raise PartitionOverflow(
                    f"more than {MAX_RANK + 1} reports in second {report.time} at position "
                    f"{report.pos} on stream partition {key!r}")
            ranks[(key, report.pos)] = rank + 1
            record["ts"] = report.time * MS_PER_S + rank
            out.append((rank, key, record))
    out.sort(key=lambda item: item[0])  # stable: input order within a partition
    return [(key, record) for _, key, record in out]


def wire_records(reports: Iterable[PositionReport], fanout: bool
                 ) -> Iterator[tuple[str, dict[str, Any]]]:
    """(Kafka key, record) pairs for time-ordered reports, second by second."""
    batch: list[PositionReport] = []
    for report in reports:
        if batch and report.time != batch[0].time:
            yield from second(batch, fanout)
            batch = []
        batch.append(report)
    if batch:
        yield from second(batch, fanout)


def ms_timestamps(time: np.ndarray, keys: Sequence[np.ndarray], pos: np.ndarray) -> np.ndarray:
    """`ts` for columns of copies in input order (the columnar form of
    `second`): `1000 * time + k`, `k` the rank of the copy among those of its
    second at its position on its stream partition (`keys`: the partition's
    columns, e.g. xway, dir, pseg)."""
    n = len(time)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(n), pos, *reversed(keys), time))
    cols = [np.asarray(c)[order] for c in (time, *keys, pos)]
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for c in cols:
        new[1:] |= c[1:] != c[:-1]
    starts = np.flatnonzero(new)
    rank_sorted = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    if rank_sorted.max() > MAX_RANK:
        raise PartitionOverflow(f"more than {MAX_RANK + 1} reports in one second at one "
                                "position on one stream partition")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = rank_sorted
    return np.asarray(time, dtype=np.int64) * MS_PER_S + rank


def model_inputs(plan: ExecutionPlan, reports: Iterable[PositionReport]) -> list[dict[str, Any]]:
    """The input events of the LR model `plan` for time-ordered `reports`, as the
    producer sends them (fanned out to segment partitions when the model
    partitions by `pseg`), with the fields the model declares."""
    event_type = plan.event_types[0]
    fields = set(event_type.fields) | {event_type.ts_field}
    return [{"type": event_type.name, **{k: v for k, v in record.items() if k in fields}}
            for _, record in wire_records(reports, "pseg" in plan.partition_by)]
