"""The Cython engine builds its results without the dataclass' __init__ and
keeps them out of the cyclic GC (engine.pyx, `_derive`): they must still be
ordinary DerivedEvents, equal to (and hashing like) the reference engine's,
picklable, and untracked together with what they hold."""

from __future__ import annotations

import dataclasses
import gc
import pickle

from caesar.plans.engine import DerivedEvent
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

from .tapes import attr, comp, plan, run, tape

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
