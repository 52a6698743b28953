"""Parse-tree -> AST for the ACEP productions of grammar.lark (TABLE, RULE,
table reads in expressions). Mixed into the parser's transformer
(parser._ToAst), which supplies `_pos`, `_tpos`, `_clauses` and the `_Tagged`
clause wrapper."""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, v_args

from caesar.language import ast
from caesar.language.errors import ModelSyntaxError

TYPE_NAMES = {"int": "int", "integer": "int", "long": "int", "float": "float", "double": "float",
              "string": "string", "bool": "bool", "boolean": "bool"}


class _Select:
    """A parsed `SELECT item FROM t [alias] [WHERE cond]` (before it becomes a TableRead)."""

    def __init__(self, item: ast.ExprNode | None, table: Token, alias: str | None,
                 where: ast.ExprNode | None) -> None:
        self.item, self.table, self.alias, self.where = item, table, alias, where


@v_args(meta=True)
class TableTransforms(Transformer[Token, ast.Model]):
    """The ACEP callbacks of the model transformer (meta and children)."""

    _pos: Any
    _tpos: Any
    _clauses: Any
    text: str

    # ---- TABLE ----
    def table_decl(self, meta: Any, children: list[Any]) -> ast.TableDecl:
        name = children[0]
        columns = tuple(c for c in children[1:] if isinstance(c, ast.ColumnDecl))
        key, key_pos = next(c for c in children[1:] if isinstance(c, tuple) and len(c) == 2
                            and isinstance(c[0], tuple))
        file = next((c[1] for c in children[1:] if isinstance(c, tuple) and c[0] == "file"),
                    None)
        return ast.TableDecl(str(name), columns, key, file, pos=self._tpos(name), key_pos=key_pos)

    def column_decl(self, meta: Any, children: list[Any]) -> ast.ColumnDecl:
        return ast.ColumnDecl(str(children[0]), TYPE_NAMES[str(children[1]).lower()],
                              self._tpos(children[0]))

    def primary_key(self, meta: Any, children: list[Any]) -> tuple[tuple[str, ...], Any]:
        return tuple(str(c) for c in children), self._pos(meta)

    def table_file(self, meta: Any, children: list[Any]) -> tuple[str, str]:
        return "file", str(children[0])[1:-1]

    # ---- RULE ----
    def rule_decl(self, meta: Any, children: list[Any]) -> ast.RuleDecl:
        from caesar.language.parser import as_pattern

        name, patt = children[0], children[1]
        cl = self._clauses(children[2:])
        actions = next(c for c in children[2:] if isinstance(c, tuple))
        context = cl.get("context")
        return ast.RuleDecl(
            str(name), as_pattern(patt), actions,
            where=cl["where"].value if "where" in cl else None,
            within=cl["within"].value if "within" in cl else None,
            contexts=context.value if context else (),
            pos=self._tpos(name), contexts_pos=context.pos if context else ast.NOWHERE)

    def rule_body(self, meta: Any, children: list[Any]) -> tuple[ast.TableAction, ...]:
        return tuple(c for c in children if isinstance(c, ast.TableAction))

    def insert_action(self, meta: Any, children: list[Any]) -> ast.TableAction:
        kind, table = children[0], children[1]
        columns: tuple[str, ...] = ()
        rest = children[2:]
        if rest and isinstance(rest[0], tuple):
            columns, rest = rest[0], rest[1:]
        return ast.TableAction(str(kind).upper(), str(table), columns=columns, values=tuple(rest),
                               pos=self._tpos(kind), table_pos=self._tpos(table))

    def column_list(self, meta: Any, children: list[Any]) -> tuple[str, ...]:
        return tuple(str(c) for c in children)

    def update_action(self, meta: Any, children: list[Any]) -> ast.TableAction:
        table = children[0]
        sets = tuple(c for c in children[1:] if isinstance(c, ast.Assignment))
        rest = [c for c in children[1:] if not isinstance(c, ast.Assignment)]
        return ast.TableAction("UPDATE", str(table), assignments=sets,
                               where=rest[0] if rest else None, pos=self._pos(meta),
                               table_pos=self._tpos(table))

    def assignment(self, meta: Any, children: list[Any]) -> ast.Assignment:
        name, op, value = children
        if str(op) != "=":
            raise ModelSyntaxError("SET assigns with '='", self._tpos(op), self.text,
                                   found=repr(str(op)), expected="'='")
        return ast.Assignment(str(name), value, self._tpos(name))

    def delete_action(self, meta: Any, children: list[Any]) -> ast.TableAction:
        table = children[0]
        return ast.TableAction("DELETE", str(table),
                               where=children[1] if len(children) > 1 else None,
                               pos=self._pos(meta), table_pos=self._tpos(table))

    def rule_derive(self, meta: Any, children: list[Any]) -> ast.TableAction:
        name = children[0]
        return ast.TableAction("DERIVE", derive_type=str(name),
                               items=tuple(c for c in children[1:]
                                           if isinstance(c, ast.DeriveItem)),
                               pos=self._pos(meta), table_pos=self._tpos(name))

    # ---- table reads ----
    def table_select(self, meta: Any, children: list[Any]) -> _Select:
        item = children[0]
        table = children[1]
        rest = children[2:]
        alias = None
        if rest and isinstance(rest[0], Token) and rest[0].type == "NAME":
            alias, rest = str(rest[0]), rest[1:]
        return _Select(None if item == "*" else item, table, alias, rest[0] if rest else None)

    def select_star(self, meta: Any, children: list[Any]) -> str:
        return "*"

    def table_value(self, meta: Any, children: list[Any]) -> ast.TableRead:
        sel: _Select = children[0]
        if sel.item is None:
            raise ModelSyntaxError("SELECT * reads no single value", self._pos(meta), self.text,
                                   found="SELECT *",
                                   expected="SELECT column, an aggregate, or EXISTS (SELECT * ...)")
        return ast.TableRead(sel.item, str(sel.table), sel.alias, sel.where, False,
                             self._pos(meta), self._tpos(sel.table))

    def table_exists(self, meta: Any, children: list[Any]) -> ast.TableRead:
        sel: _Select = children[0]
        return ast.TableRead(sel.item, str(sel.table), sel.alias, sel.where, True,
                             self._pos(meta), self._tpos(sel.table))
