"""The Cython engine builds its results without the dataclass' __init__ and
keeps them out of the cyclic GC (engine.pyx, `_derive`): they must still be
ordinary DerivedEvents, equal to (and hashing like) the reference engine's,
picklable, and untracked together with what they hold."""

from __future__ import annotations

import dataclasses
import gc
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.events.batch import StringPool
from caesar.plans.engine import DerivedEvent
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

from .tapes import attr, comp, multiset, plan, run, tape

P = plan("p", [comp("a", "A"), comp("b", "B", kleene=True), comp("c", "C")],
         equivalence=["x"], within=10, strategy="skip_till_next_match",
         fields={"ax": attr("a", "x"), "cs": attr("c", "s")})
ROWS = [("A", 1, {"x": 1, "s": "a"}), ("B", 2, {"x": 1}), ("B", 3, {"x": 1}),
        ("C", 4, {"x": 1, "s": "end"})]


def test_engine_results_are_plain_derived_events() -> None:
    got = run(CythonEngine([P]), [tape(ROWS)], 100)
    want = run(ReferenceEngine([P]), [tape(ROWS)], 100)
    assert len(got) == 1 and got == want
    ev = got[0]
    assert type(ev) is DerivedEvent
    assert ev == DerivedEvent("p", "p_out", 0, 1, 4, {"ax": 1, "cs": "end"}, (0, 1, 2, 3))
    assert hash(ev) == hash(want[0])
    assert pickle.loads(pickle.dumps(ev)) == ev
    assert dataclasses.replace(ev, plan_id="q").plan_id == "q"
    assert not gc.is_tracked(ev)
    assert not gc.is_tracked(ev.event_seqs)
    assert not gc.is_tracked(ev.fields)


def test_results_are_written_to_the_slots_directly() -> None:
    # engine.pyx falls back to attribute stores only if DerivedEvent ever
    # stops being a slots class: then this says the fast path is gone
    from caesar.services.matcher import engine

    assert engine.DIRECT_SLOTS


# The ints of seqs, start timestamps and INT fields come from a cache
# direct-mapped by their low 14 bits (engine.pyx, _int_of): values that
# share a slot, negative ones and ones beyond 32 bits must never be mixed up.
_SLOT = 16384
_VALUES = st.sampled_from([0, 1, -1, 5, 5 + _SLOT, 5 - _SLOT, 2**40 + 5, -(2**40) + 5,
                           2**62, -(2**62), _SLOT - 1, 2 * _SLOT - 1])


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from("ABC"), st.integers(0, 3), _VALUES),
                     min_size=1, max_size=30),
       start=st.sampled_from([0, _SLOT - 7, 3 * _SLOT + 2, -(2**40), 2**40 - 3]),
       first_seq=st.sampled_from([0, 5, _SLOT - 2, 2**33]),
       split=st.integers(0, 30))
def test_cached_ints_never_mix_up_values(rows: list[tuple[str, int, int]], start: int,
                                         first_seq: int, split: int) -> None:
    p = plan("q", [comp("a", "A"), comp("b", "B"), comp("c", "C")], within=40,
             fields={"ax": attr("a", "x"), "cx": attr("c", "x")})
    ts, spec = start, []
    for t, gap, x in rows:
        ts += gap
        spec.append((t, ts, {"x": x}))
    cut = min(split, len(spec))
    pool = StringPool()
    batches = [tape(spec[:cut], pool, first_seq=first_seq),
               tape(spec[cut:], pool, first_seq=first_seq + cut)]
    got = run(CythonEngine([p]), batches, start + 10**6)
    want = run(ReferenceEngine([p]), batches, start + 10**6)
    assert multiset(got) == multiset(want)
    for ev in got:
        assert ev.fields["ax"] == spec[ev.event_seqs[0] - first_seq][2]["x"]
        assert ev.start_ts == spec[ev.event_seqs[0] - first_seq][1]
