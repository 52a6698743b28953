"""Semantic checks of TPStream queries and model-level situations, producing
a CheckedQuery with a TemporalBody (semantics: src/caesar/plans/temporal.py).

- A situation's condition reads one event type (a FROM alias or the type's
  own name) and no aggregate (the paper's concession, section 3.1); its
  duration bounds are positive and not empty.
- A pattern relates only defined situations, never one with itself; the
  alternatives of a constraint relate one pair; the relations of all
  constraints can hold together (an endpoint order exists); every situation
  is related and all are connected (no cross product, section 5.4); two or
  more situations need WITHIN (it bounds the state kept).
- DERIVE (and KEYED BY) read situations only through aggregates:
  first, last, min, max, avg, sum, count (Cayuga FOLD semantics).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from caesar.errors import SourcePosition
from caesar.language import ast
from caesar.language.checked import CheckedQuery, EventType, TemporalBody, Transition, marker_type
from caesar.language.errors import (
    DuplicateNameError,
    ModelStructureError,
    ModelTypeError,
    PatternError,
    UnknownNameError,
    WindowError,
)
from caesar.language.expressions import (
    AGGREGATES,
    PLAIN,
    ExprEnv,
    Reading,
    agg_type,
    default_alias,
    refs,
)
from caesar.language.query_checks import expected_names
from caesar.plans import expr as ir
from caesar.plans.temporal import DEFINITION, INVERSE, SituationSpec, TemporalConstraint

if TYPE_CHECKING:
    from caesar.language.semantics import ModelChecker

SITUATION_AGGREGATES = AGGREGATES  # first, last, min, max, avg, sum, count
MAX_SEARCH = 200_000  # relation assignments tried before giving up on the contradiction check


@dataclass(frozen=True)
class CheckedSituation:
    spec: SituationSpec
    source: EventType


# ---- situations -------------------------------------------------------------


class SituationEnv(ExprEnv):
    """The condition of one situation: reads the current event of one type."""

    def __init__(self, checker: Any, name: str, aliases: dict[str, str],
                 types: dict[str, EventType]) -> None:
        super().__init__(checker)
        self.name = name
        self.aliases = aliases
        self.types = types
        self.read: dict[str, SourcePosition] = {}  # event type -> where first read

    def source_of(self, node: ast.Ref) -> str:
        if node.var is None:
            sources = set(self.aliases.values())
            if len(sources) == 1:
                return next(iter(sources))
            raise self.err(UnknownNameError, f"attribute {node.name} of which event? A "
                           "situation's condition names its event type", node.pos,
                           found=node.name, expected=f"<Type>.{node.name} or FROM <Type> <alias>")
        if node.var in self.aliases:
            return self.aliases[node.var]
        if node.var in self.types:
            return node.var
        raise self.err(UnknownNameError, f"unknown event type or FROM alias {node.var}", node.pos,
                       found=node.var,
                       expected=expected_names(list(self.aliases) + list(self.types)))

    def ref(self, node: ast.Ref, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        typ = self.source_of(node)
        fields = self.types[typ].fields
        if node.name not in fields:
            raise self.err(UnknownNameError, f"{typ} has no attribute {node.name}", node.pos,
                           found=node.name, expected=", ".join(fields))
        self.read.setdefault(typ, node.pos)
        if len(self.read) > 1:
            a, b = list(self.read)[:2]
            raise self.err(PatternError, f"situation {self.name} reads two event types ({a} and "
                           f"{b}); a situation is derived from one event stream", node.pos,
                           found=f"{node.var}.{node.name}", expected=f"attributes of {a} only")
        return ir.Attr(self.name, node.name), fields[node.name]

    def call(self, node: ast.CallExpr, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        if node.func in AGGREGATES:
            raise self.err(PatternError, "a situation's condition holds per event; it cannot read "
                           "aggregates (TPStream, section 3.1)", node.pos,
                           found=f"{node.func}(...)", expected="a condition on one event")
        return self.function(node, at)


def check_situation(ck: ModelChecker, d: ast.SituationDef, aliases: dict[str, str],
                    types: dict[str, EventType]) -> CheckedSituation:
    assert d.condition is not None
    env = SituationEnv(ck, d.name, aliases, types)
    cond, t = env.compile(d.condition)
    env.expect_bool(t, d.condition)
    if not env.read:
        sources = set(aliases.values())
        if len(sources) != 1:
            raise ck.err(PatternError, f"situation {d.name} reads no event", d.condition.pos,
                         found="a condition without attributes",
                         expected="a condition on <Type>.<attr>")
        env.read[next(iter(sources))] = d.pos
    source = next(iter(env.read))
    lo = ck.ticks(d.at_least, "AT LEAST") if d.at_least is not None else None
    hi = ck.ticks(d.at_most, "AT MOST") if d.at_most is not None else None
    if lo is not None and hi is not None and lo > hi:
        assert d.at_least is not None
        raise ck.err(WindowError, f"situation {d.name} can never last between {lo} and {hi} "
                     "ticks", d.at_least.pos, found=f"BETWEEN {lo} AND {hi}",
                     expected="a lower bound <= the upper bound")
    return CheckedSituation(SituationSpec(d.name, source, cond, lo, hi), types[source])


def situation_types(d: ast.SituationDef, aliases: dict[str, str],
                    decls: dict[str, ast.SituationDef]) -> list[str]:
    """Event types a situation definition reads, from its text alone (used to
    order queries before their input types are known)."""
    if d.condition is None:
        decl = decls.get(d.name)
        return situation_types(decl, {}, decls) if decl is not None else []
    out: list[str] = []
    for var in refs(d.condition):
        if var is None:
            out.extend(aliases.values())
        else:
            out.append(aliases.get(var, var))
    if not out:
        out.extend(aliases.values())
    return list(dict.fromkeys(out))


def unknown_source(ck: ModelChecker, q: ast.Query, name: str, types: list[str]) -> Exception:
    """`name` reads like an event type in a situation's condition but is none."""
    pos = q.pos
    aliases: list[str] = []
    if q.temporal is not None:
        aliases = [s.alias or s.type for s in q.temporal.sources]
        for s in q.temporal.sources:
            if s.type == name:
                pos = s.pos
        for d in q.temporal.situations:
            found = _ref_pos(d.condition, name) if d.condition is not None else None
            if found is not None:
                pos = found
                break
    return ck.err(UnknownNameError, f"unknown event type or FROM alias {name}", pos, found=name,
                  expected=expected_names(aliases + types))


def _ref_pos(node: ast.ExprNode, var: str) -> SourcePosition | None:
    match node:
        case ast.Ref(var=v, pos=pos) if v == var:
            return pos
        case ast.UnaryExpr(operand=o):
            return _ref_pos(o, var)
        case ast.BinaryExpr(left=left, right=right):
            return _ref_pos(left, var) or _ref_pos(right, var)
        case ast.CallExpr(args=args):
            for a in args:
                found = _ref_pos(a, var)
                if found is not None:
                    return found
    return None


def query_input_types(q: ast.Query, decls: dict[str, ast.SituationDef]) -> tuple[str, ...]:
    if q.on_situation is not None:
        decl = decls.get(q.on_situation.situation)
        return tuple(situation_types(decl, {}, decls)) if decl is not None else ()
    assert q.temporal is not None
    aliases = {s.alias or s.type: s.type for s in q.temporal.sources}
    out = [s.type for s in q.temporal.sources]
    for d in q.temporal.situations:
        out.extend(situation_types(d, aliases, decls))
    return tuple(dict.fromkeys(out))


# ---- patterns ----------------------------------------------------------------

# Endpoint orders of the relations, parsed from DEFINITION: (point, op, point)
# triples over the points A.ts, A.te, B.ts, B.te.
def _chain(relation: str) -> list[tuple[str, str, str]]:
    tokens = DEFINITION[relation].split()
    return [(tokens[i], tokens[i + 1], tokens[i + 2]) for i in range(0, len(tokens) - 2, 2)]


CHAINS = {r: _chain(r) for r in DEFINITION}


Point = tuple[str, str]  # (situation, "ts" | "te")


def consistent(assigned: list[tuple[str, str, str]]) -> bool:
    """Can the relations `(x, R, y)` all hold (is there an order of endpoints)?"""
    parent: dict[Point, Point] = {}  # union-find of the points forced equal
    less = _endpoint_order(assigned, parent)
    graph: dict[Point, set[Point]] = {}
    for lo, hi in less:
        ra, rb = _find(parent, lo), _find(parent, hi)
        if ra == rb:
            return False
        graph.setdefault(ra, set()).add(rb)
    return _acyclic(graph)


def _find(parent: dict[Point, Point], p: Point) -> Point:
    parent.setdefault(p, p)
    while parent[p] != p:
        parent[p] = parent[parent[p]]
        p = parent[p]
    return p


def _endpoint_order(assigned: list[tuple[str, str, str]], parent: dict[Point, Point]
                    ) -> list[tuple[Point, Point]]:
    """The `<` pairs of endpoints the relations require (each situation
    starts before it ends); their `=` pairs are merged into `parent`."""
    names = {n for x, _, y in assigned for n in (x, y)}
    less: list[tuple[Point, Point]] = [((n, "ts"), (n, "te")) for n in names]
    for x, rel, y in assigned:
        for a, op, b in CHAINS[rel]:
            pa = (x if a[0] == "A" else y, a[2:])
            pb = (x if b[0] == "A" else y, b[2:])
            if op == "=":
                parent[_find(parent, pa)] = _find(parent, pb)
            else:
                less.append((pa, pb))
    return less


def _acyclic(graph: dict[Point, set[Point]]) -> bool:
    state: dict[Point, int] = {}  # 1 = on the DFS stack, 2 = done

    def visit(n: Point) -> bool:
        state[n] = 1
        for m in graph.get(n, ()):
            if state.get(m) == 1 or (m not in state and not visit(m)):
                return False
        state[n] = 2
        return True

    return all(state.get(n) == 2 or visit(n) for n in list(graph))


def satisfiable(constraints: list[TemporalConstraint]) -> bool:
    """Is there one relation per constraint such that all hold together?"""
    budget = [MAX_SEARCH]

    def search(i: int, chosen: list[tuple[str, str, str]]) -> bool:
        if i == len(constraints):
            return True
        c = constraints[i]
        for rel in c.relations:
            budget[0] -= 1
            if budget[0] < 0:
                return True  # too large to decide: do not reject the pattern
            nxt = chosen + [(c.left, rel, c.right)]
            if consistent(nxt) and search(i + 1, nxt):
                return True
        return False

    return search(0, [])


def check_constraints(ck: ModelChecker, t: ast.TemporalPattern,
                      defined: dict[str, ast.SituationDef]) -> tuple[TemporalConstraint, ...]:
    merged: dict[frozenset[str], TemporalConstraint] = {}  # in order of first mention
    for n, c in enumerate(t.constraints, start=1):
        pair, rels = _constraint_relations(ck, c, defined)
        key = frozenset(pair)
        old = merged.get(key)
        if old is not None:
            mine = rels if (old.left, old.right) == pair else [INVERSE[r] for r in rels]
            merged[key] = TemporalConstraint(old.left, old.right,
                                             tuple(r for r in old.relations if r in mine))
        else:
            merged[key] = TemporalConstraint(pair[0], pair[1], tuple(dict.fromkeys(rels)))
        so_far = list(merged.values())
        if not all(c2.relations for c2 in so_far) or not satisfiable(so_far):
            raise ck.err(PatternError, "contradictory relations: no order of the situations' "
                         "start and end points satisfies the pattern up to here", c.pos,
                         found=" AND ".join("; ".join(f"{x.left} {x.relation.upper()} {x.right}"
                                                      for x in cc.alternatives)
                                            for cc in t.constraints[:n]),
                         expected="relations that can hold together")
    out = tuple(merged.values())
    if len(defined) > 1:
        _check_related(ck, defined, out)
        _check_connected(ck, t, defined, out)
    return out


def _constraint_relations(ck: ModelChecker, c: ast.TemporalConstraint,
                          defined: dict[str, ast.SituationDef]) -> tuple[tuple[str, str], list[str]]:
    """A constraint's pair of situations (as its first alternative names
    them) and its alternatives' relations, read in that direction."""
    first = c.alternatives[0]
    pair = (first.left, first.right)
    rels: list[str] = []
    for r in c.alternatives:
        for name, pos in ((r.left, r.pos), (r.right, r.right_pos)):
            if name not in defined:
                raise ck.err(UnknownNameError, f"unknown situation {name}", pos, found=name,
                             expected=expected_names(list(defined)))
        if r.left == r.right:
            raise ck.err(PatternError, f"situation {r.left} is related to itself", r.pos,
                         found=f"{r.left} {r.relation.upper()} {r.right}",
                         expected="a relation between two different situations")
        if (r.left, r.right) == pair:
            rels.append(r.relation)
        elif (r.right, r.left) == pair:
            rels.append(INVERSE[r.relation])
        else:
            raise ck.err(PatternError, "the alternatives of a constraint (separated by ';') "
                         "must relate the same two situations", r.pos,
                         found=f"{r.left} ... {r.right}",
                         expected=f"{pair[0]} <relation> {pair[1]} or {pair[1]} <relation> "
                         f"{pair[0]}")
    return pair, rels


def _check_related(ck: ModelChecker, defined: dict[str, ast.SituationDef],
                   constraints: tuple[TemporalConstraint, ...]) -> None:
    related = {n for c in constraints for n in (c.left, c.right)}
    for name, d in defined.items():
        if name not in related:
            raise ck.err(PatternError, f"situation {name} is never related to another "
                         "situation in the PATTERN", d.pos, found=name,
                         expected=f"a relation such as {name} BEFORE <situation>")


def _check_connected(ck: ModelChecker, t: ast.TemporalPattern,
                     defined: dict[str, ast.SituationDef],
                     constraints: tuple[TemporalConstraint, ...]) -> None:
    """Every situation reachable from the first through constraints (no
    cross product, section 5.4)."""
    seen = {next(iter(defined))}
    grew = True
    while grew:
        grew = False
        for tc in constraints:
            if (tc.left in seen) != (tc.right in seen):
                seen |= {tc.left, tc.right}
                grew = True
    if len(seen) != len(defined):
        rest = sorted(set(defined) - seen)
        raise ck.err(PatternError, f"situations {', '.join(sorted(seen))} and "
                     f"{', '.join(rest)} are not related to each other", t.pattern_pos,
                     found="two unconnected groups of situations",
                     expected="relations that connect every situation")


# ---- output --------------------------------------------------------------------


class TemporalOutputEnv(ExprEnv):
    """DERIVE fields and KEYED BY of a temporal query: situations are read
    through aggregates over their events."""

    def __init__(self, checker: Any, situations: dict[str, CheckedSituation]) -> None:
        super().__init__(checker)
        self.situations = situations

    def ref(self, node: ast.Ref, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        in_agg = at.in_agg
        var = node.var if node.var is not None else in_agg
        if var not in self.situations:
            raise self.err(UnknownNameError, f"unknown situation {var or node.name}", node.pos,
                           found=var or node.name,
                           expected=expected_names(list(self.situations)))
        if in_agg is None:
            raise self.err(PatternError, f"situation {var} spans many events; read it through "
                           "an aggregate", node.pos, found=f"{var}.{node.name}",
                           expected=f"first({var}.{node.name}), last(...), min(...), max(...), "
                           f"avg(...), sum(...) or count({var})")
        if var != in_agg:
            raise self.err(PatternError, "an aggregate reads one situation", node.pos,
                           found=f"{var}.{node.name}", expected=f"{in_agg}.<attr>")
        fields = self.situations[var].source.fields
        if node.name not in fields:
            raise self.err(UnknownNameError, f"{self.situations[var].source.name} (situation "
                           f"{var}) has no attribute {node.name}", node.pos,
                           found=f"{var}.{node.name}", expected=", ".join(fields))
        return ir.Attr(var, node.name), fields[node.name]

    def call(self, node: ast.CallExpr, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        if node.func not in SITUATION_AGGREGATES:
            return self.function(node, at)
        if at.in_agg is not None:
            raise self.err(PatternError, "aggregates do not nest", node.pos,
                           found=f"{node.func}(...)", expected="a plain expression")
        if node.star or node.distinct:
            raise self.err(ModelTypeError, f"{node.func}(* / DISTINCT) is not available over "
                           "situations", node.pos, found=node.func,
                           expected=f"{node.func}(<situation>.<attr>)")
        if len(node.args) != 1:
            raise self.err(ModelTypeError, f"{node.func} takes one argument", node.pos,
                           found=str(len(node.args)), expected="1")
        arg = node.args[0]
        if node.func == "count" and isinstance(arg, ast.Ref) and arg.var is None \
                and arg.name in self.situations:
            return ir.Agg("count", arg.name, None), "int"
        named = {v for v in refs(arg) if v is not None}
        if len(named) != 1:
            if not named and len(self.situations) == 1:
                named = set(self.situations)
            else:
                raise self.err(PatternError, f"{node.func} must aggregate over one situation",
                               node.pos, found=f"{node.func}(...)",
                               expected=", ".join(f"{node.func}({s}.<attr>)"
                                                  for s in self.situations))
        sym = next(iter(named))
        ex, t = self.compile(arg, Reading(in_agg=sym))
        typ = agg_type(node.func, t)
        if typ is None:
            raise self.err(ModelTypeError, f"{node.func} needs numbers", arg.pos, found=t,
                           expected="int or float")
        return ir.Agg(node.func, sym, ex), typ  # type: ignore[arg-type]


# ---- queries -------------------------------------------------------------------


def edge_marker(edge: ast.SituationEdge) -> str:
    """The internal event type a model-level situation's start or end is."""
    return f"_{edge.edge.lower()}_{edge.situation}"


def edge_qid(q: ast.Query) -> str | None:
    """Query id of a situation edge producer (None for the model's own queries)."""
    if q.kind == "temporal" and q.on_situation is not None:
        return f"{q.on_situation.situation}.{q.on_situation.edge.lower()}"
    return None


def situation_edges(located: list[tuple[ast.Query, str | None]]
                    ) -> list[tuple[ast.Query, str | None]]:
    """`INITIATE/SWITCH/TERMINATE CONTEXT c ON START|END OF S`: the situation is
    derived over the partition's whole stream (a producer running in every
    context, emitting `_start_S` / `_end_S` events), and the deriving query
    is a pattern over that event in its own contexts. Deriving S inside the
    query's context instead would cut its runs at context boundaries: the
    query ending a context would see a later start than the one opening it."""
    out: list[tuple[ast.Query, str | None]] = []
    producers: dict[str, ast.Query] = {}
    for q, home in located:
        edge = q.on_situation
        if edge is None or q.kind != "window":
            out.append((q, home))
            continue
        marker = edge_marker(edge)
        producers.setdefault(marker, ast.Query(kind="temporal", derive_type=marker,
                                               on_situation=edge, pos=edge.pos,
                                               target_pos=edge.pos))
        comp = ast.Component((marker,), edge.situation, pos=edge.pos)
        out.append((replace(q, pattern=ast.Pattern((comp,), False, edge.pos)), home))
    return out + [(p, None) for p in producers.values()]


class ModelSituations:
    """Model-level SITUATION declarations, checked when first used (their
    event type may be derived by a query checked later) or at the end."""

    def __init__(self, ck: ModelChecker, decls: tuple[ast.SituationDef, ...]) -> None:
        self.ck = ck
        self.decls: dict[str, ast.SituationDef] = {}
        for d in decls:
            if d.name in self.decls:
                raise ck.err(DuplicateNameError, f"situation {d.name} is declared twice", d.pos,
                             found=d.name, expected="one SITUATION per name")
            self.decls[d.name] = d
        self.checked: dict[str, CheckedSituation] = {}

    def get(self, name: str, pos: SourcePosition, types: dict[str, EventType]
            ) -> CheckedSituation:
        if name not in self.decls:
            raise self.ck.err(UnknownNameError, f"unknown situation {name}", pos, found=name,
                              expected="a SITUATION declared in the model: " +
                              expected_names(list(self.decls)))
        if name not in self.checked:
            self.checked[name] = check_situation(self.ck, self.decls[name], {}, types)
        return self.checked[name]

    def check_all(self, types: dict[str, EventType]) -> None:
        for name, d in self.decls.items():
            self.get(name, d.pos, types)


def check_temporal(ck: ModelChecker, qid: str, q: ast.Query, home: str | None,
                   contexts: tuple[str, ...], transition: Transition | None,
                   types: dict[str, EventType], model: ModelSituations) -> CheckedQuery:
    within = ck.ticks(q.within, "WITHIN") if q.within is not None else None
    emit: Any = "match"
    if q.on_situation is not None:
        edge = q.on_situation
        sits = {edge.situation: model.get(edge.situation, edge.pos, types)}
        constraints: tuple[TemporalConstraint, ...] = ()
        emit = "end" if edge.edge == "END" else "match"
    else:
        assert q.temporal is not None
        sits, constraints = _pattern(ck, q.temporal, types, model, within)
    env = TemporalOutputEnv(ck, sits)
    if transition is not None:
        output_type = marker_type(transition.action, transition.target)
        fields = _key_fields(env, q)
    else:
        output_type = q.derive_type or ""
        fields = _derive_fields(ck, env, q)
    _add_intervals(ck, env, q, sits)
    body = TemporalBody(situations=tuple(s.spec for s in sits.values()),
                        constraints=constraints, within=within, emit=emit)
    return CheckedQuery(qid=qid, source=q, home=home, contexts=contexts, output_type=output_type,
                        output_fields=tuple(fields),
                        input_types=tuple(dict.fromkeys(s.source.name for s in sits.values())),
                        body=body, transition=transition, output_schema=dict(env.output_types))


def _pattern(ck: ModelChecker, t: ast.TemporalPattern, types: dict[str, EventType],
             model: ModelSituations, within: int | None
             ) -> tuple[dict[str, CheckedSituation], tuple[TemporalConstraint, ...]]:
    """A query's own `FROM ... DEFINE ... PATTERN`: its situations and constraints."""
    aliases = _from_aliases(ck, t, types)
    sits, defined = _defined_situations(ck, t, aliases, types, model)
    if t.single is not None:
        _check_single(ck, t, defined)
    constraints = check_constraints(ck, t, defined)
    if len(sits) > 1 and within is None:
        raise ck.err(PatternError, "a temporal pattern over several situations needs WITHIN "
                     "(it bounds how long situations are kept)", t.pattern_pos,
                     found="no WITHIN", expected="WITHIN <duration>")
    return sits, constraints


def _from_aliases(ck: ModelChecker, t: ast.TemporalPattern, types: dict[str, EventType]
                  ) -> dict[str, str]:
    """FROM: alias (or the type's own name) -> event type."""
    aliases: dict[str, str] = {}
    for s in t.sources:
        if s.type not in types:
            raise ck.err(UnknownNameError, f"unknown event type {s.type}", s.pos, found=s.type,
                         expected=expected_names(list(types)))
        alias = s.alias or s.type
        if alias in aliases:
            raise ck.err(DuplicateNameError, f"FROM names {alias} twice", s.pos, found=alias,
                         expected="distinct aliases")
        aliases[alias] = s.type
    return aliases


def _defined_situations(ck: ModelChecker, t: ast.TemporalPattern, aliases: dict[str, str],
                        types: dict[str, EventType], model: ModelSituations
                        ) -> tuple[dict[str, CheckedSituation], dict[str, ast.SituationDef]]:
    """DEFINE: each item checked here, or the model's SITUATION it names."""
    sits: dict[str, CheckedSituation] = {}
    defined: dict[str, ast.SituationDef] = {}
    for d in t.situations:
        if d.name in defined:
            raise ck.err(DuplicateNameError, f"situation {d.name} is defined twice", d.pos,
                         found=d.name, expected="one DEFINE item per situation")
        if d.name in aliases:
            raise ck.err(DuplicateNameError, f"{d.name} is both a FROM alias and a situation",
                         d.pos, found=d.name, expected="distinct names")
        defined[d.name] = d
        if d.condition is None:
            sits[d.name] = model.get(d.name, d.pos, types)
        else:
            sits[d.name] = check_situation(ck, d, aliases, types)
    return sits, defined


def _check_single(ck: ModelChecker, t: ast.TemporalPattern,
                  defined: dict[str, ast.SituationDef]) -> None:
    """`PATTERN S`: S is defined and the only situation."""
    assert t.single is not None
    if t.single not in defined:
        raise ck.err(UnknownNameError, f"unknown situation {t.single}", t.pattern_pos,
                     found=t.single, expected=expected_names(list(defined)))
    if len(defined) > 1:
        other = next(n for n in defined if n != t.single)
        raise ck.err(PatternError, f"situation {other} is never related to another "
                     "situation in the PATTERN", defined[other].pos, found=other,
                     expected=f"PATTERN {t.single} <relation> {other}")


def _key_fields(env: TemporalOutputEnv, q: ast.Query) -> list[tuple[str, ir.Expr]]:
    """KEYED BY of a context transition: fields key1, key2, ..."""
    fields: list[tuple[str, ir.Expr]] = []
    for i, node in enumerate(q.instance_key, start=1):
        ex, typ = env.compile(node, Reading(output=True))
        env.output_types[f"key{i}"] = typ
        fields.append((f"key{i}", ex))
    return fields


def _derive_fields(ck: ModelChecker, env: TemporalOutputEnv, q: ast.Query
                   ) -> list[tuple[str, ir.Expr]]:
    """DERIVE items, each named (AS or its default) and named once."""
    fields: list[tuple[str, ir.Expr]] = []
    for item in q.items:
        ex, typ = env.compile(item.expr, Reading(output=True))
        name = item.alias or default_alias(item.expr)
        if name is None:
            raise ck.err(ModelStructureError, "this DERIVE field needs a name", item.pos,
                         found="an expression", expected="<expr> AS <name>")
        if name in env.output_types:
            raise ck.err(DuplicateNameError, f"DERIVE field {name} is given twice", item.pos,
                         found=name, expected="distinct field names (use AS)")
        fields.append((name, ex))
        env.output_types[name] = typ
    return fields


def _add_intervals(ck: ModelChecker, env: TemporalOutputEnv, q: ast.Query,
                   sits: dict[str, CheckedSituation]) -> None:
    """Every match carries each situation's interval, `<S>_ts` and `<S>_te`."""
    for name in sits:
        for f in (f"{name}_ts", f"{name}_te"):
            if f in env.output_types:
                raise ck.err(DuplicateNameError, f"field {f} is the interval of situation {name}; "
                             "every temporal match carries it", q.pos, found=f,
                             expected="another field name")
            env.output_types[f] = "int"
