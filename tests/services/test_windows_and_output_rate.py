"""Count and session windows (services/matcher/windows.py) and output rate
limiting (services/matcher/output_rate.py) against a naive recomputation of
their definitions."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.plans.aggregate import AggregatePlan, AggregateSpec
from caesar.plans.execution import OutputRate
from caesar.plans.expr import Attr
from caesar.services.matcher.output_rate import OutputLimiter
from caesar.services.matcher.windows import WindowExecutor

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
SPECS = (AggregateSpec("n", "count", None), AggregateSpec("total", "sum", Attr(None, "spd")),
         AggregateSpec("lo", "min", Attr(None, "spd")),
         AggregateSpec("cars", "count_distinct", Attr(None, "vid")))


def plan(window, size, slide):
    return AggregatePlan("w", "Pos", "Stats", size, slide, ("seg",), SPECS, window=window)


def ordered(rows):
    """Sorted; an overflowed sum is None, which does not compare with ints."""
    return sorted(rows, key=lambda t: [(v is None, 0 if v is None else v) for v in t])


def stats(evs):
    total = sum(e["spd"] for e in evs)
    return (len(evs), total if I64_MIN <= total <= I64_MAX else None,
            min(e["spd"] for e in evs), len({e["vid"] for e in evs}))


def naive_count(events, size, slide):
    groups = defaultdict(list)
    out = []
    for e in events:
        g = groups[(e["p"], e["seg"])]
        g.append(e)
        if len(g) % slide == 0:
            win = g[-size:]
            out.append((e["ts"], e["p"], e["seg"], win[0]["ts"]) + stats(win))
    return ordered(out)


def naive_session(events, gap):
    groups = defaultdict(list)
    for e in events:
        groups[(e["p"], e["seg"])].append(e)
    out = []
    for (p, seg), evs in groups.items():
        session = [evs[0]]
        for e in evs[1:] + [None]:
            if e is None or e["ts"] - session[-1]["ts"] >= gap:
                end = session[-1]["ts"] + gap
                out.append((end - 1, p, seg, session[0]["ts"]) + stats(session))
                session = [e]
            else:
                session.append(e)
    return ordered(out)


VALUES = st.one_of(st.integers(0, 50), st.sampled_from([I64_MAX, I64_MIN, 2**62, 2**53 + 1]))
event = st.fixed_dictionaries({"dt": st.integers(0, 3), "p": st.integers(0, 1),
                               "seg": st.integers(0, 1), "vid": st.integers(0, 4),
                               "spd": VALUES})


def drive(ex, events, batches):
    rows = []
    for chunk in np.array_split(np.arange(len(events)), batches):
        part = [events[i] for i in chunk]
        if part:
            ex.add(part, np.array([e["ts"] for e in part]), np.array([e["p"] for e in part]))
            rows += ex.advance(min(e["ts"] for e in part))
    rows += ex.advance(10**9)
    return ordered((r["ts"], r["_partition"], r["seg"], r["_window_start"], r["n"], r["total"],
                    r["lo"], r["cars"]) for r in rows)


def timeline(raw):
    ts, events = 0, []
    for r in raw:
        ts += r["dt"]
        events.append({**r, "ts": ts})
    return events


@settings(max_examples=80, deadline=None)
@given(st.lists(event, max_size=30), st.sampled_from([(3, 3), (3, 1), (4, 2), (1, 1)]),
       st.integers(1, 4))
def test_count_windows(raw, window, batches):
    events = timeline(raw)
    size, slide = window
    assert drive(WindowExecutor(plan("count", size, slide)), events, batches) == \
        naive_count(events, size, slide)


@settings(max_examples=80, deadline=None)
@given(st.lists(event, max_size=30), st.integers(1, 4), st.integers(1, 4))
def test_session_windows(raw, gap, batches):
    events = timeline(raw)
    assert drive(WindowExecutor(plan("session", gap, gap)), events, batches) == \
        naive_session(events, gap)


def test_window_state_survives_snapshot():
    a = WindowExecutor(plan("session", 3, 3))
    first = [{"ts": 1, "seg": 1, "vid": 1, "spd": 5}]
    a.add(first, np.array([1]), np.zeros(1, dtype=np.int64))
    b = WindowExecutor(plan("session", 3, 3))
    b.restore(a.snapshot())
    more = [{"ts": 2, "seg": 1, "vid": 2, "spd": 7}]
    for x in (a, b):
        x.add(more, np.array([2]), np.zeros(1, dtype=np.int64))
    assert a.advance(100) == b.advance(100) != []


# ---- output rate limiting -----------------------------------------------------

output = st.tuples(st.integers(0, 1), st.integers(0, 3))  # (partition, ts step)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["all", "first", "last"]), st.integers(1, 5),
       st.lists(st.tuples(output, st.booleans()), max_size=30))
def test_output_limiter(kind, every, steps):
    lim = OutputLimiter(OutputRate(kind, every))  # type: ignore[arg-type]
    got, offered = [], []
    ts = 0
    for i, ((p, dt), tick) in enumerate(steps):
        ts += dt
        if tick:  # the watermark reaches ts: no output below it follows
            got += lim.advance(ts)
        rec = {"_p": p, "_ts": ts, "id": i}
        offered.append(rec)
        got += lim.offer(p, rec, ts, ts)
    got += lim.advance(10**9)
    by_interval = defaultdict(list)
    for rec in offered:
        by_interval[(rec["_p"], rec["_ts"] // every)].append(rec)
    if kind == "first":
        expected = [recs[0] for recs in by_interval.values()]
    elif kind == "last":
        expected = [{**recs[-1], "_ts": (k + 1) * every - 1} for (_, k), recs in
                    by_interval.items()]
    else:
        expected = [{**r, "_ts": (k + 1) * every - 1} for (_, k), recs in by_interval.items()
                    for r in recs]
    assert sorted((r["id"], r["_ts"]) for r, _, _ in got) == \
        sorted((r["id"], r["_ts"]) for r in expected)
