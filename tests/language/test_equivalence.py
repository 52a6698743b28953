"""The optimized and unoptimized execution plans give the same alerts on the
same stream (STYLE.md: optimizer equivalence on real data), run through the
embedded pipeline (scheduler, deriver, router, matcher) with the reference
engine."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.language import compile_phases

from .streams import alerts_of

MODEL = """
MODEL equiv
TIME UNIT SECONDS
PARTITION BY seg
EVENT R(ts INT, vid INT, seg INT, spd INT) FROM TOPIC "r"
EVENT Alarm(ts INT, seg INT, level INT) FROM TOPIC "alarms"

-- A producer declared for every context that only congestion queries consume:
-- push-down narrows it to congestion.
DERIVE Slow(r.vid, r.seg, r.spd) PATTERN R r WHERE r.spd < 20 AND r.vid >= 0
-- A stateful producer: its matches may start before busy does, so push-down
-- must not narrow it.
DERIVE Pair(b.vid, b.spd) PATTERN SEQ(R a, R b) WHERE [vid] AND a.spd > b.spd WITHIN 10 SECONDS

DEFAULT CONTEXT calm {
  SWITCH CONTEXT busy PATTERN Alarm a WHERE a.level > 2
  DERIVE Fast(r.vid) PATTERN R r WHERE r.spd > 80
}
CONTEXT busy {
  SWITCH CONTEXT calm PATTERN Alarm a WHERE a.level <= 2
  DERIVE Crawl(s.vid, count(t) AS n)
    PATTERN SEQ(Slow s, Slow+ t FILTER(t.vid = s.vid))
    WHERE count(t) >= 2 AND s.spd < 15
    WITHIN 20 SECONDS
  DERIVE Braking(p.vid, p.spd) PATTERN Pair p
  DERIVE Gap(a.vid) PATTERN SEQ(R a, NOT R x, R b)
    WHERE [vid] AND x.spd > 50 AND a.spd < b.spd
    WITHIN 30 SECONDS
}
"""

reports = st.builds(lambda dt, vid, seg, spd: ("r", dt, {"vid": vid, "seg": seg, "spd": spd}),
                    st.integers(0, 3), st.integers(0, 1), st.integers(0, 1),
                    st.sampled_from([5, 10, 12, 30, 60, 90]))
alarms = st.builds(lambda dt, seg, level: ("alarms", dt, {"seg": seg, "level": level}),
                   st.integers(0, 3), st.integers(0, 1), st.sampled_from([1, 3, 4]))
events = st.lists(st.one_of(reports, reports, reports, alarms), max_size=80)


COMPILED = compile_phases(MODEL)


def test_the_optimizer_changes_the_plan() -> None:
    before = {s.plan.plan_id: s.contexts for s in COMPILED.unoptimized_execution().matcher_stages}
    after = {s.plan.plan_id: s.contexts for s in COMPILED.execution.matcher_stages}
    assert before["q1"] == ("calm", "busy") and after["q1"] == ("busy",)
    assert before["q2"] == after["q2"] == ("calm", "busy")  # stateful: not narrowed


@settings(max_examples=40, deadline=None, derandomize=True)
@given(events)
def test_optimized_and_unoptimized_plans_agree(stream) -> None:
    assert alerts_of(COMPILED.execution, stream) == \
        alerts_of(COMPILED.unoptimized_execution(), stream)
