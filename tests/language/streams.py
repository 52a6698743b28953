"""A plan run on a made-up stream through the embedded pipeline (scheduler,
deriver, router, matcher): its alerts, comparable across plans and engines.
The optimizer's equivalence tests (test_equivalence, test_view_merging)."""

from __future__ import annotations

from typing import Any

from caesar.plans.execution import ExecutionPlan

# (topic, ts step from the record before, fields without ts)
Stream = list[tuple[str, int, dict[str, Any]]]


def alerts_of(plan: ExecutionPlan, stream: Stream, engine: str = "reference") -> list[tuple]:
    """The sorted alerts of `plan` on `stream` ("reference" or "cython" engine);
    no record may be a dead letter."""
    from caesar.services.common.messages import InputRecord
    from caesar.services.embedded.pipeline import EmbeddedPipeline
    from caesar.services.matcher.reference import ReferenceEngine

    pipe = EmbeddedPipeline(plan, engine_factory=ReferenceEngine) if engine == "reference" \
        else EmbeddedPipeline(plan)
    ts = 0
    records = []
    for offset, (topic, dt, value) in enumerate(stream):
        ts += dt
        records.append(InputRecord(topic, 0, offset, {"ts": ts, **value}))
    pipe.feed(records)
    pipe.finish()
    assert not pipe.result.dead_letters
    return sorted((a.event_type, a.key, a.start_ts, a.end_ts, tuple(sorted(a.fields.items())))
                  for a in pipe.result.alerts)
