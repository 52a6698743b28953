from service_plans import pos, two_context_plan

from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.reference import ReferenceEngine


def run(events, **kw):
    pipe = EmbeddedPipeline(two_context_plan(**kw), engine_factory=ReferenceEngine, batch_size=3)
    return pipe.run_values(events)


def test_two_contexts_end_to_end():
    events = [
        pos(1, 1, 7, 90.0),   # clear: Fast
        pos(2, 2, 7, 30.0),   # clear: initiates congestion at 2 (holds for t > 2)
        pos(2, 3, 7, 85.0),   # same ts: still clear -> Fast
        pos(3, 4, 7, 10.0),   # congestion: Toll + SlowToll
        pos(3, 9, 8, 99.0),   # other segment, clear all along
        pos(4, 5, 7, 70.0),   # congestion: Toll; terminates at 4 (window (2, 4])
        pos(5, 6, 7, 95.0),   # clear again: Fast
    ]
    result = run(events)
    got = sorted((a.event_type, a.end_ts, a.fields.get("vid")) for a in result.alerts)
    assert got == sorted([("Fast", 1, 1), ("Fast", 2, 3), ("Toll", 3, 4), ("SlowToll", 3, 4),
                          ("Toll", 4, 5), ("Fast", 5, 6), ("Fast", 3, 9)])
    changes = [(c.key, c.ts, c.contexts) for c in result.context_changes]
    assert changes == [("7", 2, ("congestion",)), ("7", 4, ("clear",))]
    assert result.dead_letters == []
