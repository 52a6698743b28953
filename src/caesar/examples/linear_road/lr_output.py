"""The Linear Road output format: write it, read it, compare two files.

One line per output, comma-separated integers, in the layout the public LR
validator writes and compares (SPEC.md section 9):

    0,VID,Time,Emit,LAV,Toll                  toll notification
    1,Time,Emit,XWay,AccSeg,Dir,VID           accident alert
    2,Time,Emit,ResultTime,QID,Balance        account balance (Type 2 query)
    3,Time,Emit,QID,Toll                      daily expenditure (Type 3 query)

`Emit` is when the answer left the system, in simulated seconds: `Time` plus
the time the answer took (rounded up to whole seconds; LR wants Emit - Time <= 5).
The validator also writes an alternative Type 2 answer as type 5 (the balance
before the latest charge); `compare` skips those lines.

    python -m caesar.examples.linear_road.lr_output compare EXPECTED ACTUAL
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from caesar.examples.linear_road.oracle import AlertRow, BalanceRow, ExpenditureRow, TollRow

OutputRow = TollRow | AlertRow | BalanceRow | ExpenditureRow
TYPES = {0: "toll notification", 1: "accident alert", 2: "account balance",
         3: "daily expenditure"}
ALTERNATIVE_BALANCE = 5


def emit_time(time: int, latency_ms: float = 0.0) -> int:
    """Emit in simulated seconds: `time` plus the latency, rounded up."""
    return time + max(0, math.ceil(latency_ms / 1000.0))


def format_row(row: OutputRow, latency_ms: float = 0.0) -> str:
    emit = emit_time(row.time, latency_ms)
    if isinstance(row, TollRow):
        return f"0,{row.vid},{row.time},{emit},{row.lav},{row.toll}"
    if isinstance(row, AlertRow):
        return f"1,{row.time},{emit},{row.xway},{row.acc_seg},{row.dir},{row.vid}"
    if isinstance(row, BalanceRow):
        return f"2,{row.time},{emit},{row.time},{row.qid},{row.balance}"
    return f"3,{row.time},{emit},{row.qid},{row.toll}"


def write_output(rows: Iterable[OutputRow], target: TextIO,
                 latency_ms: Callable[[OutputRow], float] | None = None) -> int:
    """Rows as LR output lines (Emit from `latency_ms` of each row, else = Time)."""
    n = 0
    for row in rows:
        target.write(format_row(row, latency_ms(row) if latency_ms else 0.0))
        target.write("\n")
        n += 1
    return n


@dataclass(frozen=True)
class OutputLine:
    kind: int
    key: tuple[int, ...]  # identity of the answer
    value: tuple[int, ...]  # what must match
    emit_delay: int  # Emit - Time


def parse_output_line(line: str) -> OutputLine | None:
    """One output line; None for blank lines and the validator's type-5 alternatives."""
    parts = line.strip().split(",")
    if parts == [""]:
        return None
    v = [int(p) for p in parts]
    kind = v[0]
    if kind == 0 and len(v) == 6:
        return OutputLine(0, (v[1], v[2]), (v[4], v[5]), v[3] - v[2])
    if kind == 1 and len(v) == 7:
        return OutputLine(1, (v[6], v[1]), (v[3], v[4], v[5]), v[2] - v[1])
    if kind == 2 and len(v) == 6:
        return OutputLine(2, (v[4], v[1]), (v[3], v[5]), v[2] - v[1])
    if kind == 3 and len(v) == 5:
        return OutputLine(3, (v[3], v[1]), (v[4],), v[2] - v[1])
    if kind == ALTERNATIVE_BALANCE and len(v) == 6:
        return None
    raise ValueError(f"not an LR output line: {line.strip()!r}")


def read_output(source: str | Path) -> Iterator[OutputLine]:
    with open(source, encoding="ascii") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                parsed = parse_output_line(line)
            except ValueError as exc:
                raise ValueError(f"{source}:{number}: {exc}") from None
            if parsed is not None:
                yield parsed


@dataclass
class Comparison:
    expected: dict[int, int] = field(default_factory=dict)
    actual: dict[int, int] = field(default_factory=dict)
    missing: dict[int, int] = field(default_factory=dict)
    extra: dict[int, int] = field(default_factory=dict)
    different: dict[int, int] = field(default_factory=dict)
    duplicates: dict[int, int] = field(default_factory=dict)
    max_emit_delay: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(sum(d.values()) for d in
                       (self.missing, self.extra, self.different, self.duplicates))

    def summary(self) -> str:
        lines = [f"  {'type':<20}{'expected':>10}{'actual':>10}{'missing':>9}{'extra':>7}"
                 f"{'dup':>6}{'different':>11}"]
        for kind, name in TYPES.items():
            lines.append(f"  {kind} {name:<18}{self.expected.get(kind, 0):>10}"
                         f"{self.actual.get(kind, 0):>10}{self.missing.get(kind, 0):>9}"
                         f"{self.extra.get(kind, 0):>7}{self.duplicates.get(kind, 0):>6}"
                         f"{self.different.get(kind, 0):>11}")
        lines.append(f"  max Emit - Time of the actual answers: {self.max_emit_delay} s")
        lines.extend(f"  e.g. {e}" for e in self.examples)
        lines.append("RESULT: " + ("zero differences" if self.ok else "DIFFERENCES FOUND"))
        return "\n".join(lines)


def compare(expected: Iterable[OutputLine], actual: Iterable[OutputLine],
            examples: int = 10) -> Comparison:
    """Match answers on their identity per type, compare their values (not Emit)."""
    result = Comparison()
    want: dict[tuple[int, tuple[int, ...]], tuple[int, ...]] = {}
    for line in expected:
        want[(line.kind, line.key)] = line.value
        result.expected[line.kind] = result.expected.get(line.kind, 0) + 1
    seen: set[tuple[int, tuple[int, ...]]] = set()

    def note(table: dict[int, int], kind: int, text: str) -> None:
        table[kind] = table.get(kind, 0) + 1
        if len(result.examples) < examples:
            result.examples.append(text)

    for line in actual:
        result.actual[line.kind] = result.actual.get(line.kind, 0) + 1
        result.max_emit_delay = max(result.max_emit_delay, line.emit_delay)
        ident = (line.kind, line.key)
        if ident in seen:
            note(result.duplicates, line.kind, f"duplicate {ident}")
            continue
        seen.add(ident)
        value = want.get(ident)
        if value is None:
            note(result.extra, line.kind, f"extra {ident} {line.value}")
        elif value != line.value:
            note(result.different, line.kind, f"different {ident}: expected {value}, "
                                              f"got {line.value}")
    for ident in want.keys() - seen:
        note(result.missing, ident[0], f"missing {ident} {want[ident]}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    cmp = sub.add_parser("compare", help="compare two LR output files (Emit not compared)")
    cmp.add_argument("expected")
    cmp.add_argument("actual")
    args = parser.parse_args(argv)
    result = compare(read_output(args.expected), read_output(args.actual))
    print(f"Linear Road output: {args.actual} against {args.expected}")
    print(result.summary())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
