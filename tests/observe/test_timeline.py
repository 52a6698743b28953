"""The timeline's intervals say, for every event time, exactly the contexts of
the newest change before it (windows are half-open: a change at ts holds for
t > ts)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.observe.timeline import ContextTimeline

CONTEXTS = ("clear", "congestion", "accident")

changes = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3),
              st.sets(st.sampled_from(CONTEXTS), min_size=1).map(lambda s: tuple(sorted(s)))),
    max_size=30)


def _holding_at(intervals: list, t: int) -> set[str]:
    return {i["context"] for i in intervals if i["start"] < t and (i["end"] is None or t <= i["end"])}


@settings(max_examples=200, deadline=None)
@given(changes)
def test_intervals_match_the_newest_change_before_each_time(steps: list) -> None:
    timeline = ContextTimeline()
    ts = {"a": 0, "b": 0}
    history: dict[str, list[tuple[int, tuple[str, ...]]]] = {"a": [], "b": []}
    for key, gap, contexts in steps:
        ts[key] += gap + 1  # a partition's changes come in event-time order
        timeline.apply(key, ts[key], contexts)
        history[key].append((ts[key], contexts))
    parts = {p["key"]: p["intervals"] for p in timeline.as_json()["partitions"]}
    for key, changes_of_key in history.items():
        for t in range(ts[key] + 3):
            before = [c for when, c in changes_of_key if when < t]
            want = set(before[-1]) if before else set()
            assert _holding_at(parts.get(key, []), t) == want, (key, t)


def test_the_view_is_bounded() -> None:
    timeline = ContextTimeline(max_partitions=3, max_intervals=4)
    for i in range(50):
        timeline.apply(f"p{i % 5}", i, (CONTEXTS[i % 3],))
    data = timeline.as_json()
    assert [p["key"] for p in data["partitions"]] == ["p4", "p3", "p2"]  # newest first
    assert all(len(p["intervals"]) <= 4 for p in data["partitions"])
    assert data["changes"] == 50 and data["latest_ts"] == 49
