"""Parse-tree -> AST for the TPStream productions of grammar.lark (situations,
DEFINE, temporal patterns, ON START/END OF). Mixed into the parser's
transformer (parser._ToAst), which supplies `_pos`, `_tpos`, `_clauses`,
`_common` and the `_Tagged` clause wrapper."""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, v_args

from caesar.language import ast

# Relation keywords -> canonical Allen names (plans/temporal.py ALLEN).
ALLEN_WORDS = {
    "before": "before", "after": "after", "meets": "meets", "met by": "met_by",
    "overlaps": "overlaps", "overlapped by": "overlapped_by", "starts": "starts",
    "started by": "started_by", "during": "during", "contains": "contains",
    "finishes": "finishes", "finished by": "finished_by", "equals": "equals",
}
ALLEN_SPELLING = {name: words.upper() for words, name in ALLEN_WORDS.items()}


@v_args(meta=True)
class TemporalTransforms(Transformer[Token, ast.Model]):
    """The TPStream callbacks of the model transformer (meta and children)."""

    _pos: Any
    _tpos: Any
    _clauses: Any
    _common: Any
    _tagged: Any  # parser._Tagged

    def situation_decl(self, meta: Any, children: list[Any]) -> Any:
        name, cond = children[0], children[1]
        bounds = children[2] if len(children) > 2 else {}
        return ast.SituationDef(str(name), cond, pos=self._tpos(name), **bounds)

    def define_item(self, meta: Any, children: list[Any]) -> Any:
        name = children[0]
        if len(children) == 1:
            return ast.SituationDef(str(name), None, pos=self._tpos(name))
        bounds = children[2] if len(children) > 2 else {}
        return ast.SituationDef(str(name), children[1], pos=self._tpos(name), **bounds)

    def define_clause(self, meta: Any, children: list[Any]) -> Any:
        return self._tagged("define", tuple(children), self._pos(meta))

    def at_least(self, meta: Any, children: list[Any]) -> Any:
        return {"at_least": children[0]}

    def at_most(self, meta: Any, children: list[Any]) -> Any:
        return {"at_most": children[0]}

    def between(self, meta: Any, children: list[Any]) -> Any:
        return {"at_least": children[0], "at_most": children[1], "between": True}

    def temporal_source(self, meta: Any, children: list[Any]) -> Any:
        alias = str(children[1]) if len(children) > 1 else None
        return ast.TemporalSource(str(children[0]), alias, self._tpos(children[0]))

    def temporal_from(self, meta: Any, children: list[Any]) -> Any:
        return self._tagged("from", tuple(children), self._pos(meta))

    def allen(self, meta: Any, children: list[Any]) -> Any:
        return ALLEN_WORDS[" ".join(str(c).lower() for c in children)]

    def temporal_relation(self, meta: Any, children: list[Any]) -> Any:
        left, relation, right = children
        return ast.TemporalRelation(str(left), relation, str(right), self._tpos(left),
                                    self._tpos(right))

    def temporal_constraint(self, meta: Any, children: list[Any]) -> Any:
        alts = tuple(c for c in children if isinstance(c, ast.TemporalRelation))
        return ast.TemporalConstraint(alts, self._pos(meta))

    def temporal_pattern(self, meta: Any, children: list[Any]) -> Any:
        return self._tagged("pattern", tuple(children), self._pos(meta))

    def single_situation(self, meta: Any, children: list[Any]) -> Any:
        return self._tagged("pattern", str(children[0]), self._tpos(children[0]))

    def temporal_body(self, meta: Any, children: list[Any]) -> Any:
        cl = self._clauses(children)
        body = cl["pattern"].value
        single = body if isinstance(body, str) else None
        pattern = ast.TemporalPattern(
            sources=cl["from"].value if "from" in cl else (),
            situations=cl["define"].value, constraints=() if single else body,
            pos=cl["from"].pos if "from" in cl else cl["define"].pos,
            pattern_pos=cl["pattern"].pos, single=single)
        return self._tagged("temporal", (pattern, cl["within"].value if "within" in cl else None),
                            self._pos(meta))

    def temporal_query(self, meta: Any, children: list[Any]) -> Any:
        name = children[0]
        items = tuple(c for c in children[1:] if isinstance(c, ast.DeriveItem))
        cl = self._clauses(children[1:])
        pattern, within = cl["temporal"].value
        common = self._common(cl)
        return ast.Query(kind="temporal", derive_type=str(name), items=items, within=within,
                         temporal=pattern, **common, pos=self._pos(meta),
                         target_pos=self._tpos(name))

    def temporal_window_query(self, meta: Any, children: list[Any]) -> Any:
        action, target = children[0], children[1]
        cl = self._clauses(children[2:])
        pattern, within = cl["temporal"].value
        keyed = {"instance_key": cl["key"].value, "key_pos": cl["key"].pos} if "key" in cl else {}
        return ast.Query(kind="window", action=str(action).upper(), target=str(target),
                         within=within, temporal=pattern, **self._common(cl), **keyed,
                         pos=self._pos(meta), target_pos=self._tpos(target))

    def situation_window_query(self, meta: Any, children: list[Any]) -> Any:
        action, target = children[0], children[1]
        edge = next(c for c in children if isinstance(c, Token) and c.type == "EDGE")
        situation = children[children.index(edge) + 1]
        cl = self._clauses(children[2:])
        keyed = {"instance_key": cl["key"].value, "key_pos": cl["key"].pos} if "key" in cl else {}
        on = ast.SituationEdge(str(edge).upper(), str(situation), self._tpos(situation))
        return ast.Query(kind="window", action=str(action).upper(), target=str(target),
                         on_situation=on, **self._common(cl), **keyed, pos=self._pos(meta),
                         target_pos=self._tpos(target))
