"""View merging (src/caesar/language/optimizer/view_merging.py): readers of
a filtered copy of another type read that type through the filter. The
merged plan must give the alerts of the plan without the rule, on random
streams with ties (hypothesis; reference engine unmerged, both engines
merged), and the rule must leave alone every view it cannot fold."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.language import RULES, compile_phases
from caesar.plans.execution import ExecutionPlan
from caesar.plans.expr import render
from caesar.plans.pattern import PatternPlan

from .streams import alerts_of

WITHOUT = tuple(r for r in RULES if r[0] != "view_merging")

MODEL = """
MODEL views
TIME UNIT SECONDS
PARTITION BY seg
EVENT R(ts INT, vid INT, seg INT, spd INT, lane INT) FROM TOPIC "r"
EVENT Alarm(ts INT, seg INT, level INT) FROM TOPIC "alarms"

DERIVE Entry(r.ts, r.vid, r.seg, r.spd, r.lane)
  PATTERN SEQ(NOT R p, R r) WHERE [vid] AND p.lane = r.lane WITHIN 5 SECONDS
-- Views: Moving of Entry, Fast of Moving (a view of a view).
DERIVE Moving(e.vid, e.seg, e.spd) PATTERN Entry e WHERE e.lane != 2
DERIVE Fast(m.vid, m.seg, m.spd) PATTERN Moving m WHERE m.spd > 30 AND m.vid >= 0

DERIVE Pass(a.vid, b.vid AS other)
  PATTERN SEQ(Moving a, Fast b) WHERE a.seg = b.seg AND a.vid != b.vid WITHIN 6 SECONDS
DERIVE Lone(b.vid) PATTERN SEQ(R a, NOT Moving x, R b) WHERE [vid] WITHIN 4 SECONDS
DERIVE Next(a.vid, b.spd) PATTERN SEQ(Fast a, Moving b) WHERE [vid] WITHIN 8 SECONDS
  STRATEGY skip_till_next_match
-- Not merged: a Kleene component, a contiguity strategy (a filtered-out
-- Entry would break the run where Moving never had it).
DERIVE Burst(a.vid, count(b) AS n)
  PATTERN SEQ(Moving a, Moving+ b FILTER(b.vid = a.vid)) WITHIN 6 SECONDS
DERIVE Run(d.vid) PATTERN SEQ(Moving c, Moving d) WHERE [vid] WITHIN 9 SECONDS
  STRATEGY partition_contiguity

DEFAULT CONTEXT calm {
  SWITCH CONTEXT busy PATTERN Alarm a WHERE a.level > 2
}
CONTEXT busy {
  SWITCH CONTEXT calm PATTERN Alarm a WHERE a.level <= 2
  -- A view of one context: not merged (only the views of every context are).
  DERIVE Slowed(e.vid, e.seg) PATTERN Entry e WHERE e.spd < 10
  DERIVE Pair(s.vid, f.vid AS fast) PATTERN SEQ(Slowed s, Fast f) WITHIN 6 SECONDS
  DERIVE Seen(m.vid, m.spd) PATTERN Moving m WHERE m.spd > 10
}
"""

MERGED = compile_phases(MODEL).execution
UNMERGED = compile_phases(MODEL, rules=WITHOUT).execution


def _reads(plan: ExecutionPlan) -> dict[str, tuple[tuple[str, ...], ...]]:
    """Output type -> the types each component of its stages reads."""
    out: dict[str, tuple[tuple[str, ...], ...]] = {}
    for s in plan.matcher_stages + plan.deriver_stages:
        p = s.plan
        if isinstance(p, PatternPlan) and p.output is not None:
            out[p.output.event_type] = tuple(c.types for c in p.components)
    return out


def test_readers_read_the_source_through_the_filters() -> None:
    merged, unmerged = _reads(MERGED), _reads(UNMERGED)
    assert unmerged["Pass"] == (("Moving",), ("Fast",))
    assert merged["Pass"] == (("Entry",), ("Entry",))
    assert merged["Lone"] == (("R",), ("Entry",), ("R",))
    assert merged["Next"] == (("Entry",), ("Entry",))
    assert merged["Seen"] == (("Entry",),)  # a reader in one context
    # Not merged: a Kleene component (its plain one is), contiguity, a view
    # of one context only.
    assert merged["Burst"] == (("Entry",), ("Moving",))
    assert merged["Run"] == (("Moving",), ("Moving",))
    assert merged["Pair"] == (("Slowed",), ("Entry",))
    # Fast has no reader left; Moving stays for Burst and Run.
    assert "Fast" in unmerged and "Fast" not in merged and "Moving" in merged
    pass_plan = next(s.plan for s in MERGED.matcher_stages
                     if isinstance(s.plan, PatternPlan) and s.plan.output is not None
                     and s.plan.output.event_type == "Pass")
    where = {render(c) for c in pass_plan.where}
    assert {"(a.lane != 2)", "(b.lane != 2)", "(b.spd > 30)", "(b.vid >= 0)"} <= where


reports = st.builds(lambda dt, vid, seg, spd, lane: ("r", dt, {"vid": vid, "seg": seg,
                                                               "spd": spd, "lane": lane}),
                    st.integers(0, 2), st.integers(0, 2), st.integers(0, 1),
                    st.sampled_from([5, 20, 40]), st.integers(0, 2))
alarms = st.builds(lambda dt, seg, level: ("alarms", dt, {"seg": seg, "level": level}),
                   st.integers(0, 2), st.integers(0, 1), st.sampled_from([1, 3]))
events = st.lists(st.one_of(reports, reports, reports, reports, alarms), max_size=70)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(events)
def test_merged_and_unmerged_plans_agree(stream) -> None:
    expected = alerts_of(UNMERGED, stream, "reference")
    assert alerts_of(MERGED, stream, "reference") == expected
    assert alerts_of(MERGED, stream, "cython") == expected


def test_a_long_stream_derives_through_every_reader() -> None:
    """The property above is not vacuous: on a longer stream every merged
    reader derives something."""
    rng = random.Random(7)
    stream = [("r", rng.choice([0, 1, 1, 2]), {"vid": rng.randrange(4), "seg": rng.randrange(2),
                                               "spd": rng.choice([5, 20, 40]),
                                               "lane": rng.choice([0, 0, 0, 1, 2])})
              for _ in range(400)]
    stream[100:100] = [("alarms", 1, {"seg": 0, "level": 3}), ("alarms", 0, {"seg": 1, "level": 3})]
    got = alerts_of(MERGED, stream, "cython")
    assert got == alerts_of(UNMERGED, stream, "reference")
    derived = {a[0] for a in got}
    assert {"Pass", "Lone", "Next", "Burst", "Run", "Seen", "Pair"} <= derived


@pytest.mark.parametrize("view", [
    # renamed or computed fields: a reader's b.vid would mean something else
    "DERIVE V(e.vid AS car, e.seg) PATTERN R e WHERE e.spd > 1",
    "DERIVE V(e.vid, e.seg, e.spd + 1 AS spd) PATTERN R e",
    # a view with a topic is an output of its own
    "EVENT V(vid INT, seg INT) TO TOPIC \"v\"\nDERIVE V(e.vid, e.seg) PATTERN R e",
    # two queries derive V
    "DERIVE V(e.vid, e.seg) PATTERN R e WHERE e.spd > 1\n"
    "DERIVE V(e.vid, e.seg) PATTERN R e WHERE e.spd < 0",
    # more than one event, or a negation
    "DERIVE V(e.vid, e.seg) PATTERN SEQ(R d, R e) WHERE [vid] WITHIN 3 SECONDS",
    # the partition key missing from V: routed elsewhere than R
    "DERIVE V(e.vid) PATTERN R e",
])
def test_views_it_cannot_fold_stay(view: str) -> None:
    fields = "b.vid" if "car" not in view else "b.car"
    text = f"""
MODEL keep
TIME UNIT SECONDS
PARTITION BY seg
EVENT R(ts INT, vid INT, seg INT, spd INT) FROM TOPIC "r"
{view}
DERIVE W({fields}) PATTERN SEQ(R a, V b) WITHIN 5 SECONDS
"""
    assert _reads(compile_phases(text).execution)["W"] == (("R",), ("V",))


def test_linear_road_reads_segment_entry() -> None:
    from caesar.examples import model_path

    lr = model_path("linear_road")
    for path in (lr, lr.parent / "model_per_segment.caesar"):
        reads = _reads(compile_phases(path).execution)
        assert "EnteringCar" not in reads
        assert reads["SpeedBefore"] == (("SegmentStats",), ("SegmentEntry",))
        assert reads["AccidentAhead"][-1] == ("SegmentEntry",)
