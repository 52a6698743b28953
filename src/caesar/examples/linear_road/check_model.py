"""Quick loop for the Linear Road model: run it in embedded mode (one process, no
Kafka, no Spark) on generated or LR-file reports and compare its toll
notifications and accident alerts with the Python oracle of SPEC.md.

    python -m caesar.examples.linear_road.check_model --generate duration_s=480,cars_per_direction=300,seed=1
    python -m caesar.examples.linear_road.check_model --lr-file src/caesar/examples/linear_road/data/sample-L1-480s-seed1.lr

The real check is the Spark validator on the Kafka pipeline; this one is for
iterating on the model in seconds.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caesar.examples.linear_road import oracle
from caesar.examples.linear_road.generator import generate
from caesar.examples.linear_road.partitioning import wire_records
from caesar.examples.linear_road.records import PositionReport, read_lr

if TYPE_CHECKING:
    from caesar.services.common.messages import Alert

MODEL = Path(__file__).resolve().parent / "model.caesar"
OUTPUTS = {"TollNotification": oracle.TOLL_FIELDS, "AccidentAlert": oracle.ALERT_FIELDS}


def run_model(reports: list[PositionReport], model: Path = MODEL, fanout: bool = False,
              batch_size: int = 5000) -> dict[str, list[dict[str, Any]]]:
    """The model's outputs per type (fields of SPEC.md section 5), in embedded mode."""
    from caesar.language import compile_model
    from caesar.services.common.messages import InputRecord
    from caesar.services.embedded.pipeline import EmbeddedPipeline

    plan = compile_model(model)
    pipe = EmbeddedPipeline(plan, batch_size=batch_size)
    outputs: dict[str, list[dict[str, Any]]] = {name: [] for name in OUTPUTS}

    def keep(alerts: list[Alert]) -> None:
        for alert in alerts:
            if alert.event_type in outputs:
                outputs[alert.event_type].append(
                    {f: alert.fields.get(f) for f in OUTPUTS[alert.event_type]})

    batch: list[InputRecord] = []
    offset = 0
    for report in reports:
        for _key, record in wire_records(report, fanout):
            record = {**record, "type": "PositionReport"}
            batch.append(InputRecord("lr-position-reports", 0, offset, record))
            offset += 1
        if len(batch) >= batch_size:
            keep(pipe.feed(batch))
            batch = []
    if batch:
        keep(pipe.feed(batch))
    keep(pipe.finish())
    return outputs


def diff(expected: Sequence[tuple[Any, ...]], actual: list[dict[str, Any]], fields: tuple[str, ...]
         ) -> dict[str, Any]:
    want = {(row[0], row[1]): row for row in expected}
    got_counts = Counter((a["vid"], a["time"]) for a in actual)
    got = {(a["vid"], a["time"]): tuple(a[f] for f in fields) for a in actual}
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
                 if e != a or f in ("vid", "time")} for k in different[:3]],
        },
    }


def main(argv: list[str] | None = None) -> int:
    from caesar.examples.linear_road.validate import parse_generator_spec

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--lr-file")
    source.add_argument("--generate", help="generator settings, e.g. duration_s=480,seed=1")
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--no-fanout", dest="fanout", action="store_false",
                        help="send reports once with pseg = -1 (the model partitions by pseg)")
    args = parser.parse_args(argv)
    reports = list(read_lr(args.lr_file) if args.lr_file
                   else generate(parse_generator_spec(args.generate)))
    expected = oracle.expected_outputs(reports)
    actual = run_model(reports, args.model, args.fanout)
    ok = True
    for name, rows in (("TollNotification", expected.tolls), ("AccidentAlert", expected.alerts)):
        result = diff(rows, actual[name], OUTPUTS[name])
        ok = ok and not any(result[k] for k in ("missing", "extra", "duplicates", "different"))
        counts = ", ".join(f"{k} {result[k]}" for k in
                           ("expected", "actual", "missing", "extra", "duplicates", "different"))
        print(f"{name}: {counts}")
        for kind, examples in result["examples"].items():
            for example in examples:
                print(f"  {kind}: {example}")
    print(f"positive tolls expected: {sum(t.toll > 0 for t in expected.tolls)}, "
          f"accidents: {len(expected.accidents)}")
    print("RESULT: " + ("zero differences" if ok else "DIFFERENCES FOUND"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
