"""User-defined functions in the language: signatures from annotations or
declared, import paths, the registry, and the errors a user gets (unknown
function, wrong arity or argument type with line and column; bad
signatures, reserved names, unimportable paths, TPStream queries)."""

from __future__ import annotations

import pickle

import pytest

import caesar
from caesar.errors import CaesarError, ModelError
from caesar.plans.functions import REGISTRY, Function, define, resolve

HEAD = 'EVENT Pos(ts INT, car INT, lat DOUBLE, lon DOUBLE, name STRING) FROM TOPIC "p"\n'
KM = "caesar.examples.geo:haversine_km"


def shout(s: str) -> str:
    return s.upper()


def test_signature_from_annotations_and_import_path():
    f = define("km", KM)
    assert (f.params, f.returns, f.target) == (("float",) * 4, "float", KM)
    g = define("shout", shout)
    assert (g.params, g.returns) == (("string",), "string")
    assert g.target == f"{__name__}:shout"  # importable: deployable by path


def test_declared_signature_wins_and_lambdas_stay_local():
    f = define("twice", lambda x: 2 * x, params=["INT"], returns="long")
    assert (f.params, f.returns, f.target) == (("int",), "int", None)
    with pytest.raises(CaesarError, match="cannot leave this process"):
        pickle.dumps(f)
    g = pickle.loads(pickle.dumps(define("km", KM)))  # by path, no code
    assert g == define("km", KM) and g.invoke([0.0, 0.0, 0.0, 1.0]) == pytest.approx(111.195, 1e-3)


@pytest.mark.parametrize(("fn", "message"), [
    (lambda x: x, "cannot read its signature|no type annotation"),
    ("caesar.examples.geo:nothing", "has no nothing"),
    ("caesar.examples.nowhere:f", "cannot import"),
    ("caesar.examples.geo", "expected 'package.module:function'"),
])
def test_bad_functions_are_clear_errors(fn, message):
    with pytest.raises(CaesarError, match=message):
        define("f", fn)


def test_reserved_names():
    with pytest.raises(CaesarError, match="built-in"):
        define("abs", shout)


def test_model_calls_them_with_checked_types():
    model = caesar.compile(
        HEAD + "DERIVE Far(a.car, km(a.lat, a.lon, b.lat, b.lon) AS d, shout(b.name) AS n)\n"
        "  PATTERN SEQ(Pos a, Pos b) WHERE km(a.lat, a.lon, b.lat, b.lon) > 1 AND a.car < 3\n"
        "  WITHIN 10\n", functions={"km": KM, "shout": shout})
    assert {f.name for f in model.plan.functions} == {"km", "shout"}
    out = model.event_types["Far"]
    assert out["d"] == "float" and out["n"] == "string"


@pytest.mark.parametrize(("body", "pos", "message"), [
    ("DERIVE X(kmh(a.lat) AS d) PATTERN Pos a", (2, 10), "unknown function kmh"),
    ("DERIVE X(km(a.lat, a.lon) AS d) PATTERN Pos a", (2, 10),
     "wrong number of arguments to km.*expected 4: km\\(FLOAT, FLOAT, FLOAT, FLOAT\\)"),
    ("DERIVE X(a.car) PATTERN Pos a WHERE shout(a.car) = 'X'", (2, 43),
     "argument 1 of shout has the wrong type; found int; expected string"),
    ("DERIVE X(a.car) PATTERN Pos a WHERE km(a.lat, a.lon, 1, 2)", (2, 37),
     "a condition must be true or false"),
])
def test_call_errors_name_line_and_column(body, pos, message):
    with pytest.raises(ModelError, match=message) as info:
        caesar.compile(HEAD + body, functions={"km": KM, "shout": shout})
    assert info.value.position is not None
    assert (info.value.position.line, info.value.position.column) == pos


def test_int_arguments_go_to_float_parameters():
    caesar.compile(HEAD + "DERIVE X(km(a.car, 0, 1, 2) AS d) PATTERN Pos a", functions={"km": KM})


def test_not_in_tpstream_queries_yet():
    with pytest.raises(ModelError, match="TPStream query"):
        caesar.compile(HEAD + "DERIVE X(first(S.car) AS c) FROM Pos P\n"
                       "  DEFINE S AS km(P.lat, P.lon, 0, 0) > 10, T AS P.lat > 1\n"
                       "  PATTERN S BEFORE T WITHIN 10", functions={"km": KM})


def test_registry_decorator():
    @caesar.function(name="dbl", params=[float], returns=float)
    def _dbl(x):
        return 2 * x

    try:
        assert isinstance(REGISTRY["dbl"], Function)
        assert "dbl" in resolve(None)
        caesar.compile(HEAD + "DERIVE X(dbl(a.lat) AS d) PATTERN Pos a")
        # functions= wins over the registry by name
        with pytest.raises(ModelError, match="wrong type"):
            caesar.compile(HEAD + "DERIVE X(dbl(a.lat) AS d) PATTERN Pos a",
                           functions={"dbl": shout})
    finally:
        REGISTRY.pop("dbl", None)
