"""Model AST -> canonical model text. `parse(format_model(m)) == m` for every
model m the parser accepts (the round-trip tests check it)."""

from __future__ import annotations

from caesar.language import ast
from caesar.language.temporal_format import format_edge, format_situation, temporal_lines

PRECEDENCE = {"OR": 1, "AND": 2, "NOT": 3, "=": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
              "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}
TYPE_SPELLING = {"int": "INT", "float": "FLOAT", "string": "STRING", "bool": "BOOL"}


def format_expr(node: ast.ExprNode, parent: int = 0) -> str:
    match node:
        case ast.Literal(value=value):
            return format_literal(value, parent)
        case ast.Ref(var=var, name=name):
            return name if var is None else f"{var}.{name}"
        case ast.UnaryExpr(op="NOT", operand=operand):
            text = f"NOT {format_expr(operand, PRECEDENCE['NOT'])}"
            return f"({text})" if parent > PRECEDENCE["NOT"] else text
        case ast.UnaryExpr(op=_, operand=operand):
            return f"-{format_expr(operand, 7)}"
        case ast.BinaryExpr(op=op, left=left, right=right):
            prec = PRECEDENCE[op]
            if prec == 4:  # comparisons do not chain: both sides must bind tighter
                text = f"{format_expr(left, prec + 1)} {op} {format_expr(right, prec + 1)}"
            else:  # left-associative
                text = f"{format_expr(left, prec)} {op} {format_expr(right, prec + 1)}"
            return f"({text})" if prec < parent else text
        case ast.CallExpr(func=func, args=args, distinct=distinct, star=star):
            if star:
                return f"{func}(*)"
            inner = ", ".join(format_expr(a) for a in args)
            return f"{func}(DISTINCT {inner})" if distinct else f"{func}({inner})"
        case ast.Equivalence(attrs=attrs):
            return "[" + ", ".join(attrs) + "]"
    raise TypeError(f"not an expression node: {node!r}")


def format_literal(value: int | float | str | bool, parent: int = 0) -> str:
    """A literal; a negative number in parentheses where a sign would bind wrongly."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return '"' + value + '"' if '"' not in value else "'" + value + "'"
    if isinstance(value, float):
        text = repr(value)
        if "e" in text or "inf" in text or "nan" in text:
            text = f"{value:.6f}"
        return text if value >= 0 else f"({text})" if parent >= 5 else text
    return str(value) if value >= 0 or parent < 5 else f"({value})"


def format_duration(d: ast.Duration) -> str:
    return str(d.amount) if d.unit is None else f"{d.amount} {d.unit}"


def format_component(c: ast.Component) -> str:
    types = f"ANY({', '.join(c.types)})" if c.any_of else c.types[0]
    text = ("NOT " if c.negated else "") + types + ("+" if c.kleene else "")
    if c.var is not None:
        text += f" {c.var}"
    if c.filter is not None:
        text += f" FILTER({format_expr(c.filter)})"
    return text


def format_pattern(p: ast.Pattern) -> str:
    if not p.is_seq:
        return format_component(p.components[0])
    return "SEQ(" + ", ".join(format_component(c) for c in p.components) + ")"


def format_query(q: ast.Query, indent: str = "") -> str:
    lines = [_query_head(q)]
    if q.kind == "aggregate":
        lines.append(f"FROM {q.source}" + (f" {q.source_var}" if q.source_var else ""))
    elif q.temporal is not None:
        lines.extend(temporal_lines(q.temporal, format_expr, format_duration))
    elif q.on_situation is not None:
        lines.append(format_edge(q.on_situation))
    else:
        assert q.pattern is not None
        lines.append(f"PATTERN {format_pattern(q.pattern)}")
    if q.where is not None:
        lines.append(f"WHERE {format_expr(q.where)}")
    lines += _aggregate_clauses(q) if q.kind == "aggregate" else _pattern_clauses(q)
    if q.contexts:
        lines.append("CONTEXT " + ", ".join(q.contexts))
    body = ("\n" + indent + "  ").join(lines)
    return indent + body + ";"


def _query_head(q: ast.Query) -> str:
    """`INITIATE CONTEXT c [KEYED BY ...]` or `DERIVE T(items)`."""
    if q.kind == "window":
        head = f"{q.action} CONTEXT {q.target}"
        if q.instance_key:
            head += " KEYED BY " + ", ".join(format_expr(e) for e in q.instance_key)
        return head
    items = ", ".join(format_expr(i.expr) + (f" AS {i.alias}" if i.alias else "") for i in q.items)
    return f"DERIVE {q.derive_type}({items})"


def _aggregate_clauses(q: ast.Query) -> list[str]:
    """WINDOW, GROUP BY, HAVING of an aggregation query."""
    w = q.window
    assert w is not None
    if w.kind == "TUMBLING":
        lines = [f"WINDOW TUMBLING {format_duration(w.size)}"]
    else:
        assert w.slide is not None
        lines = [f"WINDOW SLIDING {format_duration(w.size)} EVERY {format_duration(w.slide)}"]
    if q.group_by:
        lines.append("GROUP BY " + ", ".join(q.group_by))
    if q.having is not None:
        lines.append(f"HAVING {format_expr(q.having)}")
    return lines


def _pattern_clauses(q: ast.Query) -> list[str]:
    """WITHIN and STRATEGY of a pattern query."""
    lines = []
    if q.within is not None:
        lines.append(f"WITHIN {format_duration(q.within)}")
    if q.strategy is not None:
        lines.append(f"STRATEGY {q.strategy}")
    return lines


def format_event(e: ast.EventDecl) -> str:
    fields = ", ".join(f"{f.name} {TYPE_SPELLING[f.type]}" for f in e.fields)
    text = f"EVENT {e.name}({fields})"
    if e.timestamp is not None:
        text += f" TIMESTAMP {e.timestamp}"
    if e.topic is not None:
        text += f' FROM TOPIC "{e.topic}"'
    if e.output_topic is not None:
        text += f' TO TOPIC "{e.output_topic}"'
    if e.schema is not None:
        text += f' SCHEMA "{e.schema}"'
    return text + ";"


def format_model(m: ast.Model) -> str:
    out: list[str] = []
    if m.name is not None:
        out.append(f"MODEL {m.name};")
    if m.time_unit is not None:
        out.append(f"TIME UNIT {m.time_unit};")
    if m.partition_by:
        out.append("PARTITION BY " + ", ".join(m.partition_by) + ";")
    if m.strategy is not None:
        out.append(f"STRATEGY {m.strategy};")
    out.extend(format_event(e) for e in m.events)
    out.extend(f"SITUATION {format_situation(s, format_expr, format_duration)};"
               for s in m.situations)
    for c in m.contexts:
        head = ("DEFAULT " if c.default else "") + f"CONTEXT {c.name}" + \
            (" KEYED {" if c.keyed else " {")
        out.append(head)
        out.extend(format_query(q, "  ") for q in c.queries)
        out.append("}")
    out.extend(format_query(q) for q in m.queries)
    return "\n".join(out) + "\n"
