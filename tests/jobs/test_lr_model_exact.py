"""The Linear Road models, run through the real CAESAR pipeline (embedded mode:
scheduler -> deriver -> router -> matcher processors), derive exactly the
outputs of src/caesar/examples/linear_road/SPEC.md as computed by the
independent oracle (which equals the public LR validator on a full public data
file): toll notifications, accident alerts, toll charges, account balances and
daily expenditures.

Inputs: the committed slice of a standard-load run (an accident that is
detected and cleared, positive tolls, charges, Type 2 and 3 queries), and
random little roads drawn by hypothesis (crowds at the toll threshold, LAV at
x.5, accidents, third cars, cars that share a second, re-entrant cars).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from caesar.examples.linear_road.check_model import (
    ACCOUNTS,
    MODEL,
    PER_SEGMENT,
    compile_models,
    diff,
    expected_rows,
    run_model,
)
from caesar.examples.linear_road.generator import GeneratorConfig, generate_with_history
from caesar.examples.linear_road.oracle import expected_outputs
from caesar.examples.linear_road.records import SAMPLE, read_historical, read_lr

from .lr_scenarios import scenarios


# model.caesar fans every report out to the 6 segment partitions that need
# it; model_per_segment.caesar partitions per road and direction and holds
# its contexts per segment (CONTEXTS PER seg). Both must equal the oracle.
@pytest.fixture(scope="module", params=[MODEL, PER_SEGMENT], ids=["fanout", "per_segment"])
def plans(request):
    return compile_models(request.param, ACCOUNTS)


def assert_exact(plans, records, historical) -> dict[str, int]:
    expected = expected_outputs(records, historical)
    run = run_model(records, historical, plans)
    assert run.dead_letters == 0
    counts = {}
    for name, rows in expected_rows(expected).items():
        result = diff(name, rows, run.outputs[name])
        bad = {k: result[k] for k in ("missing", "extra", "duplicates", "different")}
        assert bad == dict.fromkeys(bad, 0), (name, bad, result["examples"])
        counts[name] = len(rows)
    counts["positive tolls"] = expected.positive_tolls
    counts["cleared accidents"] = sum(a.cleared is not None for a in expected.accidents)
    counts["positive balances"] = sum(b.balance > 0 for b in expected.balances)
    return counts


def test_models_equal_the_oracle_on_the_standard_load_slice(plans):
    records = list(read_lr(SAMPLE))
    historical = read_historical(f"{SAMPLE}.tolls.dat")
    counts = assert_exact(plans, records, historical)
    # The slice exercises every rule.
    assert all(counts[k] > 0 for k in counts), counts


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_models_equal_the_oracle_on_random_roads(plans, scenario):
    records, historical = scenario
    assert_exact(plans, records, historical)


@pytest.mark.slow
def test_models_equal_the_oracle_on_two_expressways(plans):
    # 900 s: the accident of this seed is detected and cleared, every rule
    # runs (1200 s: 1.8x the reports, no rule more)
    records, historical = generate_with_history(
        GeneratorConfig(xways=2, duration_s=900, seed=2, segments=(78, 84)))
    counts = assert_exact(plans, records, historical)
    assert counts["AccidentAlert"] > 0 and counts["positive tolls"] > 0, counts
    assert counts["cleared accidents"] > 0, counts
