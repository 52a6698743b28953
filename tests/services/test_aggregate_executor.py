"""Windowed aggregation against a naive per-window recomputation."""

from collections import defaultdict

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.plans.aggregate import AggregatePlan, AggregateSpec
from caesar.plans.expr import Attr, Binary, Const
from caesar.services.matcher.aggregate import AggregateExecutor

SPECS = (AggregateSpec("n", "count", None), AggregateSpec("cars", "count_distinct", Attr(None, "vid")),
         AggregateSpec("total", "sum", Attr(None, "spd")), AggregateSpec("avg", "avg", Attr(None, "spd")),
         AggregateSpec("lo", "min", Attr(None, "spd")), AggregateSpec("hi", "max", Attr(None, "spd")))


def plan(size, slide, where=(), having=()):
    return AggregatePlan("agg", "Pos", "Stats", size, slide, ("seg",), SPECS, where, having)


def naive(events, size, slide, keep=lambda e: True):
    """Every aligned window with at least one event, recomputed from scratch."""
    windows = defaultdict(list)
    for e in events:
        if not keep(e):
            continue
        start = (e["ts"] // slide) * slide
        while start + size > e["ts"]:
            if start <= e["ts"]:
                windows[(e["p"], e["seg"], start)].append(e)
            start -= slide
    out = []
    for (p, seg, start), evs in windows.items():
        spd = [e["spd"] for e in evs]
        out.append((p, seg, start + size - 1, len(evs), len({e["vid"] for e in evs}), sum(spd),
                    round(sum(spd) / len(spd), 6), min(spd), max(spd)))
    return sorted(out)


def feed(executor, events, batches, final=10**9):
    """The rows `executor` emits for `events` added in `batches` batches,
    advanced to each batch's first ts, then to `final`."""
    rows = []
    for chunk in np.array_split(np.arange(len(events)), batches):
        part = [events[i] for i in chunk]
        if part:
            executor.add(part, np.array([e["ts"] for e in part]), np.array([e["p"] for e in part]))
            rows += executor.advance(min(e["ts"] for e in part))
    return rows + executor.advance(final)


def timed(raw):
    """Events at the running sum of their `dt`."""
    ts, events = 0, []
    for r in raw:
        ts += r["dt"]
        events.append({"ts": ts, "p": r["p"], "seg": r["seg"], "vid": r["vid"], "spd": r["spd"]})
    return events


def run(executor, events, batches, final):
    rows = feed(executor, events, batches, final)
    return sorted((r["_partition"], r["seg"], r["ts"], r["n"], r["cars"], r["total"],
                   round(r["avg"], 6), r["lo"], r["hi"]) for r in rows)


event = st.fixed_dictionaries({"dt": st.integers(0, 4), "p": st.integers(0, 2),
                               "seg": st.integers(0, 2), "vid": st.integers(0, 5),
                               "spd": st.integers(0, 100)})


@settings(max_examples=60, deadline=None)
@given(st.lists(event, max_size=40), st.sampled_from([(5, 5), (6, 2), (10, 3), (1, 1), (9, 3)]),
       st.integers(1, 4))
def test_matches_naive_recomputation(raw, window, batches):
    size, slide = window
    events = timed(raw)
    got = run(AggregateExecutor(plan(size, slide)), events, batches, 10**9)
    assert got == naive(events, size, slide)


def test_where_and_having_and_emit_only_when_closed():
    agg = AggregateExecutor(plan(10, 10, where=(Binary(">", Attr(None, "spd"), Const(10)),),
                                 having=(Binary(">=", Attr(None, "n"), Const(2)),)))
    evs = [{"ts": 1, "seg": 1, "vid": 1, "spd": 50}, {"ts": 2, "seg": 1, "vid": 2, "spd": 5},
           {"ts": 3, "seg": 1, "vid": 3, "spd": 70}, {"ts": 4, "seg": 2, "vid": 4, "spd": 70}]
    agg.add(evs, np.array([e["ts"] for e in evs]), np.zeros(4, dtype=np.int64), {0: "k"})
    assert agg.advance(9) == []  # window [0, 10) still open
    rows = agg.advance(10)
    assert [(r["seg"], r["n"], r["avg"], r["ts"], r["_key"]) for r in rows] == [(1, 2, 60.0, 9, "k")]


def test_snapshot_restore_continues_windows():
    a = AggregateExecutor(plan(10, 5))
    first = [{"ts": 1, "seg": 1, "vid": 1, "spd": 10}, {"ts": 7, "seg": 1, "vid": 2, "spd": 30}]
    a.add(first, np.array([1, 7]), np.zeros(2, dtype=np.int64))
    b = AggregateExecutor(plan(10, 5))
    b.restore(a.snapshot())
    more = [{"ts": 8, "seg": 1, "vid": 1, "spd": 20}]
    for x in (a, b):
        x.add(more, np.array([8]), np.zeros(1, dtype=np.int64))
    assert a.advance(100) == b.advance(100)


# Exact 64-bit integers (issue 16): sums, min and max of INT/LONG arguments
# are exact over the whole range; a sum outside 64 bits is null.
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
WIDE = st.one_of(st.sampled_from([0, 1, 2**53, 2**53 + 1, 2**62, I64_MAX, I64_MIN, -(2**53) - 1]),
                 st.integers(I64_MIN, I64_MAX))
wide_event = st.fixed_dictionaries({"dt": st.integers(0, 4), "p": st.integers(0, 1),
                                    "seg": st.integers(0, 1), "vid": WIDE, "spd": WIDE})


def naive_exact(events, size, slide):
    windows = defaultdict(list)
    for e in events:
        start = (e["ts"] // slide) * slide
        while start + size > e["ts"]:
            if start <= e["ts"]:
                windows[(e["p"], e["seg"], start)].append(e)
            start -= slide
    out = []
    for (p, seg, start), evs in windows.items():
        spd = [e["spd"] for e in evs]
        total = sum(spd)
        out.append((p, seg, start + size - 1, len(evs), len({e["vid"] for e in evs}),
                    total if I64_MIN <= total <= I64_MAX else None,
                    float(total) / len(spd), min(spd), max(spd)))
    return sorted(out, key=repr)


@settings(max_examples=80, deadline=None)
@given(st.lists(wide_event, max_size=30), st.sampled_from([(5, 5), (6, 2), (1, 1), (8, 2)]),
       st.integers(1, 4))
def test_int64_sums_are_exact(raw, window, batches):
    size, slide = window
    events = timed(raw)
    ex = AggregateExecutor(plan(size, slide))
    rows = feed(ex, events, batches)
    got = sorted(((r["_partition"], r["seg"], r["ts"], r["n"], r["cars"], r["total"], r["avg"],
                   r["lo"], r["hi"]) for r in rows), key=repr)
    assert got == naive_exact(events, size, slide)
    assert ex.overflows == sum(1 for row in got if row[5] is None)


def test_where_compares_int_and_double_exactly():
    # spd > 2.0**53 holds for 2**53 + 1 (numpy alone would round it to 2.0**53)
    agg = AggregateExecutor(plan(10, 10, where=(Binary(">", Attr(None, "spd"), Const(2.0**53)),)))
    evs = [{"ts": 1, "seg": 1, "vid": 1, "spd": 2**53 + 1}, {"ts": 2, "seg": 1, "vid": 2, "spd": 2**53}]
    agg.add(evs, np.array([1, 2]), np.zeros(2, dtype=np.int64))
    [row] = agg.advance(10)
    assert (row["n"], row["total"], row["lo"]) == (1, 2**53 + 1, 2**53 + 1)


# Panes (a size that is a multiple of the slide, integer arguments): each
# group's results merged into every window of its pane, instead of every
# event expanded to its windows. The two must give the same rows, also for
# float values arriving after int ones and sums beyond 64 bits.
mixed_value = st.one_of(WIDE, st.floats(-1e6, 1e6, allow_nan=False))
mixed_event = st.fixed_dictionaries({"dt": st.integers(0, 4), "p": st.integers(0, 1),
                                     "seg": st.integers(0, 2), "vid": st.integers(0, 3),
                                     "spd": st.one_of(st.integers(0, 100), mixed_value)})


@settings(max_examples=80, deadline=None)
@given(st.lists(mixed_event, max_size=40), st.sampled_from([(6, 2), (8, 2), (9, 3), (4, 1)]),
       st.integers(1, 5))
def test_panes_give_the_rows_of_expanded_windows(raw, window, batches):
    size, slide = window
    events = timed(raw)
    panes, expanded = AggregateExecutor(plan(size, slide)), AggregateExecutor(plan(size, slide))
    panes._panes = expanded._panes = None  # numpy's two groupings (the C pass: below)
    expanded._by_panes = lambda values: False  # type: ignore[method-assign]
    used = []
    by_panes = panes._by_panes
    panes._by_panes = lambda values: used.append(by_panes(values)) or used[-1]  # type: ignore
    assert feed(panes, events, batches) == feed(expanded, events, batches)
    assert panes.overflows == expanded.overflows
    # integer-only input takes the pane path in every batch
    if all(type(e["spd"]) is int for e in events):
        assert all(used)


def test_a_sliding_window_of_int_arguments_is_grouped_by_pane():
    agg = AggregateExecutor(plan(6, 2))
    evs = [{"ts": t, "seg": 1, "vid": t, "spd": 10 * t} for t in (1, 2, 3, 7)]
    values = [None if s.arg is None else (np.array([e["spd"] for e in evs]), np.zeros(4, bool))
              for s in SPECS]
    assert agg._by_panes(values)
    agg.add(evs, np.array([e["ts"] for e in evs]), np.zeros(4, dtype=np.int64))
    rows = agg.advance(10**9)
    # windows [-4, 2), [-2, 4), [0, 6), [2, 8), [4, 10), [6, 12)
    assert [(r["_window_start"], r["n"], r["total"]) for r in rows] == [
        (-4, 1, 10), (-2, 3, 60), (0, 3, 60), (2, 3, 120), (4, 1, 70), (6, 1, 70)]


# The C pass (pane_table.pyx): integer arguments in windows whose panes hold
# whole windows, each row added to its pane's windows without sorting. It must
# give numpy's rows, overflows and state: also across int/float switches,
# float and negative group values, sums beyond 64 bits, snapshot and restore.
shape = st.sampled_from([(5, 5), (6, 2), (8, 2), (9, 3), (4, 1), (1, 1), (10, 5), (2, 5), (3, 7)])
keyed_event = st.fixed_dictionaries({
    "dt": st.integers(0, 4), "p": st.integers(0, 1),
    "seg": st.one_of(st.integers(-2, 2), st.sampled_from([1.0, 1.5, -0.0])),
    "vid": st.one_of(st.integers(0, 3), WIDE), "spd": st.one_of(st.integers(0, 100), mixed_value)})


def _rows(executor, events, batches, restore_after):
    """feed(), with the executor replaced by a restored copy of its
    snapshot after batch `restore_after`."""
    rows, chunks = [], [c for c in np.array_split(np.arange(len(events)), batches) if len(c)]
    for i, chunk in enumerate(chunks):
        part = [events[j] for j in chunk]
        executor.add(part, np.array([e["ts"] for e in part]), np.array([e["p"] for e in part]))
        rows += executor.advance(min(e["ts"] for e in part))
        if i == restore_after:
            again = AggregateExecutor(executor.plan)
            if executor._panes is None:
                again._panes = None
            again.restore(executor.snapshot())
            executor = again
    return rows + executor.advance(10**9), executor


@settings(max_examples=150, deadline=None)
@given(st.lists(keyed_event, max_size=40), shape, st.integers(1, 5), st.integers(-1, 4))
def test_the_c_pass_gives_numpys_rows_and_state(raw, window, batches, restore_after):
    size, slide = window
    events = timed(raw)
    c_pass, numpy_only = AggregateExecutor(plan(size, slide)), AggregateExecutor(plan(size, slide))
    numpy_only._panes = None
    assert c_pass._panes is not None  # every shape here has panes holding whole windows
    got, c_end = _rows(c_pass, events, batches, restore_after)
    want, n_end = _rows(numpy_only, events, batches, restore_after)
    assert repr(got) == repr(want)  # also 5 and 5.0, -0.0 and 0.0 told apart
    assert c_end.overflows == n_end.overflows


@settings(max_examples=60, deadline=None)
@given(st.lists(event, max_size=40), shape, st.integers(1, 4))
def test_the_c_pass_matches_naive_recomputation(raw, window, batches):
    size, slide = window
    events = timed(raw)
    ex = AggregateExecutor(plan(size, slide))
    used = []
    add = ex._add_by_table
    ex._add_by_table = lambda *a: used.append(1) or add(*a)  # type: ignore[method-assign]
    assert run(ex, events, batches, 10**9) == naive(events, size, slide)
    assert len(used) == (batches if len(events) >= batches else len(events)) or not events


def test_a_sliding_window_of_int_arguments_goes_through_the_c_pass():
    agg = AggregateExecutor(plan(6, 2))
    assert agg._panes is not None and agg._panes.w == 3
    evs = [{"ts": t, "seg": 1, "vid": t, "spd": 10 * t} for t in (1, 2, 3, 7)]
    agg.add(evs, np.array([e["ts"] for e in evs]), np.zeros(4, dtype=np.int64))
    assert len(agg._panes) == 3  # panes [0, 2), [2, 4), [6, 8)
    assert [(r["_window_start"], r["n"], r["total"], r["cars"]) for r in agg.advance(10**9)] == [
        (-4, 1, 10, 1), (-2, 3, 60, 3), (0, 3, 60, 3), (2, 3, 120, 3), (4, 1, 70, 1),
        (6, 1, 70, 1)]
    assert AggregateExecutor(plan(7, 2))._panes is None  # 7 is no multiple of 2: numpy


distinct_value = st.one_of(
    st.integers(-2**63, 2**63 - 1), st.integers(-3, 3), st.sampled_from([2**63, -2**63 - 1, 2**70]),
    st.booleans(), st.floats(allow_nan=True), st.sampled_from([1.0, -2.0, 2.0**62, 0.5]),
    st.text(max_size=2))


@settings(max_examples=200, deadline=None)
@given(st.lists(distinct_value, max_size=200), st.lists(distinct_value, max_size=5))
def test_distinct_set_counts_as_a_python_set(values, probes):
    """distinct_set.DistinctSet (count(DISTINCT) windows: int64s in C, the
    rest in a Python set) has a Python set's equality: True is 1, 2.0 is 2,
    the int64 ends, ints beyond 64 bits, NaN and fractions stay apart."""
    import pickle

    from caesar.services.matcher.distinct_set import DistinctSet

    kept = DistinctSet()
    for v in values:
        kept.add_value(v)
    reference = set(values)
    assert len(kept) == len(reference)
    assert len(DistinctSet(values)) == len(reference)
    for v in list(values[:5]) + probes:
        if v == v:  # NaN is in a set only as the same object
            assert (v in kept) == (v in reference)
    assert len(set(kept)) == len(kept)
    assert len(pickle.loads(pickle.dumps(kept))) == len(reference)
