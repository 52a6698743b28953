"""Group prefetching (engine._prefetch): before each chunk of a batch's events
the engine looks up the Parts of the plans keyed by one attribute and brings
their stacks into the cache. It is a hint only: which plans it covers is
checked here, and that batches spanning several chunks, keys missing in
some events, and parts dropped by sweeps between batches match the
reference engine."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.events.batch import StringPool
from caesar.services.matcher.engine import CythonEngine
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
]


def test_the_plans_keyed_by_one_attribute_are_prefetched_for_their_types() -> None:
    table = CythonEngine(PLANS)._prefetch_table()
    assert {t: sorted(v) for t, v in table.items()} == {
        "A": [("run", "x"), ("seq", "x")],
        "B": [("neg", "x"), ("seq", "x")],
        "C": [("neg", "x")],
    }  # "two" keys by two attributes, "free" by none: not prefetched


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("ABC"), st.integers(0, 6) | st.none(), st.integers(0, 1)),
        min_size=1,
        max_size=120,
    ),
    st.lists(st.integers(1, 80), min_size=1, max_size=4),
)
def test_chunks_of_a_long_batch_match_the_reference(
    rows: list[tuple[str, int | None, int]], cuts: list[int]
) -> None:
    # ts 2 per row: a window of 6 spans 3 rows, so parts empty and a sweep
    # at the next advance drops them while later batches bring their keys back
    spec = [
        (t, 2 * i, {"y": y} if x is None else {"x": x, "y": y}) for i, (t, x, y) in enumerate(rows)
    ]
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
