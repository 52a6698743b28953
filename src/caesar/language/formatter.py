"""Model AST -> canonical model text. `parse(format_model(m)) == m` for every
model m the parser accepts (the round-trip tests check it)."""

from __future__ import annotations

from caesar.language import ast
from caesar.language.tables_format import format_rule, format_table, format_table_read
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
        case ast.Equivalence() | ast.TableRead():
            return _format_bracketed(node)
    raise TypeError(f"not an expression node: {node!r}")


def _format_bracketed(node: ast.Equivalence | ast.TableRead) -> str:
    """`[attr, ...]` and `(SELECT ...)` / `EXISTS (SELECT ...)`."""
    if isinstance(node, ast.TableRead):
        return format_table_read(node, format_expr)
    return "[" + ", ".join(node.attrs) + "]" + (" EXCEPT NOT" if node.positive_only else "")


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


def format_quantifier(c: ast.Component) -> str:
    """+, *, ?, {n}, {n,m} or {n,} (and GREEDY) of a quantified component."""
    if not c.kleene:
        return ""
    lo, hi = c.min_count, c.max_count
    text = {(1, None): "+", (0, None): "*", (0, 1): "?"}.get((lo, hi))
    if text is None:
        text = f"{{{lo}}}" if lo == hi else f"{{{lo},{'' if hi is None else hi}}}"
    return text + (" GREEDY" if c.greedy else "")


def format_component(c: ast.Component) -> str:
    types = f"ANY({', '.join(c.types)})" if c.any_of else c.types[0]
    text = ("NOT " if c.negated else "") + types + format_quantifier(c)
    if c.var is not None:
        text += f" {c.var}"
    if c.filter is not None:
        text += f" FILTER({format_expr(c.filter)})"
    return text


def format_pattern(p: ast.Pattern) -> str:
    if p.tree is not None:
        return _format_group(p.tree)
    if not p.is_seq:
        return format_component(p.components[0])
    return "SEQ(" + ", ".join(format_component(c) for c in p.components) + ")"


def _format_group(node: ast.Component | ast.PatternGroup) -> str:
    if isinstance(node, ast.Component):
        return format_component(node)
    return f"{node.op}(" + ", ".join(_format_group(i) for i in node.items) + ")"


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
    elif w.kind == "COUNT":
        every = f" EVERY {w.slide.amount}" if w.slide is not None else ""
        lines = [f"WINDOW COUNT {w.size.amount}{every}"]
    elif w.kind == "SESSION":
        lines = [f"WINDOW SESSION GAP {format_duration(w.size)}"]
    else:
        assert w.slide is not None
        lines = [f"WINDOW SLIDING {format_duration(w.size)} EVERY {format_duration(w.slide)}"]
    if q.group_by:
        lines.append("GROUP BY " + ", ".join(q.group_by))
    if q.having is not None:
        lines.append(f"HAVING {format_expr(q.having)}")
    return lines + _output_clause(q)


def _output_clause(q: ast.Query) -> list[str]:
    r = q.output_rate
    if r is None:
        return []
    return [f"OUTPUT {r.kind} EVERY {format_duration(r.every)}"]


SKIP_TEXT = {"no_skip": "AFTER MATCH NO SKIP", "to_next": "AFTER MATCH SKIP TO NEXT EVENT",
             "past_last": "AFTER MATCH SKIP PAST LAST EVENT",
             "to_first": "AFTER MATCH SKIP TO FIRST", "to_last": "AFTER MATCH SKIP TO LAST"}


def _pattern_clauses(q: ast.Query) -> list[str]:
    """WITHIN and STRATEGY of a pattern query."""
    lines = []
    if q.within is not None:
        lines.append(f"WITHIN {format_duration(q.within)}")
    if q.strategy is not None:
        lines.append(f"STRATEGY {q.strategy}")
    if q.skip is not None:
        lines.append(SKIP_TEXT[q.skip.kind] + (f" {q.skip.var}" if q.skip.var else ""))
    if q.timeout is not None:
        items = ", ".join(format_expr(i.expr) + (f" AS {i.alias}" if i.alias else "")
                          for i in q.timeout.items)
        lines.append(f"ON TIMEOUT DERIVE {q.timeout.derive_type}({items})")
    return lines + _output_clause(q)


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
    if m.context_key:
        out.append("CONTEXTS PER " + ", ".join(m.context_key) + ";")
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
    out.extend(format_table(t) for t in m.tables)
    out.extend(format_rule(r, format_expr, format_pattern(r.pattern), format_duration)
               for r in m.rules)
    return "\n".join(out) + "\n"
