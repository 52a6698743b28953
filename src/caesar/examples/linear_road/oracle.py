"""A plain-Python reference of src/caesar/examples/linear_road/SPEC.md, written for clarity.

One pass over the input in time order, with the state SPEC describes per road
(expressway and direction): each car's trip, the per-minute segment
statistics, the cars stopped at each position, the accident of each segment,
and every car's account. It is the cross-check for the Spark SQL validator
and the model (they must agree exactly), and it was compared line by line with
the public Linear Road validator on a full public data file
(bench/linear_road/README.md, "Against the public validator").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from caesar.examples.linear_road.records import (
    EXIT_LANE,
    BalanceQuery,
    ExpenditureQuery,
    LrRecord,
    PositionReport,
    minute,
)

TOLL_FIELDS = ("vid", "time", "xway", "dir", "seg", "lav", "toll")
ALERT_FIELDS = ("vid", "time", "xway", "dir", "seg", "acc_seg")
CHARGE_FIELDS = ("vid", "time", "toll")
BALANCE_FIELDS = ("vid", "time", "qid", "balance")
EXPENDITURE_FIELDS = ("vid", "time", "qid", "toll")

NEW_TRIP_GAP_S = 60  # SPEC 3: a lane-0 report more than 60 s after the last one starts a trip
STOPPED_REPORTS = 4  # SPEC 4: reports at one position that make a car stopped
ZONE_SEGMENTS = 5  # SPEC 5: the accident segment and the 4 upstream of it


class TollRow(NamedTuple):
    vid: int
    time: int
    xway: int
    dir: int
    seg: int
    lav: int
    toll: int


class AlertRow(NamedTuple):
    vid: int
    time: int
    xway: int
    dir: int
    seg: int
    acc_seg: int


class ChargeRow(NamedTuple):
    """A toll charged to the car's account (SPEC 6): at `time`, for the segment it left."""

    vid: int
    time: int
    toll: int


class BalanceRow(NamedTuple):
    """Answer to a Type 2 query: every toll charged to `vid` up to `time`."""

    vid: int
    time: int
    qid: int
    balance: int


class ExpenditureRow(NamedTuple):
    """Answer to a Type 3 query: the historical toll total of that day and expressway."""

    vid: int
    time: int
    qid: int
    toll: int


@dataclass
class Accident:
    xway: int
    dir: int
    lane: int
    pos: int
    detected: int
    cars: tuple[int, int]
    cleared: int | None = None  # None: not cleared in the input

    @property
    def seg(self) -> int:
        return self.pos // 5280

    def zone_minutes(self) -> tuple[int, float]:
        """First and last minute of its zone (SPEC 5); empty when first > last."""
        last = float("inf") if self.cleared is None else minute(self.cleared)
        return minute(self.detected) + 1, last


@dataclass
class Expected:
    tolls: list[TollRow] = field(default_factory=list)
    alerts: list[AlertRow] = field(default_factory=list)
    charges: list[ChargeRow] = field(default_factory=list)
    balances: list[BalanceRow] = field(default_factory=list)
    expenditures: list[ExpenditureRow] = field(default_factory=list)
    accidents: list[Accident] = field(default_factory=list)

    @property
    def positive_tolls(self) -> int:
        return sum(1 for t in self.tolls if t.toll > 0)


@dataclass
class _Car:
    """A car's trip on one road (SPEC 3)."""

    time: int = -1
    lane: int = -1
    seg: int = -1
    pos: int = -1
    at_pos: int = 0  # consecutive reports at (lane, pos)
    toll: int = 0  # toll of the segment it is in, charged when it leaves


@dataclass
class _Road:
    """The state of one expressway direction."""

    cars: dict[int, _Car] = field(default_factory=dict)
    # (seg, minute) -> [sum of speeds, reports, cars]
    stats: dict[tuple[int, int], list] = field(default_factory=dict)
    stopped: dict[tuple[int, int], list[int]] = field(default_factory=dict)  # (lane, pos)
    accidents: dict[int, Accident] = field(default_factory=dict)  # by segment


class Outputs(NamedTuple):
    """Where the oracle sends what it derives (all optional)."""

    toll: Callable[[TollRow], None] | None = None
    alert: Callable[[AlertRow], None] | None = None
    charge: Callable[[ChargeRow], None] | None = None
    balance: Callable[[BalanceRow], None] | None = None
    expenditure: Callable[[ExpenditureRow], None] | None = None
    accident: Callable[[Accident], None] | None = None


class Oracle:
    """Feed records in time order (`feed`), then `finish`."""

    def __init__(self, historical: Mapping[tuple[int, int, int], int] | None = None,
                 outputs: Outputs | None = None) -> None:
        self.historical = historical or {}
        self.out = outputs or Outputs()
        self.roads: dict[tuple[int, int], _Road] = defaultdict(_Road)
        self.accounts: dict[int, int] = defaultdict(int)
        self.second = -1
        self.queries: list[BalanceQuery | ExpenditureQuery] = []

    def feed(self, record: LrRecord) -> None:
        if record.time < self.second:
            raise ValueError(f"input not in time order: {record} after time {self.second}")
        if record.time != self.second:
            self._answer_queries()  # SPEC 7: after every report of their second
            self.second = record.time
        if isinstance(record, PositionReport):
            self._report(record)
        else:
            self.queries.append(record)

    def finish(self) -> None:
        self._answer_queries()

    # -- SPEC 3-6 ---------------------------------------------------------------------

    def _report(self, r: PositionReport) -> None:
        road = self.roads[(r.xway, r.dir)]
        car = road.cars.get(r.vid)
        if car is None or (r.lane == 0 and r.time > car.time + NEW_TRIP_GAP_S):
            car = road.cars[r.vid] = _Car()  # a new trip
        if (r.lane, r.pos) == (car.lane, car.pos):
            car.at_pos += 1
            if car.at_pos == STOPPED_REPORTS:
                self._stopped(road, r)
        else:
            self._moved(road, car, r)
            car.at_pos = 1
            if r.seg != car.seg:
                self._entered(road, car, r)
        car.time, car.lane, car.seg, car.pos = r.time, r.lane, r.seg, r.pos
        stat = road.stats.get((r.seg, minute(r.time)))
        if stat is None:
            stat = road.stats[(r.seg, minute(r.time))] = [0, 0, set()]
        stat[0] += r.spd
        stat[1] += 1
        stat[2].add(r.vid)

    def _stopped(self, road: _Road, r: PositionReport) -> None:
        cars = road.stopped.setdefault((r.lane, r.pos), [])
        if len(cars) >= 2 or r.vid in cars:
            return
        cars.append(r.vid)
        if len(cars) == 2 and r.seg not in road.accidents:
            acc = Accident(r.xway, r.dir, r.lane, r.pos, r.time, (cars[0], cars[1]))
            road.accidents[r.seg] = acc
            if self.out.accident:
                self.out.accident(acc)

    def _moved(self, road: _Road, car: _Car, r: PositionReport) -> None:
        """The car reports another position than its last one in this trip."""
        if car.pos < 0:
            return
        cars = road.stopped.get((car.lane, car.pos))
        if cars and r.vid in cars:
            cars.remove(r.vid)
        acc = road.accidents.get(car.seg)
        if acc is not None and acc.cleared is None and r.vid in acc.cars:
            acc.cleared = r.time

    def _entered(self, road: _Road, car: _Car, r: PositionReport) -> None:
        """The car reports a new segment (or starts a trip): notify, charge."""
        toll = 0
        if r.lane != EXIT_LANE:
            m = minute(r.time)
            prev = road.stats.get((r.seg, m - 1))
            cars = len(prev[2]) if prev else 0
            lav = self._lav(road, r.seg, m)
            if cars > 50 and lav < 40:
                toll = 2 * (cars - 50) ** 2
            acc_seg = self._zone(road, r, m)
            if acc_seg is not None:
                toll = 0
                if self.out.alert:
                    self.out.alert(AlertRow(r.vid, r.time, r.xway, r.dir, r.seg, acc_seg))
            if self.out.toll:
                self.out.toll(TollRow(r.vid, r.time, r.xway, r.dir, r.seg, lav, toll))
        if car.toll > 0:
            self.accounts[r.vid] += car.toll
            if self.out.charge:
                self.out.charge(ChargeRow(r.vid, r.time, car.toll))
        car.toll = toll

    @staticmethod
    def _lav(road: _Road, seg: int, m: int) -> int:
        """SPEC 2: mean speed of minutes m-5..m-1, rounded half up; 0 without reports."""
        total = n = 0
        for k in range(m - 5, m):
            stat = road.stats.get((seg, k))
            if stat:
                total += stat[0]
                n += stat[1]
        return (2 * total + n) // (2 * n) if n else 0

    @staticmethod
    def _zone(road: _Road, r: PositionReport, m: int) -> int | None:
        """SPEC 5: the nearest accident whose zone holds for this report, if any."""
        step = 1 if r.dir == 0 else -1
        for k in range(ZONE_SEGMENTS):
            acc = road.accidents.get(r.seg + k * step)
            if acc is not None:
                first, last = acc.zone_minutes()
                if first <= m <= last:
                    return acc.seg
        return None

    # -- SPEC 7 -----------------------------------------------------------------------

    def _answer_queries(self) -> None:
        for q in self.queries:
            if isinstance(q, BalanceQuery):
                if self.out.balance:
                    self.out.balance(BalanceRow(q.vid, q.time, q.qid, self.accounts.get(q.vid, 0)))
            elif q.day != 0:
                toll = self.historical.get((q.vid, q.day, q.xway))
                if toll is not None and self.out.expenditure:
                    self.out.expenditure(ExpenditureRow(q.vid, q.time, q.qid, toll))
        self.queries.clear()


def collecting(exp: Expected,
               historical: Mapping[tuple[int, int, int], int] | None = None) -> Oracle:
    """An Oracle appending every output to `exp`'s lists (feed it, then finish)."""
    return Oracle(historical, Outputs(exp.tolls.append, exp.alerts.append, exp.charges.append,
                                      exp.balances.append, exp.expenditures.append,
                                      exp.accidents.append))


def expected_outputs(records: Iterable[LrRecord],
                     historical: Mapping[tuple[int, int, int], int] | None = None) -> Expected:
    """Every output SPEC.md defines for `records` (in time order)."""
    exp = Expected()
    oracle = collecting(exp, historical)
    for record in records:
        oracle.feed(record)
    oracle.finish()
    return exp


def main(argv: list[str] | None = None) -> int:
    """Write the SPEC outputs of an LR data file in the LR output format (Emit = Time)."""
    import argparse
    import sys

    # The package's own classes, not those of `__main__` when run with -m.
    from caesar.examples.linear_road import oracle as this
    from caesar.examples.linear_road.lr_output import format_row
    from caesar.examples.linear_road.records import (
        BadLine,
        ExpenditureQuery,
        read_historical,
        read_lr,
    )

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--lr-file", required=True)
    parser.add_argument("--historical", help="historical-tolls file (vid,day,xway,toll) for Type 3")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    historical = None
    if args.historical:
        wanted = {(q.vid, q.day, q.xway) for q in read_lr(args.lr_file, [])
                  if isinstance(q, ExpenditureQuery)}
        historical = read_historical(args.historical, wanted)
    bad: list[BadLine] = []
    counts: dict[str, int] = defaultdict(int)
    with open(args.out, "w", encoding="ascii") as target:
        def write(kind: str) -> Callable[[Any], None]:
            def sink(row: Any) -> None:
                counts[kind] += 1
                target.write(format_row(row))
                target.write("\n")
            return sink
        oracle = this.Oracle(historical, this.Outputs(write("tolls"), write("alerts"), None,
                                            write("balances"), write("expenditures"),
                                            lambda _a: counts.__setitem__("accidents", counts["accidents"] + 1)))
        for record in read_lr(args.lr_file, bad):
            oracle.feed(record)
        oracle.finish()
    print(f"{args.out}: " + ", ".join(f"{k} {v:,}" for k, v in counts.items())
          + f"; {len(bad)} unusable input line(s)", file=sys.stderr)
    for b in bad[:5]:
        print(f"  {b.where}: {b.reason}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
