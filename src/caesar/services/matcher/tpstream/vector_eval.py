"""The expression IR (plans/expr.py) evaluated over a batch's columns at once
(numpy), with the tree walker's semantics (services/matcher/expr_eval.py):
missing values are unknown, AND/OR/NOT are three-valued, a condition holds
only when it is known true, `/` is float division and `%` Python's modulo
(both unknown on a zero divisor), strings compare only with `=`/`!=`, bools
count as 0/1. The temporal engine evaluates situation conditions and
aggregate arguments with it, one numpy pass per batch instead of a Python
call per event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from caesar.events.batch import StringPool, TypeColumns
from caesar.plans.expr import Agg, Attr, Binary, Call, Const, Expr, Unary


@dataclass
class Vec:
    kind: str  # "num" | "bool" | "str"
    value: np.ndarray  # num: int64/float64, bool: bool (truth), str: int codes
    known: np.ndarray  # bool


def _full(n: int, value: object, dtype: Any) -> np.ndarray:
    return np.full(n, value, dtype=dtype)


def evaluate(expr: Expr, cols: TypeColumns, strings: StringPool) -> Vec:
    node = _NODES.get(type(expr))
    if node is None:
        raise TypeError(f"not an expression: {expr!r}")
    return node(expr, cols, strings)


def _const(expr: Const, cols: TypeColumns, strings: StringPool) -> Vec:
    n, c = len(cols), expr.value
    if isinstance(c, bool):
        return Vec("bool", _full(n, c, bool), _full(n, True, bool))
    if isinstance(c, str):
        return Vec("str", _full(n, strings.code(c), np.int64), _full(n, True, bool))
    dtype = np.int64 if isinstance(c, int) else np.float64
    return Vec("num", _full(n, c, dtype), _full(n, True, bool))


def _attr(expr: Attr, cols: TypeColumns, strings: StringPool) -> Vec:
    n = len(cols)
    col = cols.columns.get(expr.name)
    if col is None:
        return Vec("num", np.zeros(n, np.int64), _full(n, False, bool))
    nulls = cols.nulls.get(expr.name)
    known = ~nulls if nulls is not None else _full(n, True, bool)
    # int32 columns hold string codes (negative: no string), int8 bools
    if col.dtype.kind == "i" and col.dtype.itemsize == 4:
        return Vec("str", col.astype(np.int64), known & (col >= 0))
    if col.dtype.kind == "i" and col.dtype.itemsize == 1:
        return Vec("num", col.astype(np.int64), known)
    return Vec("num", col, known)


def _unary(expr: Unary, cols: TypeColumns, strings: StringPool) -> Vec:
    if expr.op == "NOT":
        t = truth(evaluate(expr.operand, cols, strings))
        return Vec("bool", ~t.value, t.known)
    if expr.op == "-":
        v = evaluate(expr.operand, cols, strings)
        return Vec("num", -v.value, v.known) if v.kind == "num" else _unknown(len(cols))
    raise TypeError(f"not an expression: {expr!r}")


def _binary(expr: Binary, cols: TypeColumns, strings: StringPool) -> Vec:
    a, b = evaluate(expr.left, cols, strings), evaluate(expr.right, cols, strings)
    if expr.op == "AND":
        return _and(truth(a), truth(b))
    if expr.op == "OR":
        return _or(truth(a), truth(b))
    if expr.op in ("=", "!=", "<", "<=", ">", ">="):
        return _compare(expr.op, a, b)
    return _arith(expr.op, a, b)


def _call_node(expr: Call, cols: TypeColumns, strings: StringPool) -> Vec:
    return _call(expr.func, [evaluate(a, cols, strings) for a in expr.args], len(cols))


def _agg(expr: Agg, cols: TypeColumns, strings: StringPool) -> Vec:
    raise TypeError("aggregates are not evaluated per event")


# One function per node kind (a numpy pass per node and batch).
_NODES: dict[type, Callable[[Any, TypeColumns, StringPool], Vec]] = {
    Const: _const, Attr: _attr, Unary: _unary, Binary: _binary, Call: _call_node, Agg: _agg}


def holds(expr: Expr, cols: TypeColumns, strings: StringPool) -> np.ndarray:
    """Per event: does the condition hold (known and true)?"""
    t = truth(evaluate(expr, cols, strings))
    return t.value & t.known


def numbers(expr: Expr, cols: TypeColumns, strings: StringPool) -> tuple[np.ndarray, np.ndarray]:
    """Per event: the value as float64 (string codes, bools as 0/1) and whether it is known."""
    v = evaluate(expr, cols, strings)
    return v.value.astype(np.float64), v.known.copy()


def truth(v: Vec) -> Vec:
    if v.kind == "bool":
        return v
    if v.kind == "num":
        return Vec("bool", v.value != 0, v.known)
    return Vec("bool", np.zeros(len(v.value), bool), np.zeros(len(v.value), bool))


def _unknown(n: int) -> Vec:
    return Vec("num", np.zeros(n, np.int64), np.zeros(n, bool))


def _and(a: Vec, b: Vec) -> Vec:
    """Three-valued AND: false if either side is known false."""
    false = (a.known & ~a.value) | (b.known & ~b.value)
    true = a.known & a.value & b.known & b.value
    return Vec("bool", true, true | false)


def _or(a: Vec, b: Vec) -> Vec:
    """Three-valued OR: true if either side is known true."""
    true = (a.known & a.value) | (b.known & b.value)
    false = a.known & ~a.value & b.known & ~b.value
    return Vec("bool", true, true | false)


def _as_num(v: Vec) -> Vec | None:
    if v.kind == "num":
        return v
    if v.kind == "bool":
        return Vec("num", v.value.astype(np.int64), v.known)
    return None


def _compare(op: str, a: Vec, b: Vec) -> Vec:
    n = len(a.value)
    if a.kind == "str" or b.kind == "str":
        if a.kind != b.kind or op not in ("=", "!="):
            return Vec("bool", np.zeros(n, bool), np.zeros(n, bool))
        eq = a.value == b.value
        return Vec("bool", eq if op == "=" else ~eq, a.known & b.known)
    x, y = _as_num(a), _as_num(b)
    assert x is not None and y is not None
    known = x.known & y.known
    for v in (x.value, y.value):
        if v.dtype.kind == "f":
            known &= ~np.isnan(v)
    with np.errstate(invalid="ignore"):
        value = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
                 ">": np.greater, ">=": np.greater_equal}[op](x.value, y.value)
    return Vec("bool", value, known)


def _arith(op: str, a: Vec, b: Vec) -> Vec:
    x, y = _as_num(a), _as_num(b)
    if x is None or y is None:
        return _unknown(len(a.value))
    known = x.known & y.known
    with np.errstate(all="ignore"):
        if op == "+":
            return Vec("num", x.value + y.value, known)
        if op == "-":
            return Vec("num", x.value - y.value, known)
        if op == "*":
            return Vec("num", x.value * y.value, known)
        nonzero = y.value != 0
        safe = np.where(nonzero, y.value, 1)
        if op == "/":
            return Vec("num", x.value.astype(np.float64) / safe, known & nonzero)
        return Vec("num", np.mod(x.value, safe), known & nonzero)


def _call(func: str, args: list[Vec], n: int) -> Vec:
    nums = [_as_num(a) for a in args]
    if any(v is None for v in nums):
        return _unknown(n)
    vs = [v for v in nums if v is not None]
    known = np.ones(n, bool)
    for v in vs:
        known &= v.known
    if func == "abs":
        return Vec("num", np.abs(vs[0].value), known)
    if func in ("floor", "ceil"):
        x = vs[0].value
        if x.dtype.kind == "f":
            finite = np.isfinite(x)
            rounded = np.floor(x) if func == "floor" else np.ceil(x)
            return Vec("num", np.where(finite, rounded, 0).astype(np.int64), known & finite)
        return Vec("num", x, known)
    out = vs[0].value
    for v in vs[1:]:
        out = np.minimum(out, v.value) if func == "least" else np.maximum(out, v.value)
    return Vec("num", out, known)
