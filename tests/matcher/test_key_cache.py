"""Equivalence keys as int objects (vm.key_of) and the engine's one-key
cache of the last key it made (_eqkey): keyed plans over keys with equal low
bits (session 41's direct-mapped table of key ints made them evict each
other; a table of any size must not change a match), negative keys and the
64-bit ends, against the reference engine."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.events.batch import StringPool
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

from .tapes import attr, cmp, comp, multiset, plan, tape

KEY_CACHE = 524288  # the places of session 41's table: keys 5 + k * KEY_CACHE shared one
KEYS = (5, 5 + KEY_CACHE, 5 - KEY_CACHE, 5 + 7 * KEY_CACHE, -(2**63), 2**63 - 1,
        2**63 - KEY_CACHE, 0)

PLANS = [
    plan("seq", [comp("a", "A"), comp("b", "B")], equivalence=("x",), within=6),
    plan("neg", [comp("a", "A"), comp("n", "C", neg=True), comp("b", "B")],
         equivalence=("x",), within=6),
    plan("run", [comp("a", "A"), comp("b", "B")], equivalence=("x",), within=6,
         where=[cmp("!=", attr("a", "y"), attr("b", "y"))],
         strategy="skip_till_next_match"),
]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ABC"), st.sampled_from(KEYS), st.integers(0, 2)),
                max_size=40),
       st.integers(1, 5))
def test_colliding_keys_match_as_the_reference(rows: list[tuple[str, int, int]],
                                               cut: int) -> None:
    spec = [(t, i, {"x": x, "y": y}) for i, (t, x, y) in enumerate(rows)]
    got, want = CythonEngine(PLANS), ReferenceEngine(PLANS)
    out_got, out_want = [], []
    pool = StringPool()
    for start in range(0, len(spec), cut):
        batch = tape(spec[start:start + cut], pool, first_seq=start)
        out_got += got.process(batch)
        out_want += want.process(batch)
    out_got += got.advance(10**9)
    out_want += want.advance(10**9)
    assert multiset(out_got) == multiset(out_want)
