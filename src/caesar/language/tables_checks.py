"""ACEP: shared tables, active rules and table reads (docs/language.md,
"Shared tables and active rules"; the paper's sections 3 and 4).

Compiling them is two steps around the ordinary semantic check:

1. `split_tables(model)` (before the check): every rule, and every DERIVE
   query whose WHERE or projection reads a table, keeps its pattern and its
   table-free WHERE conjuncts as an ordinary retrieval query deriving the
   internal event `_acep_<name>` with the event attributes the rest needs.
   The rest (conditions that read tables, the projection, the actions) is an
   `ActorSource`: it runs on those matches in the stream-transaction
   scheduler, at the match's timestamp. A table condition therefore filters
   matches after the pattern matched (the same result as inside the pattern
   under skip-till-any-match, the default strategy).
2. `check_tables(sources, checked)` (after it): tables, table reads and
   actions are type-checked against the table schemas and the event
   attributes' types, and compiled to plans/tables.py.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from caesar.errors import SourcePosition
from caesar.language import ast
from caesar.language.checked import CheckedModel
from caesar.language.errors import (
    DuplicateNameError,
    LanguageError,
    ModelStructureError,
    ModelTypeError,
    TableError,
    UnknownNameError,
)
from caesar.language.expressions import NUMERIC, PLAIN, ExprEnv, Reading, default_alias
from caesar.plans import expr as ir
from caesar.plans import tables as tp

INTERNAL_PREFIX = "_acep_"
TABLE_AGGREGATES = {"count", "sum", "min", "max", "avg"}


@dataclass
class ActorSource:
    """A rule or a table-reading query, split from its pattern part."""

    name: str
    kind: str  # "rule" | "query"
    rank: int
    pattern_vars: tuple[str, ...]
    conditions: tuple[ast.ExprNode, ...]
    actions: tuple[ast.TableAction, ...]
    pos: SourcePosition
    aliases: dict[tuple[str | None, str], str] = field(default_factory=dict)

    @property
    def input_type(self) -> str:
        return INTERNAL_PREFIX + self.name


@dataclass
class TableSources:
    tables: tuple[ast.TableDecl, ...]
    actors: list[ActorSource]
    model: ast.Model


# ---- step 1: split -----------------------------------------------------------


def has_table_read(node: ast.ExprNode | None) -> bool:
    return any(isinstance(n, ast.TableRead) for n in walk(node))


def walk(node: ast.ExprNode | None) -> Iterator[ast.ExprNode]:
    if node is None:
        return
    yield node
    match node:
        case ast.UnaryExpr(operand=o):
            yield from walk(o)
        case ast.BinaryExpr(left=left, right=right):
            yield from walk(left)
            yield from walk(right)
        case ast.CallExpr(args=args):
            for a in args:
                yield from walk(a)
        case ast.TableRead(item=item, where=where):
            yield from walk(item)
            yield from walk(where)


def _and(parts: list[ast.ExprNode]) -> ast.ExprNode | None:
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = ast.BinaryExpr("AND", out, p, p.pos)
    return out


def _conjuncts(node: ast.ExprNode | None) -> list[ast.ExprNode]:
    if node is None:
        return []
    if isinstance(node, ast.BinaryExpr) and node.op == "AND":
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _positive_vars(pattern: ast.Pattern) -> tuple[str, ...]:
    return tuple(c.var for c in pattern.components if c.var is not None and not c.negated)


class _Splitter:
    def __init__(self, model: ast.Model) -> None:
        self.model = model
        self.actors: list[ActorSource] = []
        self.table_names = {t.name for t in model.tables}

    def err(self, cls: type[LanguageError], message: str, pos: SourcePosition,
            found: str | None = None, expected: str | None = None) -> LanguageError:
        return cls(message, pos, self.model.source, found=found, expected=expected)

    def _refs_outside_reads(self, node: ast.ExprNode | None, vars_: tuple[str, ...],
                            row_names: set[str]) -> Iterator[ast.Ref]:
        if node is None:
            return
        if isinstance(node, ast.TableRead):
            rows = {node.table} | ({node.alias} if node.alias else set())
            yield from self._refs_outside_reads(node.item, vars_, rows)
            yield from self._refs_outside_reads(node.where, vars_, rows)
            return
        if isinstance(node, ast.Ref):
            if node.var is None and row_names:
                return
            if node.var is not None and node.var in row_names and node.var not in vars_:
                return
            yield node
            return
        match node:
            case ast.UnaryExpr(operand=o):
                yield from self._refs_outside_reads(o, vars_, row_names)
            case ast.BinaryExpr(left=left, right=right):
                yield from self._refs_outside_reads(left, vars_, row_names)
                yield from self._refs_outside_reads(right, vars_, row_names)
            case ast.CallExpr(args=args):
                for a in args:
                    yield from self._refs_outside_reads(a, vars_, row_names)

    def actor(self, name: str, kind: str, pattern: ast.Pattern, conditions: list[ast.ExprNode],
              actions: tuple[ast.TableAction, ...], pos: SourcePosition) -> ActorSource:
        vars_ = _positive_vars(pattern)
        src = ActorSource(name, kind, len(self.actors), vars_, tuple(conditions), actions, pos)
        for r in self._all_refs(src):
            src.aliases.setdefault((r.var, r.name), f"{r.var or ''}__{r.name}")
        self.actors.append(src)
        return src

    def pattern_query(self, src: ActorSource, refs: list[ast.Ref], pattern: ast.Pattern,
                      where: ast.ExprNode | None, within: ast.Duration | None,
                      strategy: str | None, contexts: tuple[str, ...],
                      contexts_pos: SourcePosition, pos: SourcePosition) -> ast.Query:
        seen: dict[str, ast.DeriveItem] = {}
        for r in refs:
            alias = src.aliases[(r.var, r.name)]
            seen.setdefault(alias, ast.DeriveItem(r, alias, r.pos))
        items = tuple(seen.values())
        if not items:  # a rule reading no event attribute: the match itself is the trigger
            items = (ast.DeriveItem(ast.Literal(True, pos), "__matched", pos),)
        return ast.Query(kind="retrieval", derive_type=src.input_type, items=items,
                         pattern=pattern, where=where, within=within, strategy=strategy,
                         contexts=contexts, contexts_pos=contexts_pos, pos=pos, target_pos=pos)

    def rule(self, rule: ast.RuleDecl) -> ast.Query:
        conds = _conjuncts(rule.where)
        table_conds = [c for c in conds if has_table_read(c)]
        plain = [c for c in conds if not has_table_read(c)]
        src = self.actor(rule.name, "rule", rule.pattern, table_conds, rule.actions, rule.pos)
        refs = self._all_refs(src)
        return self.pattern_query(src, refs, rule.pattern, _and(plain), rule.within, None,
                                  rule.contexts, rule.contexts_pos, rule.pos)

    def _all_refs(self, src: ActorSource) -> list[ast.Ref]:
        refs: list[ast.Ref] = []
        vars_ = src.pattern_vars
        for c in src.conditions:
            refs.extend(self._refs_outside_reads(c, vars_, set()))
        for a in src.actions:
            rows = {a.table} if a.table and a.kind in ("UPDATE", "DELETE") else set()
            for e in a.values:
                refs.extend(self._refs_outside_reads(e, vars_, set()))
            for s in a.assignments:
                refs.extend(self._refs_outside_reads(s.expr, vars_, rows))
            refs.extend(self._refs_outside_reads(a.where, vars_, rows))
            for i in a.items:
                refs.extend(self._refs_outside_reads(i.expr, vars_, set()))
        return refs

    def query(self, q: ast.Query) -> ast.Query:
        reads = has_table_read(q.where) or any(has_table_read(i.expr) for i in q.items)
        if not reads:
            return q
        if q.kind != "retrieval" or q.pattern is None:
            what = "a context deriving query" if q.kind == "window" else f"a {q.kind} query"
            first = next(n for n in [*walk(q.where), *(m for i in q.items for m in walk(i.expr))]
                         if isinstance(n, ast.TableRead))
            raise self.err(TableError, f"table reads are not supported in {what} yet",
                           first.pos, found="SELECT ... FROM " + first.table,
                           expected="a table read in a DERIVE ... PATTERN query or a RULE")
        conds = _conjuncts(q.where)
        table_conds = [c for c in conds if has_table_read(c)]
        plain = [c for c in conds if not has_table_read(c)]
        assert q.derive_type is not None
        derive = ast.TableAction("DERIVE", derive_type=q.derive_type, items=q.items, pos=q.pos,
                                 table_pos=q.target_pos)
        name, n = q.derive_type, 1
        taken = {a.name for a in self.actors} | {r.name for r in self.model.rules}
        while name in taken:  # several queries deriving one type: Alert, Alert_2, ...
            n += 1
            name = f"{q.derive_type}_{n}"
        src = self.actor(name, "query", q.pattern, table_conds, (derive,), q.pos)
        return self.pattern_query(src, self._all_refs(src), q.pattern, _and(plain), q.within,
                                  q.strategy, q.contexts, q.contexts_pos, q.pos)


def split_tables(model: ast.Model) -> tuple[ast.Model, TableSources | None]:
    """The model without tables and rules (rules and table-reading queries
    replaced by their pattern part), and what was taken out."""
    if not model.tables and not model.rules and not any(
            has_table_read(q.where) or any(has_table_read(i.expr) for i in q.items)
            for q in [*model.queries, *(q for c in model.contexts for q in c.queries)]):
        return model, None
    s = _Splitter(model)
    located: list[tuple[tuple[int, int], object]] = []
    for block in model.contexts:
        located.extend(((q.pos.line, q.pos.column), q) for q in block.queries)
    located.extend(((q.pos.line, q.pos.column), q) for q in model.queries)
    seen: set[str] = set()
    for r in model.rules:
        if r.name in seen:
            raise s.err(DuplicateNameError, f"rule {r.name} is declared twice", r.pos,
                        found=r.name, expected="one RULE per name")
        seen.add(r.name)
        located.append(((r.pos.line, r.pos.column), r))
    located.sort(key=lambda item: item[0])
    replaced: dict[int, ast.Query] = {}
    rule_queries: list[ast.Query] = []
    for _, item in located:  # declaration order = step order in an s-transaction
        if isinstance(item, ast.RuleDecl):
            rule_queries.append(s.rule(item))
        else:
            assert isinstance(item, ast.Query)
            new = s.query(item)
            if new is not item:
                replaced[id(item)] = new
    contexts = tuple(replace(c, queries=tuple(replaced.get(id(q), q) for q in c.queries))
                     for c in model.contexts)
    queries = tuple(replaced.get(id(q), q) for q in model.queries) + tuple(rule_queries)
    plain = replace(model, contexts=contexts, queries=queries, tables=(), rules=())
    return plain, TableSources(model.tables, s.actors, model)


# ---- step 2: check and compile -------------------------------------------------


class _ActorEnv(ExprEnv):
    """Expressions of one actor: matched-event attributes (through the internal
    event's fields), table columns inside a table read or an UPDATE/DELETE, and
    table reads (compiled into READ slots of the unit being compiled)."""

    def __init__(self, checker: TableChecker, src: ActorSource, event_types: dict[str, str]) \
            -> None:
        super().__init__(checker)
        self.checker = checker
        self.src = src
        self.event_types = event_types  # alias -> type
        self.row: tuple[tp.TableSchema, set[str]] | None = None
        self.slots: list[tp.TableRead] = []

    def ref(self, node: ast.Ref, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        if self.row is not None:
            schema, names = self.row
            columns = dict(schema.columns)
            if (node.var is None or (node.var in names and node.var not in
                                     self.src.pattern_vars)):
                if node.name not in columns:
                    raise self.err(UnknownNameError, f"table {schema.name} has no column "
                                   f"{node.name}", node.pos, found=node.name,
                                   expected=", ".join(columns))
                return ir.Attr(tp.ROW, node.name), columns[node.name]
        alias = self.src.aliases.get((node.var, node.name))
        if alias is None or alias not in self.event_types:
            raise self.err(UnknownNameError, f"unknown name {node.name}", node.pos,
                           found=(f"{node.var}." if node.var else "") + node.name,
                           expected="<variable>.<attribute> of the pattern")
        return ir.Attr(tp.EVENT, alias), self.event_types[alias]

    def compile(self, node: ast.ExprNode, at: Reading = PLAIN) -> tuple[ir.Expr, str]:
        if isinstance(node, ast.TableRead):
            read, typ = self.table_read(node)
            self.slots.append(read)
            return ir.Attr(tp.READ, str(len(self.slots) - 1)), typ
        return super().compile(node, at)

    def in_row(self, schema: tp.TableSchema, names: set[str], node: ast.ExprNode) \
            -> tuple[ir.Expr, str]:
        saved, self.row = self.row, (schema, names)
        try:
            return self.compile(node)
        finally:
            self.row = saved

    def table_read(self, node: ast.TableRead) -> tuple[tp.TableRead, str]:
        if self.row is not None:
            raise self.err(TableError, "a table read cannot be nested in another table read "
                           "or in an UPDATE/DELETE condition", node.pos,
                           found=f"SELECT ... FROM {node.table}", expected="a plain expression")
        schema = self.checker.table(node.table, node.table_pos)
        names = {schema.name} | ({node.alias} if node.alias else set())
        where = key = None
        rest: list[ast.ExprNode] = []
        if node.where is not None:
            w, t = self.in_row(schema, names, node.where)
            self.expect_bool(t, node.where)
            where = w
            key, rest = self.key_of(schema, names, node.where)
        if node.exists:  # by key when the condition names the row
            keys = self.event_side(key) if key is not None else None
            return tp.TableRead(schema.name, "exists", key=keys, where=where), "bool"
        item = node.item
        assert item is not None
        if isinstance(item, ast.CallExpr) and item.func in TABLE_AGGREGATES:
            return self.aggregate_read(schema, names, item, where)
        if key is None:
            raise self.err(TableError, f"a single value read from table {schema.name} must name "
                           "its row by the whole primary key", node.pos,
                           found="WHERE " + ("(none)" if node.where is None else "without "
                                             + ", ".join(schema.key)),
                           expected=" AND ".join(f"{k} = <value>" for k in schema.key) +
                           ", or an aggregate (count(*), sum(c), ...) or EXISTS")
        value, typ = self.in_row(schema, names, item)
        return tp.TableRead(schema.name, "lookup", value=value, key=self.event_side(key),
                            where=None if not rest else where), typ

    def event_side(self, exprs: tuple[ast.ExprNode, ...]) -> tuple[ir.Expr, ...]:
        saved, self.row = self.row, None
        try:
            return tuple(self.compile(k)[0] for k in exprs)
        finally:
            self.row = saved

    def aggregate_read(self, schema: tp.TableSchema, names: set[str], item: ast.CallExpr,
                       where: ir.Expr | None) -> tuple[tp.TableRead, str]:
        if item.star or item.func == "count":
            if not item.star and item.func == "count" and len(item.args) != 1:
                raise self.err(ModelTypeError, "count takes * or one column", item.pos)
            value = None if item.star else self.in_row(schema, names, item.args[0])[0]
            return tp.TableRead(schema.name, "count", value=value, where=where), "int"
        if len(item.args) != 1:
            raise self.err(ModelTypeError, f"{item.func} takes one argument", item.pos,
                           found=str(len(item.args)), expected="1")
        value, t = self.in_row(schema, names, item.args[0])
        if t not in NUMERIC and item.func in ("sum", "avg"):
            raise self.err(ModelTypeError, f"{item.func} needs numbers", item.args[0].pos,
                           found=t, expected="int or float")
        typ = "float" if item.func == "avg" else t
        func: tp.ReadKind = "sum" if item.func == "sum" else "min" if item.func == "min" else \
            "max" if item.func == "max" else "avg"
        return tp.TableRead(schema.name, func, value=value, where=where), typ

    def key_of(self, schema: tp.TableSchema, names: set[str], where: ast.ExprNode) \
            -> tuple[tuple[ast.ExprNode, ...] | None, list[ast.ExprNode]]:
        """The event-side expressions of `k = expr` conjuncts for every key
        column (None unless all are given), and the other conjuncts."""
        found: dict[str, ast.ExprNode] = {}
        rest: list[ast.ExprNode] = []
        for c in _conjuncts(where):
            col = other = None
            if isinstance(c, ast.BinaryExpr) and c.op == "=":
                for a, b in ((c.left, c.right), (c.right, c.left)):
                    if self._is_column(a, names) and not self._reads_row(b, names):
                        assert isinstance(a, ast.Ref)
                        col, other = a.name, b
                        break
            if col in schema.key and col not in found and other is not None:
                found[col] = other
            else:
                rest.append(c)
        if set(found) != set(schema.key):
            return None, rest
        return tuple(found[k] for k in schema.key), rest

    def _is_column(self, node: ast.ExprNode, names: set[str]) -> bool:
        return isinstance(node, ast.Ref) and (
            node.var is None or (node.var in names and node.var not in self.src.pattern_vars))

    def _reads_row(self, node: ast.ExprNode, names: set[str]) -> bool:
        return any(self._is_column(n, names) or isinstance(n, ast.TableRead) for n in walk(node))


class TableChecker:
    def __init__(self, sources: TableSources, checked: CheckedModel) -> None:
        self.sources = sources
        self.model = sources.model
        self.checked = checked
        self.schemas: dict[str, tp.TableSchema] = {}

    def err(self, cls: type[LanguageError], message: str, pos: SourcePosition,
            found: str | None = None, expected: str | None = None) -> LanguageError:
        return cls(message, pos, self.model.source, found=found, expected=expected)

    def table(self, name: str, pos: SourcePosition) -> tp.TableSchema:
        if name not in self.schemas:
            raise self.err(UnknownNameError, f"unknown table {name}", pos, found=name,
                           expected=", ".join(self.schemas) or "a TABLE declared in the model")
        return self.schemas[name]

    def run(self) -> tp.AcepPlan:
        for t in self.sources.tables:
            self.schemas[t.name] = self.table_schema(t)
        actors = tuple(self.actor(src) for src in self.sources.actors)
        consumed = {t for q in self.checked.queries for t in q.input_types}
        for a in actors:
            for act in a.actions:
                if act.derive_type in consumed:
                    src = next(s for s in self.sources.actors if s.name == a.name)
                    raise self.err(TableError, f"{act.derive_type} is derived after reading "
                                   "a table; other queries cannot consume it yet", src.pos,
                                   found=f"a query reading {act.derive_type}",
                                   expected="table-reading outputs used only as alerts")
        return tp.AcepPlan(tuple(self.schemas.values()), actors)

    def table_schema(self, t: ast.TableDecl) -> tp.TableSchema:
        if t.name in self.schemas:
            raise self.err(DuplicateNameError, f"table {t.name} is declared twice", t.pos,
                           found=t.name, expected="one TABLE per name")
        if t.name in self.checked.event_types:
            raise self.err(DuplicateNameError, f"{t.name} names both a table and an event type",
                           t.pos, found=t.name, expected="distinct names")
        cols: dict[str, str] = {}
        for c in t.columns:
            if c.name in cols:
                raise self.err(DuplicateNameError, f"column {c.name} is declared twice", c.pos,
                               found=c.name, expected="distinct column names")
            cols[c.name] = c.type
        for k in t.key:
            if k not in cols:
                raise self.err(UnknownNameError, f"primary key column {k} is not a column of "
                               f"{t.name}", t.key_pos, found=k, expected=", ".join(cols))
        if len(set(t.key)) != len(t.key):
            raise self.err(DuplicateNameError, "a primary key column is named twice", t.key_pos)
        schema = tp.TableSchema(t.name, tuple(cols.items()), t.key)
        if t.file is None:
            return schema
        return replace(schema, initial=self.initial_rows(t, schema))

    def initial_rows(self, t: ast.TableDecl, schema: tp.TableSchema) -> tuple[tuple[tp.Value,
                                                                                   ...], ...]:
        assert t.file is not None
        path = Path(t.file)
        if not path.is_absolute() and self.model.file not in ("<model>", ""):
            path = Path(self.model.file).parent / path
        try:
            with path.open(encoding="utf-8", newline="") as fh:
                rows = list(csv.DictReader(fh))
        except OSError as exc:
            raise self.err(TableError, f"cannot read the rows of table {t.name}: {exc}", t.pos,
                           found=t.file, expected="a CSV file with a header line") from None
        out: list[tuple[tp.Value, ...]] = []
        keys: set[tuple[tp.Value, ...]] = set()
        for n, row in enumerate(rows, start=2):
            try:
                values = tuple(_convert(row.get(c), typ) for c, typ in schema.columns)
            except ValueError as exc:
                raise self.err(TableError, f"{t.file} line {n}: {exc}", t.pos) from None
            key = tuple(values[schema.column_names().index(k)] for k in schema.key)
            if None in key or key in keys:
                raise self.err(TableError, f"{t.file} line {n}: "
                               + ("a key column is empty" if None in key else
                                  f"key {key} is given twice"), t.pos)
            keys.add(key)
            out.append(values)
        return tuple(out)

    def actor(self, src: ActorSource) -> tp.ActorPlan:
        cq = next(q for q in self.checked.queries if q.output_type == src.input_type)
        env = _ActorEnv(self, src, dict(cq.output_schema))
        condition = []
        for c in src.conditions:
            ex, t = env.compile(c)
            env.expect_bool(t, c)
            condition.append(ex)
        reads = tuple(env.slots)
        actions = tuple(self.action(src, dict(cq.output_schema), a) for a in src.actions)
        read_tables = {r.table for r in reads} | {r.table for a in actions for r in a.reads}
        read_tables |= {a.table for a in actions if a.table is not None and a.kind in
                        ("UPDATE", "DELETE", "INSERT", "UPSERT")}
        write_tables = {a.table for a in actions if a.table is not None}
        return tp.ActorPlan(src.name, "rule" if src.kind == "rule" else "query", src.rank,
                            src.input_type, reads, tuple(condition), actions,
                            frozenset(read_tables), frozenset(write_tables),
                            f"{src.pos.file}:{src.pos.line}:{src.pos.column}")

    def action(self, src: ActorSource, event_types: dict[str, str],
               a: ast.TableAction) -> tp.ActionPlan:
        env = _ActorEnv(self, src, event_types)
        where_text = f"{a.pos.file}:{a.pos.line}:{a.pos.column}"
        if a.kind == "DERIVE":
            return self.derive(env, a, where_text)
        assert a.table is not None
        schema = self.table(a.table, a.table_pos)
        if a.kind in ("INSERT", "UPSERT"):
            return self.insert(env, schema, a, where_text)
        return self.change(env, schema, a, where_text)

    def derive(self, env: _ActorEnv, a: ast.TableAction, where_text: str) -> tp.ActionPlan:
        names: list[str] = []
        values: list[ir.Expr] = []
        for item in a.items:
            name = item.alias or default_alias(item.expr)
            if name is None:
                raise self.err(ModelStructureError, "this output field needs a name",
                               item.pos, found=None, expected="<expression> AS <name>")
            if name in names:
                raise self.err(DuplicateNameError, f"output field {name} is given twice",
                               item.pos, found=name, expected="distinct names")
            names.append(name)
            values.append(env.compile(item.expr)[0])
        assert a.derive_type is not None
        decl = next((e for e in self.model.events if e.name == a.derive_type), None)
        return tp.ActionPlan("DERIVE", None, tuple(names), tuple(values),
                             reads=tuple(env.slots), derive_type=a.derive_type,
                             topic=decl.output_topic if decl else None, where_text=where_text)

    def insert(self, env: _ActorEnv, schema: tp.TableSchema, a: ast.TableAction,
               where_text: str) -> tp.ActionPlan:
        columns = dict(schema.columns)
        cols = a.columns or schema.column_names()
        if len(cols) != len(a.values):
            raise self.err(TableError, f"{a.kind} gives {len(a.values)} values for "
                           f"{len(cols)} columns", a.pos, found=f"{len(a.values)} values",
                           expected=f"{len(cols)} ({', '.join(cols)})")
        for c in cols:
            if c not in columns:
                raise self.err(UnknownNameError, f"table {schema.name} has no column {c}",
                               a.table_pos, found=c, expected=", ".join(columns))
        missing = [k for k in schema.key if k not in cols]
        if missing:
            raise self.err(TableError, f"{a.kind} INTO {schema.name} must give the primary "
                           "key", a.pos, found="no value for " + ", ".join(missing),
                           expected="a value for " + ", ".join(schema.key))
        vals = tuple(self.typed(env, columns, c, v, schema.name)
                     for c, v in zip(cols, a.values, strict=True))
        kind: tp.ActionKind = "INSERT" if a.kind == "INSERT" else "UPSERT"
        return tp.ActionPlan(kind, schema.name, tuple(cols), vals, reads=tuple(env.slots),
                             where_text=where_text)

    def change(self, env: _ActorEnv, schema: tp.TableSchema, a: ast.TableAction,
               where_text: str) -> tp.ActionPlan:
        """UPDATE ... SET ... [WHERE] and DELETE FROM ... [WHERE]."""
        columns = dict(schema.columns)
        names_ = {schema.name}
        where = key = None
        if a.where is not None:
            where, t = env.in_row(schema, names_, a.where)
            env.expect_bool(t, a.where)
            k, _ = env.key_of(schema, names_, a.where)
            if k is not None:
                key = tuple(env.compile(e)[0] for e in k)
        if a.kind == "DELETE":
            return tp.ActionPlan("DELETE", schema.name, (), (), where=where, key=key,
                                 reads=tuple(env.slots), where_text=where_text)
        sets: list[ir.Expr] = []
        for s in a.assignments:
            if s.column in schema.key:
                raise self.err(TableError, f"UPDATE cannot change primary key column {s.column} "
                               f"of {schema.name}", s.pos, found=f"SET {s.column} = ...",
                               expected="DELETE the row and INSERT the new one")
            if s.column not in columns:
                raise self.err(UnknownNameError, f"table {schema.name} has no column {s.column}",
                               s.pos, found=s.column, expected=", ".join(columns))
            env.row = (schema, names_)
            try:
                sets.append(self.typed(env, columns, s.column, s.expr, schema.name))
            finally:
                env.row = None
        return tp.ActionPlan("UPDATE", schema.name, tuple(s.column for s in a.assignments),
                             tuple(sets), where=where, key=key, reads=tuple(env.slots),
                             where_text=where_text)

    def typed(self, env: _ActorEnv, columns: dict[str, str], column: str, node: ast.ExprNode,
              table: str) -> ir.Expr:
        ex, t = env.compile(node)
        want = columns[column]
        if t != want and not (want == "float" and t == "int"):
            raise self.err(TableError, f"column {column} of table {table} is {want.upper()}",
                           node.pos, found=f"a value of type {t}", expected=f"a {want} value")
        return ex


def _convert(text: str | None, typ: str) -> tp.Value:
    if text is None or text == "":
        return None
    if typ == "int":
        return int(text)
    if typ == "float":
        return float(text)
    if typ == "bool":
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"{text!r} is not a bool")
        return text.lower() in ("true", "1")
    return text


def check_tables(sources: TableSources, checked: CheckedModel) -> tp.AcepPlan:
    return TableChecker(sources, checked).run()
