"""Quick loop for the Linear Road models: run model.caesar and accounts.caesar
in embedded mode (one process, no Kafka, no Spark) on generated or LR-file
input and compare every output with the Python oracle of SPEC.md.

    python -m caesar.examples.linear_road.check_model --generate duration_s=600,scale=0.1,seed=1
    python -m caesar.examples.linear_road.check_model --lr-file data.lr --historical data.lr.tolls.dat

The real check is the Spark validator on the Kafka pipeline; this one is for
iterating on the model in seconds (and for the long bench runs).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caesar.examples import model_path
from caesar.examples.linear_road import oracle
from caesar.examples.linear_road.partitioning import MS_PER_S, wire_records
from caesar.examples.linear_road.records import (
    BadLine,
    BalanceQuery,
    ExpenditureQuery,
    LrRecord,
    PositionReport,
    read_historical,
    read_lr,
)

if TYPE_CHECKING:
    from caesar.plans.execution import ExecutionPlan
    from caesar.services.common.messages import Alert

MODEL = model_path("linear_road")
ACCOUNTS = MODEL.with_name("accounts.caesar")
# The same rules without the 6x segment fan-out (CONTEXTS PER seg).
PER_SEGMENT = MODEL.with_name("model_per_segment.caesar")
INPUT_TOPIC = "lr-position-reports"
QUERY_TOPIC = "lr-queries"
CHARGE_TOPIC = "lr-toll-charges"
QUERY_TS_OFFSET = MS_PER_S - 1  # queries: the last millisecond of their second
OUTPUTS: dict[str, tuple[str, ...]] = {
    "TollNotification": oracle.TOLL_FIELDS, "AccidentAlert": oracle.ALERT_FIELDS,
    "TollCharge": oracle.CHARGE_FIELDS, "AccountBalance": oracle.BALANCE_FIELDS,
    "DailyExpenditure": oracle.EXPENDITURE_FIELDS}
# Fields that identify a record of each type (SPEC 8).
KEYS = {"TollNotification": ("vid", "time"), "AccidentAlert": ("vid", "time"),
        "TollCharge": ("vid", "time"), "AccountBalance": ("qid", "time"),
        "DailyExpenditure": ("qid", "time")}


@dataclass
class ModelRun:
    outputs: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {name: [] for name in OUTPUTS})
    dead_letters: int = 0
    records_in: int = 0
    seconds: float = 0.0


def query_records(queries: Iterable[BalanceQuery | ExpenditureQuery],
                  historical: Mapping[tuple[int, int, int], int]) -> list[dict[str, Any]]:
    """Input records of accounts.caesar for the queries: each query at the last
    millisecond of its second, and the historical tolls of the cars that ask
    Type 3 queries (all their days and expressways), at ts 0."""
    out: list[dict[str, Any]] = []
    askers = set()
    for q in queries:
        ts = q.time * MS_PER_S + QUERY_TS_OFFSET
        if isinstance(q, BalanceQuery):
            out.append({"type": "AccountBalanceQuery", "ts": ts, "time": q.time, "vid": q.vid,
                        "qid": q.qid})
        else:
            askers.add(q.vid)
            out.append({"type": "DailyExpenditureQuery", "ts": ts, "time": q.time, "vid": q.vid,
                        "qid": q.qid, "xway": q.xway, "day": q.day})
    history = [{"type": "HistoricalToll", "ts": 0, "vid": vid, "day": day, "xway": xway,
                "toll": toll}
               for (vid, day, xway), toll in sorted(historical.items()) if vid in askers]
    return history + out


def compile_models(model: Path = MODEL, accounts: Path = ACCOUNTS
                   ) -> tuple[ExecutionPlan, ExecutionPlan]:
    from caesar.language import compile_model

    return compile_model(model), compile_model(accounts)


def run_model(records: Iterable[LrRecord], historical: Mapping[tuple[int, int, int], int],
              plans: tuple[ExecutionPlan, ExecutionPlan] | None = None, batch_size: int = 5000,
              progress: Callable[[str], None] | None = None) -> ModelRun:
    """Both models' outputs per type (fields of SPEC.md section 8), in embedded mode
    (`plans`: compiled model.caesar and accounts.caesar, compiled here if None)."""
    started = time.monotonic()
    run = ModelRun()
    model_plan, accounts_plan = plans or compile_models()
    queries: list[BalanceQuery | ExpenditureQuery] = []

    def reports() -> Iterator[PositionReport]:
        for record in records:
            if isinstance(record, PositionReport):
                yield record
            else:
                queries.append(record)

    charges = _run_traffic(model_plan, reports(), run, batch_size, progress)
    account_input = query_records(queries, historical) + charges
    account_input.sort(key=lambda r: r["ts"])  # stable: history first, charges before queries
    _run_accounts(accounts_plan, account_input, run, batch_size)
    run.seconds = time.monotonic() - started
    return run


def _keep(run: ModelRun, alerts: Sequence[Alert]) -> list[dict[str, Any]]:
    """Record the outputs in `run`; return the toll charges as accounts input."""
    charges = []
    for alert in alerts:
        fields = OUTPUTS.get(alert.event_type)
        if fields is None:
            continue
        run.outputs[alert.event_type].append({f: alert.fields.get(f) for f in fields})
        if alert.event_type == "TollCharge":
            charges.append({"type": "TollCharge", **alert.fields})
    return charges


def _run_traffic(plan: ExecutionPlan, reports: Iterable[PositionReport], run: ModelRun,
                 batch_size: int, progress: Callable[[str], None] | None
                 ) -> list[dict[str, Any]]:
    """model.caesar on the reports as the producer sends them; its toll charges."""
    from caesar.services.common.messages import InputRecord
    from caesar.services.embedded.pipeline import EmbeddedPipeline

    pipe = EmbeddedPipeline(plan, batch_size=batch_size)
    fanout = "pseg" in plan.partition_by
    charges: list[dict[str, Any]] = []
    batch: list[InputRecord] = []
    for _key, record in wire_records(reports, fanout=fanout):
        batch.append(InputRecord(INPUT_TOPIC, 0, run.records_in,
                                 {**record, "type": "PositionReport"}))
        run.records_in += 1
        if len(batch) >= batch_size:
            charges += _keep(run, pipe.feed(batch))
            batch = []
            if progress and run.records_in % (batch_size * 200) == 0:
                progress(f"{run.records_in:,} records, simulated second {record['time']}")
    charges += _keep(run, pipe.feed(batch)) if batch else []
    charges += _keep(run, pipe.finish())
    run.dead_letters += len(pipe.result.dead_letters)
    return charges


def _run_accounts(plan: ExecutionPlan, account_input: list[dict[str, Any]], run: ModelRun,
                  batch_size: int) -> None:
    """accounts.caesar on the queries, historical tolls and charges (ts order)."""
    from caesar.services.common.messages import InputRecord
    from caesar.services.embedded.pipeline import EmbeddedPipeline

    acc = EmbeddedPipeline(plan, batch_size=batch_size)
    recs = [InputRecord(CHARGE_TOPIC if r["type"] == "TollCharge" else QUERY_TOPIC, 0, i, r)
            for i, r in enumerate(account_input)]
    for i in range(0, len(recs), batch_size):
        _keep(run, acc.feed(recs[i:i + batch_size]))
    _keep(run, acc.finish())
    run.dead_letters += len(acc.result.dead_letters)


def expected_rows(expected: oracle.Expected) -> dict[str, list[tuple]]:
    return {"TollNotification": list(expected.tolls), "AccidentAlert": list(expected.alerts),
            "TollCharge": list(expected.charges), "AccountBalance": list(expected.balances),
            "DailyExpenditure": list(expected.expenditures)}


def diff(name: str, expected: list[tuple], actual: list[dict[str, Any]]) -> dict[str, Any]:
    fields = OUTPUTS[name]
    key_idx = [fields.index(k) for k in KEYS[name]]
    want = {tuple(row[i] for i in key_idx): tuple(row) for row in expected}
    got_counts = Counter(tuple(a[k] for k in KEYS[name]) for a in actual)
    got = {tuple(a[k] for k in KEYS[name]): tuple(a[f] for f in fields) for a in actual}
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    different = sorted(k for k in set(want) & set(got) if tuple(want[k]) != got[k])
    return {
        "expected": len(want), "actual": len(actual), "missing": len(missing),
        "extra": len(extra), "duplicates": sum(1 for n in got_counts.values() if n > 1),
        "different": len(different),
        "examples": {
            "missing": [dict(zip(fields, want[k], strict=True)) for k in missing[:3]],
            "extra": [dict(zip(fields, got[k], strict=True)) for k in extra[:3]],
            "different (expected, actual)": [
                {f: (e, a) for f, e, a in zip(fields, want[k], got[k], strict=True)
                 if e != a or f in KEYS[name]} for k in different[:3]],
        },
    }


def compare(expected: oracle.Expected, run: ModelRun,
            out: Callable[[str], None] = print) -> bool:
    ok = run.dead_letters == 0
    for name, rows in expected_rows(expected).items():
        result = diff(name, rows, run.outputs[name])
        ok = ok and not any(result[k] for k in ("missing", "extra", "duplicates", "different"))
        counts = ", ".join(f"{k} {result[k]}" for k in
                           ("expected", "actual", "missing", "extra", "duplicates", "different"))
        out(f"{name}: {counts}")
        for kind, examples in result["examples"].items():
            for example in examples:
                out(f"  {kind}: {example}")
    out(f"positive tolls expected: {expected.positive_tolls}, accidents: "
        f"{len(expected.accidents)}, dead letters: {run.dead_letters}")
    out("RESULT: " + ("zero differences" if ok else "DIFFERENCES FOUND"))
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--lr-file")
    source.add_argument("--generate", help="generator settings, e.g. duration_s=600,scale=0.1")
    parser.add_argument("--historical", help="historical-tolls file of --lr-file")
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--accounts", type=Path, default=ACCOUNTS)
    args = parser.parse_args(argv)
    bad: list[BadLine] = []
    if args.lr_file:
        records = list(read_lr(args.lr_file, bad))
        wanted = {(q.vid, q.day, q.xway) for q in records if isinstance(q, ExpenditureQuery)}
        askers = {vid for vid, _, _ in wanted}
        historical = read_historical(args.historical, vids=askers) if args.historical else {}
    else:
        from caesar.examples.linear_road.generator import generate_with_history, parse_spec

        records, historical = generate_with_history(parse_spec(args.generate))
    for b in bad[:5]:
        print(f"dead letter {b.where}: {b.reason}")
    expected = oracle.expected_outputs(records, historical)
    run = run_model(records, historical, compile_models(args.model, args.accounts),
                    progress=lambda text: print(f"[model] {text}", flush=True))
    print(f"{len(records):,} input records ({len(bad)} unusable lines), "
          f"{run.records_in:,} wire records, model run {run.seconds:.0f} s")
    return 0 if compare(expected, run) else 1


if __name__ == "__main__":
    sys.exit(main())
