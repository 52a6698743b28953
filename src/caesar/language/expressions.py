"""Type checking of expressions and their compilation to the engine IR
(caesar.plans.expr), in the scope each kind of query gives them: a pattern's
variables, an aggregation's source event, an aggregation's output fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from caesar.errors import SourcePosition
from caesar.language import ast
from caesar.language.checked import EventType
from caesar.language.errors import (
    LanguageError,
    ModelTypeError,
    PatternError,
    UnknownNameError,
)
from caesar.plans import expr as ir

AGGREGATES = {"count", "sum", "avg", "min", "max", "first", "last"}
FUNCTIONS = {"abs", "floor", "ceil", "least", "greatest"}
NUMERIC = {"int", "float"}


class ErrorFactory(Protocol):
    """Builds a positioned error (the checker, which knows the model text)."""

    def err(self, cls: type[LanguageError], message: str, pos: SourcePosition,
            found: str | None = None, expected: str | None = None) -> LanguageError: ...


@dataclass(frozen=True)
class Reading:
    """Where a pattern expression is read, which decides what it may refer to:
    inside the Kleene FILTER of `iteration_of`, as a DERIVE output (`output`),
    or inside an aggregate over the Kleene variable `in_agg`."""

    iteration_of: str | None = None
    output: bool = False
    in_agg: str | None = None


PLAIN = Reading()  # a WHERE or a component's FILTER


class ExprEnv:
    def __init__(self, checker: ErrorFactory) -> None:
        self.c = checker
        self.output_types: dict[str, str] = {}

    def err(self, cls: type[LanguageError], message: str, pos: SourcePosition,
            found: str | None = None, expected: str | None = None) -> LanguageError:
        return self.c.err(cls, message, pos, found=found, expected=expected)

    def expect_bool(self, t: str, node: ast.ExprNode) -> None:
        if t != "bool":
            raise self.err(ModelTypeError, "a condition must be true or false", node.pos,
                           found=f"a value of type {t}", expected="a comparison or AND/OR/NOT")

    def agg_func(self, node: ast.CallExpr) -> ir.AggFunc:
        """The aggregate a call names (count with DISTINCT is count_distinct)."""
        if node.distinct and node.func != "count":
            raise self.err(ModelTypeError, "DISTINCT is only for count", node.pos,
                           found=f"{node.func}(DISTINCT ...)", expected="count(DISTINCT ...)")
        func = "count_distinct" if node.distinct else node.func
        assert ir.is_agg_func(func)  # callers checked node.func against AGGREGATES
        return func

    def ref(self, node: ast.Ref, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        raise NotImplementedError

    def call(self, node: ast.CallExpr, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        return self.function(node, at)

    def compile(self, node: ast.ExprNode, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        match node:
            case ast.Literal(value=v):
                t = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else \
                    "float" if isinstance(v, float) else "string"
                return ir.Const(v), t
            case ast.Ref():
                return self.ref(node, at)
            case ast.UnaryExpr(op="NOT", operand=o):
                ex, t = self.compile(o, at)
                self.expect_bool(t, o)
                return ir.Unary("NOT", ex), "bool"
            case ast.UnaryExpr(operand=o):
                ex, t = self.compile(o, at)
                if t not in NUMERIC:
                    raise self.err(ModelTypeError, "unary minus needs a number", node.pos,
                                   found=t, expected="int or float")
                return ir.Unary("-", ex), t
            case ast.BinaryExpr(op=op, left=l, right=r):
                le, lt = self.compile(l, at)
                re_, rt = self.compile(r, at)
                return self.binary(node, op, le, lt, re_, rt)
            case ast.CallExpr():
                return self.call(node, at)
            case ast.Equivalence():
                raise self.err(PatternError, "an equivalence test [attr] is only allowed as an "
                               "AND-separated condition of a pattern's WHERE", node.pos,
                               found="[" + ", ".join(node.attrs) + "]",
                               expected="WHERE [attr] AND ...")
        raise TypeError(node)

    def binary(self, node: ast.BinaryExpr, op: str, le: ir.Expr, lt: str, re_: ir.Expr,
               rt: str) -> tuple[ir.Expr, str]:
        assert ir.is_binary_op(op)  # the grammar writes no other
        if op in ("AND", "OR"):
            self.expect_bool(lt, node.left)
            self.expect_bool(rt, node.right)
            return ir.Binary(op, le, re_), "bool"
        if op in ir.ARITHMETIC:
            for t, side in ((lt, node.left), (rt, node.right)):
                if t not in NUMERIC:
                    raise self.err(ModelTypeError, f"'{op}' needs numbers", side.pos,
                                   found=f"a value of type {t}", expected="int or float")
            typ = "int" if lt == rt == "int" and op != "/" else "float"
            return ir.Binary(op, le, re_), typ
        # comparison
        if lt in NUMERIC and rt in NUMERIC:
            return ir.Binary(op, le, re_), "bool"
        if lt != rt:
            raise self.err(ModelTypeError, f"cannot compare {lt} with {rt}", node.pos,
                           found=f"{lt} {op} {rt}", expected="both sides of the same type")
        if op not in ("=", "!=") and lt in ("string", "bool"):
            raise self.err(ModelTypeError, f"{lt} values compare only with = and !=", node.pos,
                           found=op, expected="= or !=")
        return ir.Binary(op, le, re_), "bool"

    def function(self, node: ast.CallExpr, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        if node.func in AGGREGATES:
            raise self.err(ModelTypeError, f"aggregate {node.func} is not allowed here", node.pos,
                           found=f"{node.func}(...)",
                           expected="aggregates over a Kleene variable (pattern queries) or in "
                           "the DERIVE list of an aggregation query")
        func = node.func
        if not ir.is_call_func(func):
            raise self.err(UnknownNameError, f"unknown function {func}", node.pos,
                           found=func, expected=", ".join(sorted(FUNCTIONS | AGGREGATES)))
        if node.star or node.distinct:
            raise self.err(ModelTypeError, f"{node.func} takes plain arguments", node.pos,
                           found="* or DISTINCT", expected=f"{node.func}(expr)")
        args = [self.compile(a, at) for a in node.args]
        want = 1 if node.func in ("abs", "floor", "ceil") else None
        if (want is not None and len(args) != want) or (want is None and len(args) < 2):
            raise self.err(ModelTypeError, f"wrong number of arguments to {node.func}", node.pos,
                           found=str(len(args)), expected=str(want) if want else "at least 2")
        for (_, t), a in zip(args, node.args, strict=True):
            if t not in NUMERIC:
                raise self.err(ModelTypeError, f"{node.func} needs numbers", a.pos, found=t,
                               expected="int or float")
        types = {t for _, t in args}
        typ = "int" if func in ("floor", "ceil") or "float" not in types else "float"
        return ir.Call(func, tuple(e for e, _ in args)), typ


class PatternEnv(ExprEnv):
    def __init__(self, checker: ErrorFactory, scope: dict[str, ast.Component], order: list[str],
                 types: dict[str, EventType]) -> None:
        super().__init__(checker)
        self.scope = scope
        self.order = order
        self.types = types

    def attr_type(self, var: str, name: str, pos: SourcePosition) -> str:
        comp = self.scope[var]
        found = [self.types[t].fields[name] for t in comp.types if name in self.types[t].fields]
        if not found:
            avail = sorted({f for t in comp.types for f in self.types[t].fields})
            raise self.err(UnknownNameError, f"{'/'.join(comp.types)} has no attribute {name}",
                           pos, found=f"{var}.{name}", expected=", ".join(avail))
        if len(set(found)) > 1:
            raise self.err(ModelTypeError, f"attribute {name} has different types in "
                           f"{', '.join(comp.types)}", pos, found=", ".join(found),
                           expected="one type across ANY(...)")
        return found[0]

    def ref(self, node: ast.Ref, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        iteration_of, in_agg = at.iteration_of, at.in_agg
        var = node.var
        if var is None:
            candidates = [v for v in self.order if not self.scope[v].negated and
                          not self.scope[v].kleene and
                          any(node.name in self.types[t].fields for t in self.scope[v].types)]
            if in_agg is not None:
                candidates = [in_agg]
            elif iteration_of is not None and any(node.name in self.types[t].fields
                                                  for t in self.scope[iteration_of].types):
                candidates = [iteration_of]
            if len(candidates) != 1:
                raise self.err(UnknownNameError if not candidates else ModelTypeError,
                               f"attribute {node.name} " + ("matches no positive component" if
                                                            not candidates else
                                                            "is ambiguous in this pattern"),
                               node.pos, found=node.name,
                               expected="<variable>." + node.name)
            var = candidates[0]
        if var not in self.scope:
            raise self.err(UnknownNameError, f"unknown pattern variable {var}", node.pos,
                           found=var, expected=", ".join(self.order))
        comp = self.scope[var]
        typ = self.attr_type(var, node.name, node.pos)
        if comp.kleene and in_agg != var and iteration_of != var:
            raise self.err(PatternError, f"{var} is a Kleene variable bound to many events; read it "
                           "through an aggregate", node.pos, found=f"{var}.{node.name}",
                           expected=f"count({var}), sum({var}.{node.name}), avg(...), min(...), "
                           "max(...), first(...), last(...)")
        if comp.negated and at.output:
            raise self.err(PatternError, f"{var} is negated: it has no event to derive from",
                           node.pos, found=f"{var}.{node.name}", expected="a positive variable")
        if iteration_of is not None and var != iteration_of and \
                (self.order.index(var) > self.order.index(iteration_of) or comp.negated):
            raise self.err(PatternError, "a Kleene FILTER may read only earlier positive "
                           "variables and the iterated event", node.pos, found=var,
                           expected=f"{iteration_of} or a variable before it")
        return ir.Attr(var, node.name), typ

    def call(self, node: ast.CallExpr, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        if node.func not in AGGREGATES:
            return self.function(node, at)
        if at.iteration_of is not None or at.in_agg is not None:
            raise self.err(PatternError, "aggregates are not allowed inside a Kleene FILTER or "
                           "another aggregate", node.pos, found=f"{node.func}(...)",
                           expected="a plain expression")
        kleene = [v for v in self.order if self.scope[v].kleene]
        if node.star:
            raise self.err(ModelTypeError, "count(*) is for aggregation queries", node.pos,
                           found="count(*)", expected="count(<Kleene variable>)")
        if len(node.args) != 1:
            raise self.err(ModelTypeError, f"{node.func} takes one argument", node.pos,
                           found=str(len(node.args)), expected="1")
        arg = node.args[0]
        func = self.agg_func(node)
        if node.func == "count" and not node.distinct and isinstance(arg, ast.Ref) and \
                arg.var is None and arg.name in self.scope:
            if not self.scope[arg.name].kleene:
                raise self.err(PatternError, f"count({arg.name}) needs a Kleene variable", arg.pos,
                               found=arg.name, expected=", ".join(kleene) or "a T+ component")
            return ir.Agg("count", arg.name, None), "int"
        target = self.agg_target(node, arg, kleene)
        ex, t = self.compile(arg, Reading(in_agg=target))
        typ = agg_type(func, t)
        if typ is None:
            raise self.err(ModelTypeError, f"{node.func} needs numbers", arg.pos, found=t,
                           expected="int or float")
        return ir.Agg(func, target, ex), typ

    def agg_target(self, node: ast.CallExpr, arg: ast.ExprNode, kleene: list[str]) -> str:
        """The Kleene variable an aggregate runs over: the one its argument
        reads, or the pattern's only one when the argument names none."""
        vars_read = refs(arg)
        target = next((v for v in vars_read if v in self.scope and self.scope[v].kleene), None)
        if target is not None:
            return target
        if len(kleene) == 1 and all(v is None for v in vars_read):
            return kleene[0]
        raise self.err(PatternError, f"{node.func} must aggregate over a Kleene variable",
                       node.pos, found=describe(arg),
                       expected=", ".join(f"{v}.<attr>" for v in kleene) or
                       "a T+ component in the pattern")

    def check_equivalence(self, attr: str, node: ast.Equivalence) -> None:
        """[attr]: every event type of the pattern has attr, with one type;
        `[attr] EXCEPT NOT`: every positive one (negated ones are not compared)."""
        seen: set[str] = set()
        for var in self.order:
            comp = self.scope[var]
            if comp.negated and node.positive_only:
                continue
            for t in comp.types:
                fields = self.types[t].fields
                if attr not in fields:
                    if comp.negated:
                        raise self.err(
                            UnknownNameError, f"equivalence test [{attr}]: the negated {t} has "
                            f"no attribute {attr}", node.pos, found=f"[{attr}]",
                            expected=f"[{attr}] EXCEPT NOT to compare the positive events only")
                    raise self.err(UnknownNameError, f"equivalence test [{attr}]: {t} has no "
                                   f"attribute {attr}", node.pos, found=f"[{attr}]",
                                   expected="an attribute every pattern event type has")
                seen.add(fields[attr])
        if len(seen) > 1:
            raise self.err(ModelTypeError, f"equivalence test [{attr}] compares different types",
                           node.pos, found=", ".join(sorted(seen)), expected="one type")


class AggregateEnv(ExprEnv):
    def __init__(self, checker: ErrorFactory, source: EventType, var: str | None) -> None:
        super().__init__(checker)
        self.source = source
        self.var = var

    def ref(self, node: ast.Ref, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        if node.var is not None and node.var != self.var:
            raise self.err(UnknownNameError, f"unknown variable {node.var}", node.pos,
                           found=node.var, expected=self.var or node.name)
        if node.name not in self.source.fields:
            raise self.err(UnknownNameError, f"{self.source.name} has no attribute {node.name}",
                           node.pos, found=node.name, expected=", ".join(self.source.fields))
        return ir.Attr(None, node.name), self.source.fields[node.name]

    def aggregate(self, node: ast.CallExpr) -> tuple[ir.AggFunc, ir.Expr | None, str]:
        if node.star:
            if node.func != "count":
                raise self.err(ModelTypeError, f"{node.func}(*) is not an aggregate", node.pos,
                               found=f"{node.func}(*)", expected="count(*)")
            return "count", None, "int"
        if len(node.args) != 1:
            raise self.err(ModelTypeError, f"{node.func} takes one argument", node.pos,
                           found=str(len(node.args)), expected="1")
        func = self.agg_func(node)
        ex, t = self.compile(node.args[0])
        typ = agg_type(func, t)
        if typ is None:
            raise self.err(ModelTypeError, f"{node.func} needs numbers", node.args[0].pos,
                           found=t, expected="int or float")
        return func, ex, typ


class OutputEnv(ExprEnv):
    def __init__(self, checker: ErrorFactory, outputs: dict[str, str]) -> None:
        super().__init__(checker)
        self.outputs = outputs

    def ref(self, node: ast.Ref, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        if node.var is not None or node.name not in self.outputs:
            raise self.err(UnknownNameError, f"HAVING reads output fields; {node.name} is not one",
                           node.pos, found=describe(node), expected=", ".join(self.outputs))
        return ir.Attr(None, node.name), self.outputs[node.name]


def agg_type(func: str, t: str) -> str | None:
    if func in ("count", "count_distinct"):
        return "int"
    if func in ("first", "last"):
        return t
    if t not in NUMERIC:
        return None if func in ("sum", "avg") else (t if func in ("min", "max") and
                                                    t in NUMERIC else None)
    if func == "avg":
        return "float"
    return t


def refs(node: ast.ExprNode) -> list[str | None]:
    match node:
        case ast.Ref(var=v):
            return [v]
        case ast.UnaryExpr(operand=o):
            return refs(o)
        case ast.BinaryExpr(left=l, right=r):
            return refs(l) + refs(r)
        case ast.CallExpr(args=args):
            return [v for a in args for v in refs(a)]
    return []


def split_and(node: ast.ExprNode | None) -> list[ast.ExprNode]:
    if node is None:
        return []
    if isinstance(node, ast.BinaryExpr) and node.op == "AND":
        return split_and(node.left) + split_and(node.right)
    return [node]


def default_alias(node: ast.ExprNode) -> str | None:
    if isinstance(node, ast.Ref):
        return node.name
    if isinstance(node, ast.CallExpr) and node.func in AGGREGATES:
        return ("count_distinct" if node.distinct else node.func)
    return None


def describe(node: ast.ExprNode) -> str:
    from caesar.language.formatter import format_expr

    return format_expr(node)
