"""The Python session: what it returns per call adds up to the whole run's
output, whatever the chunking; contexts() agrees with the context changes."""

from __future__ import annotations

from itertools import accumulate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import caesar

MODEL = caesar.compile("""
MODEL s
TIME UNIT SECONDS
PARTITION BY car
EVENT Report(ts INT, car INT, speed INT)
DEFAULT CONTEXT calm {
  SWITCH CONTEXT fast PATTERN Report r WHERE r.speed > 100
}
CONTEXT fast {
  SWITCH CONTEXT calm PATTERN Report r WHERE r.speed <= 100
  DERIVE Speeding(a.car, b.speed) PATTERN SEQ(Report a, Report b) WHERE [car] WITHIN 5 SECONDS
}
""")



def _reports(rows: list[tuple[int, int, int]]) -> list[dict]:
    """(time gap, car, speed) rows -> reports in event-time order."""
    times = accumulate(gap for gap, _, _ in rows)
    return [{"type": "Report", "ts": t, "car": car, "speed": speed}
            for t, (_, car, speed) in zip(times, rows, strict=True)]


events = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(50, 150)),
                  max_size=40).map(_reports)


@settings(max_examples=60, deadline=None)
@given(events, st.lists(st.integers(1, 7), min_size=1, max_size=10))
def test_chunked_pushes_add_up_to_one_run(evs: list[dict], cuts: list[int]) -> None:
    whole = list(MODEL.session().run(evs))
    session = MODEL.session()
    got, i, k = [], 0, 0
    while i < len(evs):
        n = cuts[k % len(cuts)]
        got += session.push(evs[i:i + n]).alerts
        i, k = i + n, k + 1
    got += session.finish().alerts
    assert [a.identity() for a in got] == [a.identity() for a in whole]


@settings(max_examples=40, deadline=None)
@given(events)
def test_contexts_follow_the_context_changes(evs: list[dict]) -> None:
    session = MODEL.session()
    changes = session.push(evs).context_changes + session.finish().context_changes
    last: dict[str, tuple[str, ...]] = {}
    for change in changes:
        last[change.key] = change.contexts
    for car in {str(e["car"]) for e in evs}:
        assert session.contexts(car) == last.get(car, ("calm",))


def test_a_finished_session_says_so() -> None:
    session = MODEL.session()
    session.finish()
    with pytest.raises(caesar.CaesarError, match="finished"):
        session.push([])


@settings(max_examples=30, deadline=None)
@given(events, st.integers(1, 7))
def test_a_session_holds_none_of_what_it_handed_over(evs: list[dict], n: int) -> None:
    """Every call's outputs are the caller's: the pipeline keeps none (a
    session streaming for days would otherwise hold every alert it made),
    and its count of alerts still covers them all."""
    session = MODEL.session(batch_size=n)
    got = list(session.run(evs))
    result = session._pipeline.result
    assert (result.alerts, result.context_changes, result.dead_letters) == ([], [], [])
    assert result.alerts_out == len(got) == len(list(MODEL.session().run(evs)))
