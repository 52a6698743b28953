"""Tree-walking evaluator of the expression IR (src/caesar/plans/expr.py).

Used by the reference matcher (the test oracle). The Cython engine compiles
the same IR to instruction arrays (src/caesar/services/matcher/compile.py) and must agree
with this module on every value, including the missing-value rules:

- a missing attribute (absent or null) is `MISSING`; arithmetic on it is
  MISSING, a comparison reading it is unknown (MISSING);
- AND/OR/NOT are three-valued (unknown = MISSING), and a conjunct holds only
  when it evaluates to exactly True;
- INT/LONG values are 64-bit integers: `+ - *`, unary minus, `abs`, `sum` and
  `floor`/`ceil` of a DOUBLE are exact, and a result outside the 64-bit range
  is an overflow: the value is MISSING and `overflows.count` grows (the
  engines report it per plan). Comparisons between integers and DOUBLEs are
  exact (Python's: 2**53 + 1 > 2.0**53), never by rounding the integer;
- an integer and a DOUBLE in `+ - * %` give a DOUBLE (the integer rounded to
  the nearest double first); `/` always converts both operands to DOUBLE
  first (as Java and Esper do), `%` is Python's modulo (the sign of the
  divisor), both MISSING on a zero divisor;
- strings compare only with `=` and `!=`, and only with strings (anything
  else is unknown);
- bools take part in arithmetic and comparisons as 0/1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from caesar.plans.expr import Agg, Attr, Binary, Call, Const, Expr, Unary


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class _Overflows:
    """How many integer results fell outside 64 bits (each made MISSING).
    The reference matcher reads it around each plan's work; not thread-safe,
    like the rest of the oracle."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


overflows = _Overflows()


def _int64(value: int) -> Any:
    """`value` if it fits in 64 bits, else MISSING (counted)."""
    if INT64_MIN <= value <= INT64_MAX:
        return value
    overflows.count += 1
    return MISSING

Lookup = Callable[[str | None, str], Any]
AggLookup = Callable[[Agg], Any]


def _num(value: Any) -> int | float:
    # bools behave as ints in arithmetic (True + 1 == 2)
    return int(value) if isinstance(value, bool) else value


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and value is not MISSING


def _arith(op: str, left: Any, right: Any) -> Any:
    if left is MISSING or right is MISSING or not (_is_num(left) and _is_num(right)):
        return MISSING
    a, b = _num(left), _num(right)
    both_int = isinstance(a, int) and isinstance(b, int)
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    elif b == 0:
        return MISSING
    elif op == "/":
        return float(a) / float(b)
    else:
        r = a % b
    return _int64(r) if both_int and isinstance(r, int) else r


def _compare(op: str, left: Any, right: Any) -> Any:
    if left is MISSING or right is MISSING:
        return MISSING
    left_str, right_str = isinstance(left, str), isinstance(right, str)
    if left_str or right_str:
        if not (left_str and right_str) or op not in ("=", "!="):
            return MISSING
        return (left == right) if op == "=" else (left != right)
    a, b = _num(left), _num(right)
    if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
        return MISSING
    return {
        "=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,
    }[op]


def _truth(value: Any) -> Any:
    """Three-valued truth: True, False or MISSING (unknown)."""
    if value is MISSING:
        return MISSING
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return MISSING


def evaluate(expr: Expr, lookup: Lookup, agg: AggLookup | None = None) -> Any:
    """Value of `expr`; `lookup(var, name)` reads attributes (MISSING if
    absent), `agg(node)` computes an aggregate node."""
    match expr:
        case Const(value=value):
            return value
        case Attr(var=var, name=name):
            value = lookup(var, name)
            return MISSING if value is None else value
        case Unary(op=op, operand=operand):
            return _unary(op, evaluate(operand, lookup, agg))
        case Binary(op="AND" | "OR", left=left, right=right):
            return _logical(expr.op == "AND", left, right, lookup, agg)
        case Binary(op=op, left=left, right=right) if op in ("=", "!=", "<", "<=", ">", ">="):
            return _compare(op, evaluate(left, lookup, agg), evaluate(right, lookup, agg))
        case Binary(op=op, left=left, right=right):
            return _arith(op, evaluate(left, lookup, agg), evaluate(right, lookup, agg))
        case Call(func=func, args=args):
            values = [evaluate(a, lookup, agg) for a in args]
            return call(func, values)
        case Agg():
            return MISSING if agg is None else agg(expr)
    raise TypeError(f"not an expression: {expr!r}")


def _unary(op: str, value: Any) -> Any:
    if op == "NOT":
        truth = _truth(value)
        return MISSING if truth is MISSING else not truth
    if not _is_num(value):
        return MISSING
    n = -_num(value)
    return _int64(n) if isinstance(n, int) else n


def _logical(conjunction: bool, left: Expr, right: Expr, lookup: Lookup,
             agg: AggLookup | None) -> Any:
    """AND (`conjunction`) or OR in three-valued logic: a false (AND) or true
    (OR) side decides, the right side unevaluated if the left one does; else
    missing if either side is."""
    decisive = not conjunction
    a = _truth(evaluate(left, lookup, agg))
    if a is decisive:
        return decisive
    b = _truth(evaluate(right, lookup, agg))
    if b is decisive:
        return decisive
    return MISSING if (a is MISSING or b is MISSING) else conjunction


def call(func: str, values: Sequence[Any]) -> Any:
    if not values or any(v is MISSING or not _is_num(v) for v in values):
        return MISSING
    nums = [_num(v) for v in values]
    if func == "abs":
        return _int64(abs(nums[0])) if isinstance(nums[0], int) else abs(nums[0])
    if func in ("floor", "ceil"):
        x = nums[0]
        if isinstance(x, int):
            return x
        if not math.isfinite(x):
            return MISSING
        return _int64(math.floor(x) if func == "floor" else math.ceil(x))
    if func == "least":
        return min(nums)
    if func == "greatest":
        return max(nums)
    raise TypeError(f"unknown function {func}")


def aggregate(func: str, values: Sequence[Any]) -> Any:
    """Cayuga-style FOLD result over the per-event values of the argument
    (`count` without argument gets one True per event). MISSING values are
    skipped except by `first`/`last`, which report the first/last event's."""
    if func == "first":
        return values[0] if values else MISSING
    if func == "last":
        return values[-1] if values else MISSING
    present = [v for v in values if v is not MISSING]
    if func == "count":
        return len(present)
    if func == "count_distinct":
        return len(set(present))
    return _numeric_fold(func, [_num(v) for v in present if _is_num(v)])


def _numeric_fold(func: str, nums: list[int | float]) -> Any:
    if not nums:
        return MISSING
    if func in ("sum", "avg"):
        total: int | float = 0
        for v in nums:  # left to right: exact while all are integers
            total = total + v
        if func == "avg":
            return float(total) / len(nums)
        return _int64(total) if isinstance(total, int) else total
    if func == "min":
        return min(nums)
    if func == "max":
        return max(nums)
    raise TypeError(f"unknown aggregate {func}")


def holds(expr: Expr, lookup: Lookup, agg: AggLookup | None = None) -> bool:
    """A conjunct holds only when it is exactly true (unknown is false)."""
    return _truth(evaluate(expr, lookup, agg)) is True
