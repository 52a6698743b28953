"""Vectorized evaluation of the expression IR over numpy columns (windowed
aggregation: WHERE on the source events, aggregate arguments, HAVING).

Follows src/caesar/plans/expr.py like the pattern engines do: INT/LONG
columns stay int64 and are exact (`+ - *`, unary minus, `abs` and
`floor`/`ceil` of a DOUBLE outside 64 bits make the value missing and count
an overflow); an int compared with a DOUBLE is compared exactly (numpy would
round the int to a double first); `/` converts both sides to DOUBLE; a
comparison reading a missing value or NaN is false (unknown); strings are
interned codes, so only `=` and `!=` make sense on them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from caesar.errors import PlanError
from caesar.events.batch import StringPool
from caesar.plans.aggregate import AggregatePlan
from caesar.plans.expr import Attr, Binary, Call, Const, Expr, Unary
from caesar.plans.functions import Function, FunctionFailure

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
TWO63 = 2.0**63
Column = tuple[np.ndarray, np.ndarray]  # (values, missing mask)


def _is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iub"


def exact_sign(lv: np.ndarray, rv: np.ndarray) -> np.ndarray:
    """-1 / 0 / 1 per row comparing two numeric columns exactly (NaN rows: 0;
    callers mask them). Mixed int/float rows are decided as floats and, on a
    tie, on the integers: a tie means the float is an integer value."""
    if _is_int(lv) and _is_int(rv):
        li, ri = lv.astype(np.int64), rv.astype(np.int64)
        return (li > ri).astype(np.int64) - (li < ri).astype(np.int64)
    if not _is_int(lv) and not _is_int(rv):
        lf, rf = lv.astype(np.float64), rv.astype(np.float64)
        return (lf > rf).astype(np.int64) - (lf < rf).astype(np.int64)
    flip = _is_int(rv)
    ints, floats = (rv, lv) if flip else (lv, rv)
    ints = ints.astype(np.int64)
    floats = floats.astype(np.float64)
    as_f = ints.astype(np.float64)
    sign = (as_f > floats).astype(np.int64) - (as_f < floats).astype(np.int64)
    tie = as_f == floats
    if tie.any():
        f = floats[tie]
        top = f >= TWO63  # 2**63 itself: above every int64
        f_int = np.where(top, 0, f).astype(np.int64)
        i = ints[tie]
        s = (i > f_int).astype(np.int64) - (i < f_int).astype(np.int64)
        sign[tie] = np.where(top, -1, s)
    return -sign if flip else sign


class ColumnEvaluator:
    """Evaluates expressions over columns; counts integer overflows."""

    def __init__(self, strings: StringPool) -> None:
        self.strings = strings
        self.overflows = 0
        self.failures: list[FunctionFailure] = []  # user-defined function calls that failed

    def _overflow(self, mask: np.ndarray) -> np.ndarray:
        self.overflows += int(mask.sum())
        return mask

    def eval(self, expr: Expr, cols: Mapping[str, np.ndarray],
             missing: Mapping[str, np.ndarray], n: int) -> Column:
        none = np.zeros(n, dtype=bool)
        match expr:
            case Const(value=value):
                return self._const(value, n), none
            case Attr(name=name):
                if name not in cols:
                    return np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)
                return cols[name], missing.get(name, none)
            case Unary(op=op, operand=operand):
                return self._unary(op, *self.eval(operand, cols, missing, n), none)
            case Binary(op=op, left=left, right=right):
                lv, lm = self.eval(left, cols, missing, n)
                rv, rm = self.eval(right, cols, missing, n)
                return self._binary(op, lv, lm, rv, rm, none)
            case Call(func=func, args=args, udf=udf):
                vals = [self.eval(a, cols, missing, n) for a in args]
                return self._call(func, vals, n) if udf is None else self._udf(udf, vals, n)
        raise PlanError(f"expression not supported in an aggregation: {expr!r}")

    def _const(self, value: Any, n: int) -> np.ndarray:
        if isinstance(value, str):
            return np.full(n, self.strings.code(value), dtype=np.int64)
        if isinstance(value, bool):
            return np.full(n, value, dtype=bool)
        if isinstance(value, int):
            return np.full(n, value, dtype=np.int64)
        return np.full(n, value, dtype=np.float64)

    def _unary(self, op: str, v: np.ndarray, m: np.ndarray, none: np.ndarray) -> Column:
        if op == "NOT":
            return ~(v.astype(bool)) & ~m, none
        if _is_int(v):
            vi = v.astype(np.int64)
            return -vi, m | self._overflow((vi == INT64_MIN) & ~m)
        return -v, m

    def _binary(self, op: str, lv: np.ndarray, lm: np.ndarray, rv: np.ndarray,
                rm: np.ndarray, none: np.ndarray) -> Column:
        if op == "AND":
            return lv.astype(bool) & rv.astype(bool) & ~lm & ~rm, none
        if op == "OR":
            return (lv.astype(bool) & ~lm) | (rv.astype(bool) & ~rm), none
        both = lm | rm
        if op in ("=", "!=", "<", "<=", ">", ">="):
            return _compare(op, lv, rv) & ~both, none
        if _is_int(lv) and _is_int(rv) and op != "/":
            return self._int_arith(op, lv.astype(np.int64), rv.astype(np.int64), both)
        return _float_arith(op, lv, rv, both)

    def _int_arith(self, op: str, a: np.ndarray, b: np.ndarray, both: np.ndarray) -> Column:
        with np.errstate(over="ignore"):
            if op == "%":
                zero = b == 0
                return np.mod(a, np.where(zero, 1, b)), both | zero
            if op == "+":
                r = a + b  # wraps; the signs tell an overflow
                ovf = ((a ^ r) & (b ^ r)) < 0
            elif op == "-":
                r = a - b
                ovf = ((a ^ b) & (a ^ r)) < 0
            elif op == "*":
                r = a * b
                # only rows with a factor of 2**31 or more can overflow: check
                # those with Python integers
                ovf = np.zeros(len(a), dtype=bool)
                big = (np.abs(a.astype(np.float64)) >= 2.0**31) | \
                    (np.abs(b.astype(np.float64)) >= 2.0**31)
                for i in np.nonzero(big)[0].tolist():
                    exact = int(a[i]) * int(b[i])
                    ovf[i] = not INT64_MIN <= exact <= INT64_MAX
            else:
                raise PlanError(f"unknown operator {op}")
        return r, both | self._overflow(ovf & ~both)

    def _udf(self, udf: Function, vals: Sequence[Column], n: int) -> Column:
        """A user-defined function, row by row (a Python call per row): the
        arguments decoded by its declared parameter types (the checker made
        them match), the results typed by its return type."""
        m = np.zeros(n, dtype=bool)
        for _, am in vals:
            m = m | am
        decode: dict[str, Callable[[Any], Any]] = {
            "int": int, "float": float, "bool": bool,
            "string": lambda code: self.strings.string(int(code))}
        convert = [decode[t] for t in udf.params]
        out: list[Any] = [None] * n
        for i in np.nonzero(~m)[0].tolist():
            try:
                out[i] = udf.invoke([c(v[i]) for c, (v, _) in zip(convert, vals, strict=True)])
            except FunctionFailure as failure:
                self.failures.append(failure)
        miss = np.fromiter((v is None for v in out), dtype=bool, count=n)
        fill = {"int": 0, "float": 0.0, "bool": False, "string": -1}[udf.returns]
        values = [fill if v is None else self.strings.code(v) if udf.returns == "string" else v
                  for v in out]
        dtype = {"int": np.int64, "float": np.float64, "bool": bool, "string": np.int64}
        return np.array(values, dtype=dtype[udf.returns]), miss

    def _call(self, func: str, vals: Sequence[Column], n: int) -> Column:
        m = np.zeros(n, dtype=bool)
        for _, am in vals:
            m = m | am
        v = vals[0][0]
        if func == "abs":
            if _is_int(v):
                vi = v.astype(np.int64)
                return np.abs(vi), m | self._overflow((vi == INT64_MIN) & ~m)
            return np.abs(v), m
        if func in ("floor", "ceil"):
            if _is_int(v):
                return v.astype(np.int64), m
            r = np.floor(v) if func == "floor" else np.ceil(v)
            bad = ~np.isfinite(r)
            out = ~bad & ((r >= TWO63) | (r < -TWO63))
            safe = np.where(bad | out, 0.0, r)
            return safe.astype(np.int64), m | bad | self._overflow(out & ~m)
        if func in ("least", "greatest"):
            out_v = vals[0][0]
            if not all(_is_int(x) for x, _ in vals):
                out_v = out_v.astype(np.float64)
            for x, _ in vals[1:]:
                sign = exact_sign(x, out_v)
                take = sign < 0 if func == "least" else sign > 0
                out_v = np.where(take, x.astype(out_v.dtype), out_v)
            return out_v, m
        raise PlanError(f"function {func} not supported in an aggregation")


def eval_columns(expr: Expr, cols: Mapping[str, np.ndarray], missing: Mapping[str, np.ndarray],
                 n: int, strings: StringPool) -> Column:
    """One-off evaluation (overflows are not counted)."""
    return ColumnEvaluator(strings).eval(expr, cols, missing, n)


def columns_from_records(records: Sequence[Mapping[str, Any]], names: Sequence[str],
                         strings: StringPool) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Column arrays for `names` (strings interned, None -> missing mask)."""
    cols: dict[str, np.ndarray] = {}
    missing: dict[str, np.ndarray] = {}
    for name in names:
        values = [r.get(name) for r in records]
        mask = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
        sample = next((v for v in values if v is not None), None)
        if isinstance(sample, str):
            arr = np.fromiter((-1 if v is None else strings.code(v) for v in values),
                              dtype=np.int64, count=len(values))
        elif isinstance(sample, float):
            arr = np.fromiter((0.0 if v is None else v for v in values), dtype=np.float64,
                              count=len(values))
        else:
            arr = np.fromiter((0 if v is None else v for v in values), dtype=np.int64,
                              count=len(values))
        cols[name] = arr
        if mask.any():
            missing[name] = mask
    return cols, missing


def plan_attributes(plan: AggregatePlan) -> list[str]:
    """The source attributes an aggregation reads (GROUP BY, arguments, WHERE)."""
    needed: set[str] = set(plan.group_by)
    for spec in plan.aggregates:
        needed |= attributes(spec.arg)
    for cond in plan.where:
        needed |= attributes(cond)
    return sorted(needed)


def having_holds(having: Sequence[Expr], row: Mapping[str, Any],
                 evaluator: ColumnEvaluator) -> bool:
    """HAVING on one result row of an aggregation."""
    if not having:
        return True
    names: set[str] = set()
    for cond in having:
        names |= attributes(cond)
    cols, missing = columns_from_records([row], sorted(names), evaluator.strings)
    return all(bool(evaluator.eval(c, cols, missing, 1)[0][0]) for c in having)


def attributes(expr: Expr | None) -> set[str]:
    match expr:
        case None | Const():
            return set()
        case Attr(name=name):
            return {name}
        case Unary(operand=operand):
            return attributes(operand)
        case Binary(left=left, right=right):
            return attributes(left) | attributes(right)
        case Call(args=args):
            out: set[str] = set()
            for a in args:
                out |= attributes(a)
            return out
    raise PlanError(f"expression not supported in an aggregation: {expr!r}")


def _compare(op: str, lv: np.ndarray, rv: np.ndarray) -> np.ndarray:
    """Exact comparison (int64 against double without rounding); NaN
    compares false."""
    nan = np.zeros(len(lv), dtype=bool)
    for side in (lv, rv):
        if side.dtype.kind == "f":
            nan |= np.isnan(side)
    sign = exact_sign(lv, rv)
    res = {"=": sign == 0, "!=": sign != 0, "<": sign < 0, "<=": sign <= 0,
           ">": sign > 0, ">=": sign >= 0}[op]
    return res & ~nan


def _float_arith(op: str, lv: np.ndarray, rv: np.ndarray, both: np.ndarray) -> Column:
    lf, rf = lv.astype(np.float64), rv.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if op == "+":
            return lf + rf, both
        if op == "-":
            return lf - rf, both
        if op == "*":
            return lf * rf, both
        zero = rf == 0
        safe = np.where(zero, 1.0, rf)
        if op == "/":
            return np.true_divide(lf, safe), both | zero
        if op == "%":
            return np.mod(lf, safe), both | zero
    raise PlanError(f"unknown operator {op}")
