"""The sweep of parts no event reaches any more (engine.advance) visits a
slice of them per call, spread over a quarter window of event time: one call
no longer stops for all of them (0.5-0.9 s at Linear Road's state). Results
do not depend on it (test_equivalence draws slices of one part); here, that
the state still goes, a slice at a time, and all of it within the span."""

from __future__ import annotations

from caesar.events.batch import StringPool
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

from .tapes import comp, multiset, plan, tape

WITHIN = 400
KEYS = 2_000


def a_then_c():
    return plan("q", [comp("a", "A"), comp("c", "C")], equivalence=("y",), within=WITHIN)


def idle_parts_engine(sweep_min: int) -> tuple[CythonEngine, StringPool]:
    """An engine holding one A in each of KEYS parts at ts 0, whose sweep
    at watermark 1 found nothing old enough to drop (one starts once per
    window), and a live
    part (key -1) with an A at 399: the stream goes on (a watermark past
    every event's window sweeps everything at once)."""
    engine, pool = CythonEngine([a_then_c()]), StringPool()
    engine.sweep_min = sweep_min
    engine.process(tape([("A", 0, {"y": y, "x": 1}) for y in range(KEYS)], pool))
    for wm in range(1, 400):
        engine.advance(wm)
    engine.process(tape([("A", 399, {"y": -1, "x": 1})], pool, first_seq=10**6))
    assert engine.state_size() == KEYS + 1
    return engine, pool


def test_idle_parts_go_a_slice_per_call_within_a_quarter_window():
    engine, _ = idle_parts_engine(sweep_min=1)
    sizes = []
    for wm in range(401, 401 + WITHIN // 4 + 1):  # a sweep starts at 401, bound 1
        engine.advance(wm)
        sizes.append(engine.state_size())
    assert sizes[0] >= KEYS - 2 * KEYS // (WITHIN // 4)  # the first call: about 1/100
    assert all(a >= b for a, b in zip(sizes, sizes[1:], strict=False))
    assert sizes[WITHIN // 8] < KEYS * 0.6  # halfway through the span, about half
    assert sizes[-1] == 1  # every idle part gone by the span's end, the live one kept


def test_a_slice_visits_at_least_the_least_slice():
    engine, _ = idle_parts_engine(sweep_min=KEYS)
    engine.advance(401)
    assert engine.state_size() == 1


def test_a_part_an_event_reaches_mid_sweep_still_matches():
    """Parts touched between slices are pruned as they are touched; the
    sweep skips or sweeps them as they are then, and matches stay as the
    reference finds them."""
    engine, pool = idle_parts_engine(sweep_min=1)
    reference = ReferenceEngine([a_then_c()])
    rows = [("A", 0, {"y": y, "x": 1}) for y in range(KEYS)]
    expected = reference.process(tape(rows, StringPool()))
    expected += reference.process(tape([("A", 399, {"y": -1, "x": 1})], StringPool(),
                                       first_seq=10**6))
    got = []
    later = [("A", 420, {"y": y, "x": 2}) for y in range(0, KEYS, 7)]
    later += [("C", 430, {"y": y, "x": 3}) for y in range(0, KEYS, 3)]
    for wm in range(401, 420):
        got += engine.advance(wm)
    got += engine.process(tape(later, pool, first_seq=2 * 10**6))
    for wm in range(420, 520):
        got += engine.advance(wm)
    expected += reference.process(tape(later, StringPool(), first_seq=2 * 10**6))
    expected += reference.advance(10**9)
    got += engine.advance(10**9)
    assert multiset(got) == multiset(expected)
    assert len(got) == len(range(0, KEYS, 21))  # A at 420 and C at 430 in the same key
    assert engine.state_size() == 0  # past every event's window: all of it at once


def test_keys_added_mid_sweep_resize_the_dict_and_nothing_is_lost():
    """The sweep walks each partition's dict where its last slice stopped.
    Many new keys between slices make the dict resize (its entries move):
    the walk may pass over some idle parts, which the next sweep takes; no
    live part is dropped and matches stay as the reference finds them."""
    engine, pool = idle_parts_engine(sweep_min=1)
    reference = ReferenceEngine([a_then_c()])
    expected = reference.process(tape([("A", 0, {"y": y, "x": 1}) for y in range(KEYS)],
                                      StringPool()))
    expected += reference.process(tape([("A", 399, {"y": -1, "x": 1})], StringPool(),
                                       first_seq=10**6))
    got = []
    for wm in range(401, 410):
        got += engine.advance(wm)
    fresh = [("A", 410, {"y": KEYS + y, "x": 2}) for y in range(4 * KEYS)]
    got += engine.process(tape(fresh, pool, first_seq=2 * 10**6))
    expected += reference.process(tape(fresh, StringPool(), first_seq=2 * 10**6))
    for wm in range(410, 700):
        got += engine.advance(wm)
    # no live part dropped (the fresh ones at 410, the one at 399); the idle
    # parts of ts 0 gone, but those the walk passed over wait for the next
    # sweep (from 801: one starts once per window)
    assert 4 * KEYS + 1 <= engine.state_size() < 4 * KEYS + 1 + KEYS // 2
    closing = [("C", 700, {"y": y, "x": 3}) for y in (-1, KEYS, 5 * KEYS - 1, 3)]
    got += engine.process(tape(closing, pool, first_seq=3 * 10**6))
    expected += reference.process(tape(closing, StringPool(), first_seq=3 * 10**6))
    assert multiset(got) == multiset(expected)
    assert len(got) == 3  # -1 (A at 399), KEYS and 5 KEYS - 1 (A at 410); not 3 (A at 0)
    for wm in range(700, 1300):
        engine.advance(wm)
    assert engine.state_size() == 0
