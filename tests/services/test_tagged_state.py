"""The engines' state as tagged plain data (services/store/tagged.py): the
fast encoder gives exactly what the plain recursive definition below gives,
for any nested value the engines keep, and decodes back to the value."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.services.matcher import windows  # noqa: F401  (registers the MISSING marker)
from caesar.services.matcher.expr_eval import MISSING
from caesar.services.matcher.reference import Ev
from caesar.services.store import tagged
from caesar.services.store.state_format import StateFormatError, pack, unpack

INT64 = (-(2**63), 2**64 - 1)


def reference(value: Any) -> Any:
    """The definition: markers by name, tuples / sets / non-string maps /
    big integers / registered records tagged, everything else as itself."""
    if value is MISSING:
        return {"$o": "missing"}
    if value is None or isinstance(value, bool | float | str | bytes):
        return value
    if isinstance(value, int):
        return value if INT64[0] <= value <= INT64[1] else {"$i": str(value)}
    if isinstance(value, list):
        return [reference(v) for v in value]
    if isinstance(value, tuple):
        return {"$t": [reference(v) for v in value]}
    if isinstance(value, set | frozenset):
        return {"$s": [reference(v) for v in sorted(value, key=repr)]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: reference(v) for k, v in value.items()}
        return {"$d": [[reference(k), reference(v)] for k, v in value.items()]}
    return {"$c": type(value).__name__, "f": {f.name: reference(getattr(value, f.name))
                                              for f in dataclasses.fields(value)}}


class Flag(int):
    """An int subclass (IntEnum-like): stored as an integer."""


scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                    st.floats(allow_nan=False), st.text(max_size=5), st.binary(max_size=5),
                    st.just(MISSING), st.integers(0, 3).map(Flag))
keys = st.one_of(st.text(max_size=4), st.integers(-5, 5), st.tuples(st.integers(0, 3)))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.lists(inner, max_size=5).map(tuple),
    st.dictionaries(keys, inner, max_size=4),
    st.frozensets(st.integers(-3, 3), max_size=3)), max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(values)
def test_encode_is_the_definition_and_round_trips(value):
    data = tagged.encode(value)
    assert data == reference(value)
    back = tagged.decode(unpack(pack(data)))
    assert tagged.encode(back) == data


def test_records_and_markers():
    ev = Ev("X", 1, 2, {"a": (1, 2), "b": None})
    assert tagged.encode([ev, (ev,)]) == [reference(ev), {"$t": [reference(ev)]}]
    assert tagged.decode(unpack(pack(tagged.encode([ev])))) == [ev]
    assert tagged.encode((MISSING, [MISSING])) == {"$t": [{"$o": "missing"}, [{"$o": "missing"}]]}


@pytest.mark.parametrize("marker", [None, 0, "x", b"", 1.5, True, [], ()])
def test_plain_values_cannot_be_markers(marker):
    with pytest.raises(TypeError, match="marker"):
        tagged.register_singleton("bad", marker)


def test_an_unregistered_object_is_refused():
    class Thing:
        pass

    with pytest.raises(StateFormatError, match="Thing"):
        tagged.encode([1, (2, Thing())])
