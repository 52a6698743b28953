"""The Linear Road model, run through the real CAESAR pipeline (embedded mode:
scheduler -> deriver -> router -> matcher processors), derives exactly the
toll notifications and accident alerts of src/caesar/examples/linear_road/SPEC.md, as
computed by the independent oracle (src/caesar/examples/linear_road/oracle.py).

Input is the generator's, fanned out per segment as the Spark producer sends it
(`produce --segment-fanout`, src/caesar/examples/linear_road/partitioning.py). The small run
has an accident that clears and one that does not; the slow one is 2
expressways with 4 accidents that clear; the overlapping run has 3 accidents
per direction, several of them near one segment at once (the keyed accident
context holds until the last clears; alerts name the nearest).
"""

from __future__ import annotations

from collections import Counter

import pytest

from caesar.examples import model_path
from caesar.examples.linear_road.generator import GeneratorConfig, generate
from caesar.examples.linear_road.oracle import ALERT_FIELDS, TOLL_FIELDS, Expected, expected_outputs
from caesar.examples.linear_road.partitioning import wire_records
from caesar.language import compile_model
from caesar.services.embedded.pipeline import EmbeddedPipeline

MODEL = model_path("linear_road")
# The same rules without the segment fan-out: partitions per road and
# direction, contexts per segment (CONTEXTS PER seg).
PER_SEGMENT = MODEL.with_name("model_per_segment.caesar")
MODELS = [pytest.param(MODEL, id="fanout"), pytest.param(PER_SEGMENT, id="per_segment")]


def overlapping_near_accidents(expected: Expected) -> int:
    """Pairs of accidents that both hold at some time within 4 segments."""
    acc = expected.accidents
    return sum(1 for i, a in enumerate(acc) for b in acc[i + 1:]
               if (a.xway, a.dir) == (b.xway, b.dir)
               and abs(a.pos // 5280 - b.pos // 5280) <= 4
               and a.detected < b.cleared and b.detected < a.cleared)


def compare(config: GeneratorConfig, *, overlapping: bool = False, model=MODEL
            ) -> dict[str, Counter]:
    reports = list(generate(config))
    expected = expected_outputs(reports)
    if overlapping:
        assert overlapping_near_accidents(expected) > 0
    plan = compile_model(model)
    fanout = "pseg" in plan.partition_by
    values = [record for r in reports for _, record in wire_records(r, fanout=fanout)]
    result = EmbeddedPipeline(plan).run_values(values, topic="lr-position-reports")
    assert result.dead_letters == []
    got = {"TollNotification": Counter(), "AccidentAlert": Counter()}
    fields = {"TollNotification": TOLL_FIELDS, "AccidentAlert": ALERT_FIELDS}
    for alert in result.alerts:
        got[alert.event_type][tuple(int(alert.fields[f]) for f in fields[alert.event_type])] += 1
    want = {"TollNotification": Counter(tuple(r) for r in expected.tolls),
            "AccidentAlert": Counter(tuple(r) for r in expected.alerts)}
    # The run must exercise every rule: non-zero tolls and accident alerts.
    assert sum(1 for t in expected.tolls if t.toll > 0) > 0
    assert expected.alerts and expected.accidents
    return {f"{kind} {side}": diff for kind in want
            for side, diff in (("missing", want[kind] - got[kind]),
                               ("extra", got[kind] - want[kind]))}


def assert_exact(diffs: dict[str, Counter]) -> None:
    shown = {k: sorted(v)[:5] for k, v in diffs.items() if v}
    assert not shown, f"model differs from the oracle: {shown}"


@pytest.mark.parametrize("model", MODELS)
def test_model_equals_oracle_on_a_small_run(model) -> None:
    assert_exact(compare(GeneratorConfig(xways=1, duration_s=600, cars_per_direction=300,
                                         seed=1), model=model))


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_model_equals_oracle_on_a_larger_run(model) -> None:
    assert_exact(compare(GeneratorConfig(xways=2, duration_s=900, cars_per_direction=400,
                                         seed=7), model=model))


@pytest.mark.parametrize("model", MODELS)
def test_model_equals_oracle_with_overlapping_accidents(model) -> None:
    assert_exact(compare(GeneratorConfig(xways=1, duration_s=600, cars_per_direction=300,
                                         seed=5, accidents_per_direction=3), overlapping=True,
                         model=model))
