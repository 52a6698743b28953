"""Expression IR shared by the compiler (producer) and the engines (consumers).

The compiler turns WHERE clauses, DERIVE fields and aggregate arguments into
these nodes; engines compile them further (the Cython matcher into its own
instruction arrays). User text is never eval'ed: this IR is the only
executable form of an expression.

Semantics every engine must follow:
- `Attr(var, name)` reads attribute `name` of the event bound to pattern
  variable `var`. `var` is None inside aggregation plans (the current event).
- A missing attribute (the event type has no such field, or the value is null)
  makes the comparison that reads it false, and makes AND false / OR decide on
  the other side (SQL-like: unknown is treated as false at the conjunct level).
- int (INT/LONG) values are exact 64-bit integers everywhere: comparisons,
  equivalence keys, arithmetic. int op int stays int except `/`, which
  converts both operands to float first; `%` on ints is Python's modulo. An
  int result outside the 64-bit range (overflow) is missing, and the engine
  counts it per plan (`PatternEngine.overflows`). An int compared with a
  float is compared exactly (2**53 + 1 > 2.0**53), never after rounding.
  Division or modulo by zero makes the value missing (the enclosing
  comparison is false) instead of raising.
- Strings compare only with `=` and `!=` (they are interned codes in batches).
- A user-defined function (`Call.udf`) is called with its arguments as
  Python values: a missing argument makes the call missing without calling
  it; an exception or a result of the wrong type makes it missing and is
  reported (`PatternEngine.function_failures`).
- `Agg` appears only where a Kleene component is bound: it aggregates over all
  events bound to that Kleene variable (Cayuga FOLD).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeGuard, get_args

if TYPE_CHECKING:
    from caesar.plans.functions import Function

BinaryOp = Literal["+", "-", "*", "/", "%", "=", "!=", "<", "<=", ">", ">=", "AND", "OR"]
UnaryOp = Literal["-", "NOT"]
AggFunc = Literal["count", "count_distinct", "sum", "avg", "min", "max", "first", "last"]
CallFunc = Literal["abs", "floor", "ceil", "least", "greatest"]

COMPARISONS: frozenset[str] = frozenset({"=", "!=", "<", "<=", ">", ">="})
ARITHMETIC: frozenset[str] = frozenset({"+", "-", "*", "/", "%"})
LOGICAL: frozenset[str] = frozenset({"AND", "OR"})


def is_binary_op(op: str) -> TypeGuard[BinaryOp]:
    return op in get_args(BinaryOp)


def is_agg_func(name: str) -> TypeGuard[AggFunc]:
    return name in get_args(AggFunc)


def is_call_func(name: str) -> TypeGuard[CallFunc]:
    return name in get_args(CallFunc)


@dataclass(frozen=True)
class Const:
    value: int | float | str | bool


@dataclass(frozen=True)
class Attr:
    var: str | None
    name: str


@dataclass(frozen=True)
class Unary:
    op: UnaryOp
    operand: Expr


@dataclass(frozen=True)
class Binary:
    op: BinaryOp
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Call:
    """A built-in function (`func` one of CallFunc, `udf` None) or a
    user-defined one (`udf`, named `func`; src/caesar/plans/functions.py)."""

    func: str
    args: tuple[Expr, ...]
    udf: Function | None = None


@dataclass(frozen=True)
class Agg:
    """Aggregate over the events bound to Kleene variable `var`.

    `arg` is None only for `count`. Inside `arg`, attributes of the iterated
    events are written with the Kleene variable's own name.
    """

    func: AggFunc
    var: str
    arg: Expr | None


Expr = Const | Attr | Unary | Binary | Call | Agg


def variables(expr: Expr) -> frozenset[str]:
    """Pattern variables an expression reads (Agg counts as reading its var)."""
    match expr:
        case Const():
            return frozenset()
        case Attr(var=var):
            return frozenset() if var is None else frozenset({var})
        case Unary(operand=operand):
            return variables(operand)
        case Binary(left=left, right=right):
            return variables(left) | variables(right)
        case Call(args=args):
            out: frozenset[str] = frozenset()
            for arg in args:
                out |= variables(arg)
            return out
        case Agg(var=var, arg=arg):
            return frozenset({var}) | (variables(arg) if arg is not None else frozenset())
    raise TypeError(f"not an expression: {expr!r}")


def nodes(expr: Expr, *, into_aggregates: bool = True) -> Iterator[Expr]:
    """The expression and every subexpression, parents first; an aggregate's
    argument only `into_aggregates` (it is evaluated per iteration, not at
    the aggregate's place)."""
    yield expr
    match expr:
        case Unary(operand=operand):
            yield from nodes(operand, into_aggregates=into_aggregates)
        case Binary(left=left, right=right):
            yield from nodes(left, into_aggregates=into_aggregates)
            yield from nodes(right, into_aggregates=into_aggregates)
        case Call(args=args):
            for arg in args:
                yield from nodes(arg, into_aggregates=into_aggregates)
        case Agg(arg=arg) if arg is not None and into_aggregates:
            yield from nodes(arg, into_aggregates=into_aggregates)


def conjuncts(expr: Expr | None) -> tuple[Expr, ...]:
    """Split a predicate on top-level AND."""
    if expr is None:
        return ()
    if isinstance(expr, Binary) and expr.op == "AND":
        return conjuncts(expr.left) + conjuncts(expr.right)
    return (expr,)


def render(expr: Expr) -> str:
    """Readable text for explain output and error messages."""
    match expr:
        case Const(value=value):
            return repr(value) if isinstance(value, str) else str(value)
        case Attr(var=var, name=name):
            return name if var is None else f"{var}.{name}"
        case Unary(op=op, operand=operand):
            return f"NOT {render(operand)}" if op == "NOT" else f"-{render(operand)}"
        case Binary(op=op, left=left, right=right):
            return f"({render(left)} {op} {render(right)})"
        case Call(func=func, args=args):
            return f"{func}({', '.join(render(a) for a in args)})"
        case Agg(func=func, var=var, arg=arg):
            return f"{func}({var if arg is None else render(arg)})"
    raise TypeError(f"not an expression: {expr!r}")
