"""A plan whose match has no output fields (a context transition's marker:
`SWITCH CONTEXT on_duty PATTERN ShiftStart s`, nothing KEYED BY) writes no
value. Until session 43 the engine wrote one: the outputs' program arrays
hold a placeholder when empty, and the per-match loops ran over their
length, reading column 0 of a component that stores no column (the
uninitialised byte past its scratch row) into a sink row of no width. When
that byte happened to be 255 the read looked like an error without an
exception, and `process` raised "SystemError: returned NULL without setting
an exception" (tests/jobs/test_replay_stages.py failed about one run in
ten). Each fresh pipeline allocates its plans' scratch rows anew, so many
pipelines over a small input met that byte often (3 in 300 here before the
fix)."""

from __future__ import annotations

from caesar.examples import model_path
from caesar.examples.hospital_hygiene.generator import HygieneConfig, generate
from caesar.language import compile_model
from caesar.services.embedded.pipeline import EmbeddedPipeline


def _outcome(result) -> tuple:
    return (sorted(a.identity() for a in result.alerts),
            sorted((c.key, c.ts, c.contexts) for c in result.context_changes))


def test_transitions_without_fields_run_in_many_fresh_pipelines() -> None:
    plan = compile_model(model_path("hospital_hygiene"))
    transitions = [t.stage.plan for t in plan.transitions]
    assert any(not p.output.fields for p in transitions)  # the case under test
    events = list(generate(HygieneConfig(workers=2, hours=0.1, seed=3)))
    first = _outcome(EmbeddedPipeline(plan).run_values(events))
    assert first[1]  # the transitions fire: shifts start and end
    for _ in range(1500):
        assert _outcome(EmbeddedPipeline(plan).run_values(events)) == first
