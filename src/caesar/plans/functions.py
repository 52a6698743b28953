"""User-defined scalar functions: Python callables a model calls by name in
WHERE, FILTER, DERIVE/RETURN and aggregate arguments (docs/python.md).

A `Function` is what the compiler checks calls against (a name, parameter
types, a return type) and what engines call (`invoke`). It names its Python
callable by an importable path `"package.module:qualname"`, so a plan sent to
a Ray actor carries the path, never the code: the actor imports it (a plan is
never built from bus data, and no text is ever eval'ed). A function without
such a path (a lambda, a function defined in `__main__` or inside another
function) runs in this process only; deploying it is an error.

Semantics every engine follows (src/caesar/plans/expr.py has the rest):
- a missing argument makes the call missing; the function is not called;
- an INT argument passed where the function declares FLOAT arrives as float;
- `None` returned means missing;
- an exception raised by the function, or a value of the wrong type (an INT
  outside 64 bits is wrong too), makes the call missing and is reported as a
  `FunctionFailure` (the services turn it into a dead letter with the reason).
"""

from __future__ import annotations

import importlib
import inspect
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, get_type_hints

from caesar.errors import CaesarError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
TYPES = ("int", "float", "string", "bool")
# Python annotations -> model types (INT/LONG, DOUBLE/FLOAT, STRING, BOOL)
_ANNOTATIONS: dict[Any, str] = {int: "int", float: "float", str: "string", bool: "bool"}
_NAMES = {"int": "int", "integer": "int", "long": "int", "float": "float", "double": "float",
          "str": "string", "string": "string", "bool": "bool", "boolean": "bool"}
# names a model already gives a meaning (builtins, aggregates)
RESERVED = frozenset({"abs", "floor", "ceil", "least", "greatest", "count", "sum", "avg",
                      "min", "max", "first", "last"})


class FunctionFailure(CaesarError):
    """A call that raised or returned a value of the wrong type."""

    def __init__(self, function: str, reason: str) -> None:
        self.function = function
        self.reason = reason
        super().__init__(f"user-defined function {reason}")


@dataclass(frozen=True, eq=False)
class Function:
    name: str
    params: tuple[str, ...]  # model types: "int", "float", "string", "bool"
    returns: str
    target: str | None  # "package.module:qualname"; None: this process only
    impl: Callable[..., Any] | None = field(default=None, repr=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Function) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[Any, ...]:
        return (self.name, self.params, self.returns, self.target or id(self.impl))

    def __reduce__(self) -> tuple[Any, ...]:
        # a plan travels (to Ray actors) with the import path only
        if self.target is None:
            raise CaesarError(f"function {self.name} cannot leave this process: define it at "
                              "module level in an importable module, or name it as "
                              "'package.module:function'")
        return (Function, (self.name, self.params, self.returns, self.target))

    def callable(self) -> Callable[..., Any]:
        if self.impl is not None:
            return self.impl
        assert self.target is not None
        impl = import_target(self.target)
        object.__setattr__(self, "impl", impl)
        return impl

    def invoke(self, args: Sequence[Any]) -> Any:
        """The checked result of a call (None: missing). Arguments are plain
        Python values; None is missing. Raises FunctionFailure."""
        if any(a is None for a in args):
            return None
        values = [float(a) if p == "float" and not isinstance(a, float) else a
                  for a, p in zip(args, self.params, strict=True)]
        try:
            result = self.callable()(*values)
        except Exception as exc:  # the user's code: any failure is data, not a crash
            raise FunctionFailure(self.name, f"{self._call_text(values)} raised "
                                  f"{type(exc).__name__}: {exc}") from None
        try:
            return self.check_result(result)
        except FunctionFailure as failure:
            raise FunctionFailure(self.name, f"{self._call_text(values)} "
                                  f"{failure.reason}") from None

    def _call_text(self, values: Sequence[Any]) -> str:
        text = f"{self.name}({', '.join(repr(v) for v in values)})"
        return text if len(text) <= 200 else text[:197] + "..."

    def check_result(self, value: Any) -> Any:
        if value is None:
            return None
        t = self.returns
        if t == "bool" and isinstance(value, (bool, _np_bool())):
            return bool(value)
        if isinstance(value, bool):
            pass  # a bool is not a number here
        elif t == "int" and isinstance(value, numbers.Integral):
            if INT64_MIN <= int(value) <= INT64_MAX:
                return int(value)
            raise FunctionFailure(self.name, f"returned {int(value)}, outside the 64-bit range")
        elif t == "float" and isinstance(value, numbers.Real):
            return float(value)
        elif t == "string" and isinstance(value, str):
            return value
        raise FunctionFailure(self.name, f"returned {type(value).__name__} {value!r}, "
                              f"declared {t.upper()}")


def _np_bool() -> type:
    import numpy as np

    return np.bool_


def import_target(target: str) -> Callable[..., Any]:
    """The callable at 'package.module:qualname' (import only, never eval)."""
    module, sep, qualname = target.partition(":")
    if not sep or not module or not qualname:
        raise CaesarError(f"function path {target!r}: expected 'package.module:function'")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise CaesarError(f"function path {target!r}: cannot import {module}: {exc}") from None
    for part in qualname.split("."):
        if not part.isidentifier():
            raise CaesarError(f"function path {target!r}: {part!r} is not a Python name")
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CaesarError(f"function path {target!r}: {module} has no {qualname}") from None
    if not callable(obj):
        raise CaesarError(f"function path {target!r} is not callable")
    return obj


def _target_of(fn: Callable[..., Any]) -> str | None:
    """fn's import path when importing it gives fn back, else None."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    target = f"{module}:{qualname}"
    try:
        found = import_target(target)
    except CaesarError:
        return None
    return target if found is fn else None


def _type_name(t: Any, what: str, name: str) -> str:
    if isinstance(t, str):
        key = _NAMES.get(t.lower())
        if key is not None:
            return key
    elif t in _ANNOTATIONS:
        return _ANNOTATIONS[t]
    raise CaesarError(f"function {name}: {what} has type {t!r}; use int, float, str or bool "
                      "(INT, DOUBLE, STRING, BOOL)")


def define(name: str, fn: Callable[..., Any] | str, params: Sequence[Any] | None = None,
           returns: Any = None) -> Function:
    """A Function from a callable or an import path; the signature from
    `params`/`returns` when given, else from the callable's annotations."""
    if not name.isidentifier() or name.lower() in RESERVED:
        raise CaesarError(f"function name {name!r}: "
                          + ("a built-in function or aggregate has it" if name.isidentifier()
                             else "not a name a model can call"))
    target = fn if isinstance(fn, str) else _target_of(fn)
    impl = import_target(fn) if isinstance(fn, str) else fn
    if not callable(impl):
        raise CaesarError(f"function {name}: {impl!r} is not callable")
    if params is None or returns is None:
        hinted = _annotations(name, impl)
        params = hinted[0] if params is None else params
        returns = hinted[1] if returns is None else returns
    ptypes = tuple(_type_name(p, f"parameter {i + 1}", name) for i, p in enumerate(params))
    return Function(name, ptypes, _type_name(returns, "the result", name), target,
                    None if isinstance(fn, str) else impl)


def _annotations(name: str, impl: Callable[..., Any]) -> tuple[list[Any], Any]:
    try:
        sig = inspect.signature(impl)
        hints = get_type_hints(impl)
    except (TypeError, ValueError, NameError) as exc:
        raise CaesarError(f"function {name}: cannot read its signature ({exc}); declare "
                          "params= and returns=") from None
    params = []
    for p in sig.parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or \
                p.default is not p.empty:
            raise CaesarError(f"function {name}: parameter {p.name} must be positional "
                              "without a default (a model passes every argument)")
        if p.name not in hints:
            raise CaesarError(f"function {name}: parameter {p.name} has no type annotation; "
                              "annotate it or declare params=")
        params.append(hints[p.name])
    if "return" not in hints:
        raise CaesarError(f"function {name}: no return annotation; annotate it or declare "
                          "returns=")
    return params, hints["return"]


def function(fn: Callable[..., Any] | None = None, *, name: str | None = None,
             params: Sequence[Any] | None = None, returns: Any = None) -> Any:
    """Decorator: register a function for every `caesar.compile` of this
    process (`functions=` passed to compile wins over it by name).

        @caesar.function
        def haversine(lat1: float, lon1: float, lat2: float, lon2: float) -> float: ...
    """
    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        fname = name or f.__name__
        REGISTRY[fname] = define(fname, f, params, returns)
        return f

    return register(fn) if fn is not None else register


# name -> Function: what @caesar.function registered in this process
REGISTRY: dict[str, Function] = {}


def resolve(functions: Mapping[str, Callable[..., Any] | str | Function] | None
            ) -> dict[str, Function]:
    """The functions a compilation sees: the registry, then `functions`."""
    out = dict(REGISTRY)
    for name, fn in (functions or {}).items():
        if isinstance(fn, Function):
            out[name] = fn if fn.name == name else replace(fn, name=name)
        else:
            out[name] = define(name, fn)
    return out
