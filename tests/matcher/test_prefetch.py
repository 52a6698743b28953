"""Group prefetching (engine._prefetch): before each chunk of a batch's events
the engine looks up the Parts of the plans keyed by one attribute and brings
their stacks into the cache. It is a hint only: which plans it covers is
checked here, and that batches spanning several chunks, keys missing in
some events, keys of every kind (int keys take dict_probe.h's staged
lookup, others the dict's own), and parts dropped by sweeps between
batches match the reference engine. The staged lookup reads CPython's dict
layout itself, so it is checked against the dict: it finds a key's value
or nothing, never another's."""

from __future__ import annotations

import random
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.events.batch import StringPool
from caesar.services.matcher.engine import CythonEngine, _probe_built, _probe_int
from caesar.services.matcher.reference import ReferenceEngine

from .tapes import attr, cmp, comp, multiset, plan, tape

PLANS = [
    plan("seq", [comp("a", "A"), comp("b", "B")], equivalence=("x",), within=6),
    plan("neg", [comp("n", "C", neg=True), comp("b", "B")], equivalence=("x",), within=6),
    plan(
        "run",
        [comp("a", "A"), comp("b", "A"), comp("c", "A")],
        equivalence=("x",),
        within=9,
        where=[cmp("=", attr("b", "y"), attr("a", "y")), cmp("=", attr("c", "y"), attr("b", "y"))],
        strategy="partition_contiguity",
    ),
    plan("two", [comp("a", "A"), comp("b", "B")], equivalence=("x", "y"), within=6),
    plan("free", [comp("a", "A"), comp("b", "B")], within=6),
    plan("str", [comp("a", "A"), comp("b", "B")], equivalence=("s",), within=6),
    plan("flt", [comp("a", "B"), comp("b", "C")], equivalence=("f",), within=6),
]


def test_the_plans_keyed_by_one_attribute_are_prefetched_for_their_types() -> None:
    table = CythonEngine(PLANS)._prefetch_table()
    assert {t: sorted(v) for t, v in table.items()} == {
        "A": [("run", "x"), ("seq", "x"), ("str", "s")],
        "B": [("flt", "f"), ("neg", "x"), ("seq", "x"), ("str", "s")],
        "C": [("flt", "f"), ("neg", "x")],
    }  # "two" keys by two attributes, "free" by none: not prefetched


# int keys at the edges of the staged lookup: -1 (its hash is -2's) and ints
# from 2**60 on are looked up whole, as string and float keys are
ODD_INTS = st.sampled_from([-1, -2, 2**62, -(2**62), 2**60, 2**60 - 1])
STRS = st.sampled_from(["a", "b"]) | st.none()
FLOATS = st.sampled_from([0.0, 1.5, 2.0, float("nan")]) | st.none()


def test_the_staged_lookup_follows_this_pythons_dicts() -> None:
    assert _probe_built() == (sys.version_info[:2] == (3, 11))
    if not _probe_built():
        return
    # consecutive ints hash to distinct first slots: each is found there;
    # 100, 1,000 and 100,000 keys: index slots of 1, 2 and 4 bytes
    for n in (100, 1_000, 100_000):
        d = {k: object() for k in range(-1, n)}
        assert all(_probe_int(d, k) is d[k] for k in range(n)), n
        assert _probe_int(d, n + 7) is None
    # random keys, a third deleted (dummies in the index): the lookup
    # follows the probe sequence, so nearly all are found within its steps
    rng = random.Random(7)
    d = {rng.randrange(-(10**9), 10**9): object() for _ in range(30_000)}
    for k in list(d)[:10_000]:
        del d[k]
    found = sum(_probe_int(d, k) is d[k] for k in d)
    assert found >= 0.95 * len(d), found / len(d)
    # keys of the same hash: never another's value
    assert _probe_int({2**62: "2**62"}, 2) is None  # hash(2**62) == 2
    assert _probe_int({-2: "-2"}, -1) is None  # hash(-1) == hash(-2)
    assert _probe_int({-2: "-2"}, -2) == "-2"
    assert _probe_int({3.0: "3.0"}, 3) is None  # equal, not an int: a hint missed


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(-(2**62), 2**62) | st.integers(-3, 300), max_size=400),
    st.sets(st.integers(0, 399)),
    st.lists(st.integers(-(2**62), 2**62) | st.integers(-3, 300), max_size=40),
)
def test_the_staged_lookup_finds_a_keys_value_or_nothing(
    keys: list[int], dropped: set[int], probes: list[int]
) -> None:
    d: dict[object, object] = {k: object() for k in keys}
    for i in dropped:  # deleted entries: dummies in the index
        if i < len(keys):
            d.pop(keys[i], None)
    d["s"] = object()  # a str key among ints: still a general table
    for k in keys + probes:
        got = _probe_int(d, k)
        assert got is None or got is d.get(k), k
    assert _probe_int({"only": "str keys"}, 5) is None  # a unicode table: not followed
    assert _probe_int({}, 0) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from("ABC"),
            st.integers(0, 6) | ODD_INTS | st.none(),
            st.integers(0, 1),
            STRS,
            FLOATS,
        ),
        min_size=1,
        max_size=120,
    ),
    st.lists(st.integers(1, 80), min_size=1, max_size=4),
)
def test_chunks_of_a_long_batch_match_the_reference(
    rows: list[tuple[str, int | None, int, str | None, float | None]], cuts: list[int]
) -> None:
    # ts 2 per row: a window of 6 spans 3 rows, so parts empty and a sweep
    # at the next advance drops them while later batches bring their keys back
    spec = [(t, 2 * i, {"x": x, "y": y, "s": s, "f": f}) for i, (t, x, y, s, f) in enumerate(rows)]
    got, want = CythonEngine(PLANS), ReferenceEngine(PLANS)
    got.sweep_min = 1
    out_got, out_want = [], []
    pool = StringPool()
    start, k = 0, 0
    while start < len(spec):
        end = start + cuts[k % len(cuts)]
        batch = tape(spec[start:end], pool, first_seq=start)
        out_got += got.process(batch)
        out_want += want.process(batch)
        wm = spec[min(end, len(spec)) - 1][1]
        out_got += got.advance(wm)
        out_want += want.advance(wm)
        start, k = end, k + 1
    out_got += got.advance(10**9)
    out_want += want.advance(10**9)
    assert multiset(out_got) == multiset(out_want)
