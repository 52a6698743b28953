"""bench/linear_road/figures.py (the paper's Figure 12) at a tiny size: the
context-aware and context-independent plans agree on what they must, the
context-aware one derives nothing outside the windows, and the agreement
check rejects outputs the windows do not explain."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[2]))  # bench/ is not an installed package

from bench.linear_road import figures  # noqa: E402
from bench.linear_road.standard import Reports  # noqa: E402
from caesar.language import compile_model  # noqa: E402


def _reports(cars: int = 30, end: int = 400, seed: int = 3) -> Reports:
    """Cars reporting every 30 s (as in Linear Road), moving one segment on
    most reports, staying on some."""
    rnd = np.random.default_rng(seed)
    rows = []
    for vid in range(cars):
        t, seg = int(rnd.integers(0, 30)), int(rnd.integers(0, 50))
        while t < end:
            rows.append((t, vid, int(rnd.integers(30, 70)), 0, 1, vid % 2, seg, seg * 5280))
            seg += int(rnd.random() < 0.7)
            t += 30
    rows.sort()
    cols = np.array(rows, dtype=np.int64).T
    return Reports({f: cols[i] for i, f in enumerate(figures.FIELDS)})


def test_both_modes_agree_and_ca_derives_only_inside_the_windows() -> None:
    reports = _reports()
    seconds = figures.input_records(reports)
    windows = figures.spans(2, 60, 0, 400)
    assert windows == [(93, 153), (246, 306)]  # evenly spread: gaps of 93 s
    text = figures.model_text(3, windows)
    _, ca = figures.run_mode(compile_model(text), seconds)
    _, ci = figures.run_mode(compile_model(text, context_aware=False), seconds)
    assert sum(ca.values()) > 20
    assert sum(ci.values()) >= sum(ca.values())
    assert figures.check(ca, ci, figures.partition_windows(reports, windows)) == ""
    # A partition (here: a direction) leaves the window on its first report at
    # or after the window's end; outputs of that second still count in it.
    times = {d: np.unique(reports.columns["time"][reports.columns["dir"] == d]) for d in (0, 1)}

    def last_second(d: int, b: int) -> int:
        return int(times[d][np.searchsorted(times[d], b)])

    assert all(any(a < t <= last_second(vid % 2, b) for a, b in windows)
               for (_, (_, d), vid, t) in ca)
    assert all(d == vid % 2 for (_, (_, d), vid, _) in ca)
    # Each replica is its own query: all three derive.
    assert {name for name, _, _, _ in ca} == {f"NewTravelingCar{i}" for i in range(3)}


def test_the_check_rejects_what_the_windows_do_not_explain() -> None:
    p = (0, 1)
    held = {p: [(100, 160)]}
    both = Counter({("NewTravelingCar0", p, 1, 130): 1})
    assert figures.check(both, both, held) == ""
    assert "CA only" in figures.check(both + Counter({("NewTravelingCar0", p, 2, 131): 1}),
                                      both, held)
    late = both + Counter({("NewTravelingCar0", p, 3, 200): 1})  # after the window
    assert "not explained" in figures.check(both, late, held)
    early = both + Counter({("NewTravelingCar0", p, 3, 150): 1})  # 50 s in: within 60 s
    assert figures.check(both, early, held) == ""
    # WITHIN 60 bounds last - first < 60: a run from at or before 100 ends before 160.
    edge = both + Counter({("NewTravelingCar0", p, 3, 160): 1})
    assert "not explained" in figures.check(both, edge, held)
    # The window is the output's partition's: (0, 0) holds none here.
    other = both + Counter({("NewTravelingCar0", (0, 0), 3, 130): 1})
    assert "not explained" in figures.check(both, other, held)
    # CA derives nothing outside its partition's windows.
    outside = Counter({("NewTravelingCar0", p, 1, 100): 1})
    assert "outside its windows" in figures.check(outside, outside, held)


def test_partition_windows_follow_each_partitions_reports() -> None:
    """(ti, tt]: from a partition's first report in a span to its first one
    at or after the span's end; a partition silent through a span never opens
    it; a window open at the end of the input holds on."""
    rows = [(t, 1, 60, 0, 0, 1, 0, 0) for t in (140, 150, 170, 210, 300, 330)]
    rows += [(t, 2, 60, 0, 0, 0, 0, 0) for t in (149, 151, 209, 211, 290, 320, 360)]
    rows += [(t, 3, 60, 1, 0, 0, 0, 0) for t in (100, 220, 310)]
    rows.sort()
    cols = np.array(rows, dtype=np.int64).T
    reports = Reports({f: cols[i] for i, f in enumerate(figures.FIELDS)})
    held = figures.partition_windows(reports, [(150, 210), (300, 350)])
    assert held == {(0, 1): [(150, 210), (300, float("inf"))],
                    (0, 0): [(151, 211), (320, 360)],
                    (1, 0): [(310, float("inf"))]}
    assert figures.partition_windows(_sparse_end_reports(), [(150, 210)]) == {
        (0, 0): [(151, 211)], (0, 1): [(150, 210)]}


def test_points_follow_the_papers_defaults() -> None:
    pts = figures.points(quick=False)
    assert {p.figure for p in pts} == set("abcd")
    for p in pts:  # every point varies one parameter of 10 queries, 3 roads, 2 x 3 min
        varied = [p.queries != 10, p.roads != 3, p.window_s != 180, p.windows != 2]
        assert sum(varied) <= 1
    rows = figures.medians([
        {"round": r, "figure": "a", "label": "1 queries", "queries": 1, "roads": 1,
         "window_s": 60, "windows": 2, "reports": 10, "suspendable_share": 0.5,
         "ca_cpu_s": ca, "ci_cpu_s": ci, "agree": True}
        for r, (ca, ci) in enumerate([(1.0, 3.0), (2.0, 3.0), (1.5, 6.0)])])
    assert rows[0]["ca_cpu_s"] == 1.5 and rows[0]["ci_cpu_s"] == 3.0 and rows[0]["ci_over_ca"] == 2.0


def test_overlapping_windows_share_one_instance_per_query_and_derive_the_same() -> None:
    """Figure 14: shared (the optimizer as it is) vs non-shared (without the
    shared_subplans rule) over 4 windows of which 3 hold at once."""
    from caesar.language import compile_phases
    from caesar.language.optimizer import RULES

    reports = _reports(cars=40)
    seconds = figures.input_records(reports)
    text = figures.figure14_model(windows=4, window_s=150, step_s=60, queries=2)
    shared = compile_phases(text).execution
    unshared = compile_phases(text, rules=tuple(r for r in RULES
                                                if r[0] != "shared_subplans")).execution
    assert len(shared.matcher_stages) == 2 and len(unshared.matcher_stages) == 8
    _, got_shared = figures.run_mode(shared, seconds)
    _, got_unshared = figures.run_mode(unshared, seconds)
    assert len(got_shared) > 10
    assert set(got_shared) == set(got_unshared)
    # Non-shared: every window holding at b's time derives its own copy.
    assert sum(got_unshared.values()) > sum(got_shared.values())
    assert figures.Point14("a", 45, 900, 20, 4).overlapping == 45
    assert figures.Point14("c", 30, 900, 300, 4).overlapping == 3


def test_overlap_length_points_run_on_their_span_and_agree() -> None:
    """Figure 14(b): 30 windows of 15 minutes overlapping by 10-15 minutes,
    each point on its windows' span of input; at a tiny size, windows that
    all coincide (step 0) and staggered ones derive the same in both modes."""
    pts = [p for p in figures.points14(quick=False) if p.figure == "b"]
    assert [(p.windows, p.window_s, p.queries) for p in pts] == [(30, 900, 4)] * 4
    assert [p.label for p in pts] == ["10 min", "12 min", "14 min", "15 min"]
    assert [p.span_s for p in pts] == [9600, 6120, 2640, 900]
    assert pts[-1].overlapping == 30 and pts[0].overlapping == 3
    reports = _reports(cars=40, end=400)
    tiny = [figures.Point14("b", 3, 120, step, 2) for step in (0, 60)]
    rows = figures.measure14(reports, tiny, rounds=1, log=lambda *_: None)
    assert [r["reports"] for r in rows] == [
        int((reports.columns["time"] < p.span_s).sum()) for p in tiny]
    assert all(r["agree"] and r["distinct_outputs"] > 0 for r in rows)
    assert [r["non_shared_stages"] for r in rows] == [6, 6]


def _sparse_end_reports() -> Reports:
    """Figure 12(d)'s quick point in miniature (window (150, 210)): direction
    1 reports at 150 and 210, direction 0 only a second later (151, 211), so
    direction 0's window is (151, 211]. Car 7 reports at 151 in segment 55
    (the report that opens direction 0's window: outside it, suspended in CA),
    at 181 still in 55 and at 211 in 56."""
    rows = [(t, 2, 60, 0, 1, 1, 10 + k, 5280 * (10 + k))
            for k, t in enumerate((120, 150, 180, 210, 240))]
    rows += [(t, 7, 60, 0, 1, 0, seg, 5280 * seg)
             for t, seg in ((121, 54), (151, 55), (181, 55), (211, 56), (241, 56))]
    rows.sort()
    cols = np.array(rows, dtype=np.int64).T
    return Reports({f: cols[i] for i, f in enumerate(figures.FIELDS)})


def test_a_partition_whose_window_ends_after_the_span_agrees() -> None:
    """A partition's window is (its first report in the span, its first report
    at or after the span's end]: direction 0's is (151, 211]. CI's run of car 7
    from 151 (WITHIN 61: 211 - 151 < 61) ends at 211, inside that window, so
    CI derives NewTravelingCar1 at 211 once more than CA (whose run starts at
    181). The check must take the partition's own window, not the span (the
    quick Figure 12(d) failed on exactly this: "CI output NewTravelingCar1 at
    211 is not explained by a window start")."""
    reports = _sparse_end_reports()
    pt = figures.Point("d", 2, 1, 60, 1)
    assert figures.spans(pt.windows, pt.window_s, 0, 360) == [(150, 210)]
    rows = figures.measure(reports, [pt], rounds=1, start=0, end=360, log=lambda *_: None)
    assert rows[0]["ca_outputs"] > 0
    assert rows[0]["ci_outputs"] > rows[0]["ca_outputs"]
    assert rows[0]["agree"]
    # Both modes switch where partition_windows says: per direction, at its reports.
    from bench.linear_road.throughput import TimedPipeline

    text = figures.model_text(2, [(150, 210)])
    for aware in (True, False):
        pipe = TimedPipeline(compile_model(text, context_aware=aware))
        for records in figures.input_records(reports):
            pipe.second(records)
        pipe.finish()
        switches = {(c.key, c.ts, c.contexts) for c in pipe.pipe.result.context_changes}
        assert switches == {("0|1", 150, ("critical",)), ("0|1", 210, ("normal",)),
                            ("0|0", 151, ("critical",)), ("0|0", 211, ("normal",))}


def test_rounds_swap_the_modes_order_after_one_warm_up_run(monkeypatch) -> None:
    """Neither mode always runs first (on the other's leftovers) and the
    process's first run is not timed: with 2 rounds, the first mode runs
    untimed, then A, B in round 1 and B, A in round 2."""
    import caesar.language

    ran: list[str] = []
    modes: dict[int, str] = {}
    compile_ = caesar.language.compile_model

    def tagged(text, context_aware=True):
        plan = compile_(text, context_aware=context_aware)
        modes[id(plan)] = "CA" if context_aware else "CI"
        return plan

    def fake_run(plan, seconds):
        ran.append(modes.get(id(plan), f"{len(plan.matcher_stages)} stages"))
        return 1.0, Counter()

    monkeypatch.setattr(figures, "run_mode", fake_run)
    monkeypatch.setattr(caesar.language, "compile_model", tagged)
    point = figures.Point14("a", 4, 150, 60, 2)  # shared: 2 stages, non-shared: 8
    rows = figures.measure14(_reports(cars=4), [point], rounds=2, log=lambda *_: None)
    assert ran == ["2 stages", "2 stages", "8 stages", "8 stages", "2 stages"]
    assert len(rows) == 2
    ran.clear()
    pt12 = figures.Point("a", queries=2, roads=1, window_s=60, windows=1)
    figures.measure(_reports(cars=4), [pt12], rounds=2, start=0, end=400, log=lambda *_: None)
    assert ran == ["CA", "CA", "CI", "CI", "CA"]
