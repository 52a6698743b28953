"""accounts.caesar (the toll-account table, SPEC.md section 7) against the
public LR validator's own numbers: its input is the validator's toll charges
(the `assessToll` lines of its `*-out-DEBUG` files) and the Type 2 queries of
the LR file, and every AccountBalance it answers is compared with the
validator's Type 2 line for that query (`2,Time,Emit,ResultTime,QID,Balance`
in its `out` file). Embedded mode, one process.

    python -m caesar.examples.linear_road.check_accounts \\
        --lr-file /work/lrdata/L1.dat --validator /work/lrdata/val/run1 [--until 3600]

The validator's Type 5 lines (the balance without the latest charge) are not
compared: CAESAR answers exactly (SPEC 11, deviation 2).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caesar.examples.linear_road.check_model import ACCOUNTS, CHARGE_TOPIC, QUERY_TOPIC
from caesar.examples.linear_road.partitioning import MS_PER_S

if TYPE_CHECKING:
    from caesar.plans.execution import ExecutionPlan

QUERY_TS_OFFSET = MS_PER_S - 1


def validator_charges(validator: Path, until: int) -> Iterator[dict[str, Any]]:
    """`assessToll,Time,VID,count,Toll` lines of the validator's DEBUG files."""
    for path in sorted(validator.glob("*-out-DEBUG")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if line.startswith("assessToll,"):
                    _, t, vid, _, toll = line.rstrip("\n").split(",")
                    if int(t) < until:
                        yield {"type": "TollCharge", "ts": int(t) * MS_PER_S, "vid": int(vid),
                               "time": int(t), "toll": int(toll)}


def balance_queries(lr_file: Path, until: int) -> Iterator[dict[str, Any]]:
    """Type 2 lines of an LR file (Type, Time, VID, ..., QID in field 10)."""
    with lr_file.open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("2,"):
                f = line.split(",")
                t = int(f[1])
                if t < until:
                    yield {"type": "AccountBalanceQuery", "ts": t * MS_PER_S + QUERY_TS_OFFSET,
                           "time": t, "vid": int(f[2]), "qid": int(f[9])}


def validator_balances(validator: Path, until: int) -> dict[tuple[int, int], int]:
    """(qid, time) -> balance of the validator's Type 2 answers."""
    out: dict[tuple[int, int], int] = {}
    with (validator / "out").open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("2,"):
                _, t, _, _, qid, balance = line.rstrip("\n").split(",")
                if int(t) < until:
                    out[(int(qid), int(t))] = int(balance)
    return out


@functools.cache
def accounts_plan() -> ExecutionPlan:
    from caesar.language import compile_model

    return compile_model(ACCOUNTS)


def run_accounts(events: list[dict[str, Any]], batch_size: int = 5000
                 ) -> dict[tuple[int, int], list[int]]:
    """accounts.caesar on `events` (ts order): (qid, time) -> balances answered."""
    from caesar.services.common.messages import InputRecord
    from caesar.services.embedded.pipeline import EmbeddedPipeline

    pipe = EmbeddedPipeline(accounts_plan(), batch_size=batch_size)
    answers: dict[tuple[int, int], list[int]] = {}
    records = [InputRecord(CHARGE_TOPIC if e["type"] == "TollCharge" else QUERY_TOPIC, 0, i, e)
               for i, e in enumerate(events)]
    batches = [pipe.feed(records[i:i + batch_size]) for i in range(0, len(records), batch_size)]
    for alerts in [*batches, pipe.finish()]:
        for a in alerts:
            if a.event_type == "AccountBalance":
                answers.setdefault((a.fields["qid"], a.fields["time"]), []).append(
                    a.fields["balance"])
    if pipe.result.dead_letters:
        raise SystemExit(f"{len(pipe.result.dead_letters)} dead letters, e.g. "
                         f"{pipe.result.dead_letters[0]}")
    return answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lr-file", type=Path, required=True)
    parser.add_argument("--validator", type=Path, required=True,
                        help="the validator's output directory (out, *-out-DEBUG)")
    parser.add_argument("--until", type=int, default=10_800, help="simulated seconds")
    args = parser.parse_args(argv)
    started = time.monotonic()
    charges = list(validator_charges(args.validator, args.until))
    queries = list(balance_queries(args.lr_file, args.until))
    events = sorted(charges + queries, key=lambda e: e["ts"])  # stable: charges first
    want = validator_balances(args.validator, args.until)
    print(f"{len(charges):,} validator charges (total {sum(c['toll'] for c in charges):,}), "
          f"{len(queries):,} Type 2 queries, {len(want):,} validator answers "
          f"({sum(b > 0 for b in want.values()):,} positive), Time < {args.until}", flush=True)
    got = run_accounts(events)
    twice = sum(len(v) > 1 for v in got.values())
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    different = sorted(k for k in set(want) & set(got) if got[k][0] != want[k])
    print(f"AccountBalance: expected {len(want):,}, actual {sum(map(len, got.values())):,}, "
          f"missing {len(missing)}, extra {len(extra)}, duplicates {twice}, "
          f"different {len(different)}  ({time.monotonic() - started:.0f} s)")
    for k in different[:5]:
        print(f"  different (qid, time) {k}: validator {want[k]}, model {got[k][0]}")
    for k in missing[:3]:
        print(f"  missing (qid, time) {k}")
    ok = not (missing or extra or twice or different)
    print("RESULT: " + ("zero differences" if ok else "DIFFERENCES FOUND"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
