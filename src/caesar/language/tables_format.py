"""Canonical text of the ACEP declarations (TABLE, RULE) and of table reads;
used by formatter.py so `parse(format_model(m)) == m` holds for them too."""

from __future__ import annotations

from collections.abc import Callable

from caesar.language import ast

TYPE_SPELLING = {"int": "INT", "float": "FLOAT", "string": "STRING", "bool": "BOOL"}

FormatExpr = Callable[[ast.ExprNode], str]


def format_table_read(node: ast.TableRead, fmt: FormatExpr) -> str:
    item = "*" if node.item is None else fmt(node.item)
    text = f"SELECT {item} FROM {node.table}"
    if node.alias is not None:
        text += f" {node.alias}"
    if node.where is not None:
        text += f" WHERE {fmt(node.where)}"
    return f"EXISTS ({text})" if node.exists else f"({text})"


def format_table(t: ast.TableDecl) -> str:
    cols = ", ".join(f"{c.name} {TYPE_SPELLING[c.type]}" for c in t.columns)
    text = f"TABLE {t.name}({cols}, PRIMARY KEY ({', '.join(t.key)}))"
    if t.file is not None:
        text += f' FROM FILE "{t.file}"'
    return text + ";"


def format_action(a: ast.TableAction, fmt: FormatExpr) -> str:
    if a.kind in ("INSERT", "UPSERT"):
        cols = f" ({', '.join(a.columns)})" if a.columns else ""
        return f"{a.kind} INTO {a.table}{cols} VALUES ({', '.join(fmt(v) for v in a.values)})"
    if a.kind == "UPDATE":
        sets = ", ".join(f"{s.column} = {fmt(s.expr)}" for s in a.assignments)
        text = f"UPDATE {a.table} SET {sets}"
    elif a.kind == "DELETE":
        text = f"DELETE FROM {a.table}"
    else:
        items = ", ".join(fmt(i.expr) + (f" AS {i.alias}" if i.alias else "") for i in a.items)
        return f"DERIVE {a.derive_type}({items})"
    return text + (f" WHERE {fmt(a.where)}" if a.where is not None else "")


def format_rule(r: ast.RuleDecl, fmt: FormatExpr, pattern: str,
                duration: Callable[[ast.Duration], str]) -> str:
    lines = [f"RULE {r.name} ON {pattern}"]
    if r.where is not None:
        lines.append(f"  WHERE {fmt(r.where)}")
    if r.within is not None:
        lines.append(f"  WITHIN {duration(r.within)}")
    if r.contexts:
        lines.append("  CONTEXT " + ", ".join(r.contexts))
    if len(r.actions) == 1:
        lines.append(f"  DO {format_action(r.actions[0], fmt)};")
    else:
        lines.append("  DO BEGIN")
        lines.extend(f"    {format_action(a, fmt)};" for a in r.actions)
        lines.append("  END;")
    return "\n".join(lines)
