"""Semantic analysis: resolve names, infer types, compile expressions to the
engine IR (src/caesar/plans/expr.py) and check every rule a parser cannot.

The result, `CheckedModel`, is what phase 1 and phase 2 work from: each query
is a `CheckedQuery` holding its resolved pattern components, conjuncts (each
with its source position), output fields and, for aggregations, the window in
ticks. Errors are LanguageError subclasses with position, found and expected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from caesar.errors import SourcePosition
from caesar.language import ast
from caesar.language.errors import (
    DuplicateNameError,
    ModelStructureError,
    ModelTypeError,
    PatternError,
    SchemaMismatchError,
    UnknownNameError,
    WindowError,
)
from caesar.plans import expr as ir
from caesar.plans.pattern import STRATEGIES, PatternComponent

UNIT_MS = {"MILLISECONDS": 1, "SECONDS": 1000, "MINUTES": 60_000, "HOURS": 3_600_000,
           "DAYS": 86_400_000}
AGGREGATES = {"count", "sum", "avg", "min", "max", "first", "last"}
FUNCTIONS = {"abs", "floor", "ceil", "least", "greatest"}
NUMERIC = {"int", "float"}
IMPLICIT_DEFAULT = "default"


@dataclass(frozen=True)
class EventType:
    name: str
    fields: dict[str, str] = field(hash=False)
    ts_field: str
    topic: str | None
    schema_file: str | None
    derived: bool
    pos: SourcePosition
    output_topic: str | None = None
    # The Avro schema SCHEMA names, read at compile time: the plan carries it, so
    # services never look for files (they run elsewhere, from an installed package).
    schema_json: str | None = field(default=None, hash=False, compare=False)


@dataclass(frozen=True)
class Conjunct:
    expr: ir.Expr
    pos: SourcePosition
    # The pattern variable a per-component FILTER attached it to (None: WHERE).
    component: str | None = None


@dataclass(frozen=True)
class CheckedQuery:
    qid: str
    kind: str  # "deriving" | "processing"
    form: str  # "pattern" | "aggregate"
    source: ast.Query
    home: str | None  # the context block it is written in (None: top level)
    contexts: tuple[str, ...]  # explicit after phase 1
    action: str | None
    target: str | None
    output_type: str
    output_fields: tuple[tuple[str, ir.Expr], ...]
    input_types: tuple[str, ...]
    output_schema: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    # pattern form
    components: tuple[PatternComponent, ...] = ()
    conjuncts: tuple[Conjunct, ...] = ()
    equivalence: tuple[str, ...] = ()
    within: int | None = None
    strategy: str = "skip_till_any_match"
    # aggregate form
    size: int = 0
    slide: int = 0
    group_by: tuple[str, ...] = ()
    aggregates: tuple[tuple[str, str, ir.Expr | None], ...] = ()  # (name, func, arg)
    having: tuple[ir.Expr, ...] = ()


@dataclass(frozen=True)
class ContextInfo:
    name: str
    default: bool
    pos: SourcePosition
    keyed: bool = False


@dataclass(frozen=True)
class CheckedModel:
    name: str
    time_unit: str
    partition_by: tuple[str, ...]
    event_types: dict[str, EventType] = field(hash=False)
    contexts: tuple[ContextInfo, ...]
    queries: tuple[CheckedQuery, ...]
    source: ast.Model = field(hash=False, compare=False, repr=False)

    @property
    def default_context(self) -> str:
        return next(c.name for c in self.contexts if c.default)

    def context_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.contexts)


def marker_type(action: str, target: str) -> str:
    """Output type of a context deriving query (the transition's marker)."""
    return f"_{action.lower()}_{target}"


class _Checker:
    def __init__(self, model: ast.Model) -> None:
        self.model = model
        self.text = model.source
        self.file = model.file
        self.time_unit = model.time_unit or "SECONDS"

    def err(self, cls, message: str, pos: SourcePosition, **kw):
        return cls(message, pos, self.text, **kw)

    # ---- model level ----
    def run(self) -> CheckedModel:
        m = self.model
        types = self.event_types()
        contexts = self.contexts()
        names = {c.name for c in contexts}
        located: list[tuple[ast.Query, str | None]] = []
        for block in m.contexts:
            located.extend((q, block.name) for q in block.queries)
        located.extend((q, None) for q in m.queries)
        # Queries are numbered q1, q2, ... in the order they appear in the text.
        located.sort(key=lambda item: (item[0].pos.line, item[0].pos.column))
        self.default_strategy = self.strategy(m.strategy, m.strategy_pos) if m.strategy else \
            "skip_till_any_match"
        checked = self.queries(located, types, contexts, names)
        self.partition(types)
        return CheckedModel(name=m.name or Path(self.file).stem or "model",
                            time_unit=self.time_unit, partition_by=m.partition_by,
                            event_types=types, contexts=contexts, queries=checked, source=m)

    def event_types(self) -> dict[str, EventType]:
        types: dict[str, EventType] = {}
        for decl in self.model.events:
            if decl.name in types:
                raise self.err(DuplicateNameError, f"event type {decl.name} is declared twice",
                               decl.pos, found=decl.name, expected="a new event type name")
            fields: dict[str, str] = {}
            for f in decl.fields:
                if f.name in fields:
                    raise self.err(DuplicateNameError,
                                   f"attribute {f.name} of {decl.name} is declared twice", f.pos,
                                   found=f.name, expected="distinct attribute names")
                fields[f.name] = f.type
            ts = decl.timestamp
            if ts is None:
                ts = "ts" if "ts" in fields else ("time" if "time" in fields else None)
            if ts is None:
                if decl.topic is not None:
                    raise self.err(ModelStructureError,
                                   f"input event type {decl.name} has no timestamp attribute",
                                   decl.pos, expected="TIMESTAMP <attr> or an attribute 'ts'")
                ts = "ts"
            elif ts not in fields:
                raise self.err(UnknownNameError, f"TIMESTAMP attribute {ts} is not an attribute of "
                               f"{decl.name}", decl.pos, found=ts,
                               expected=", ".join(fields) or "an attribute")
            elif fields[ts] != "int":
                raise self.err(ModelTypeError, f"timestamp attribute {ts} of {decl.name} must be INT",
                               decl.pos, found=fields[ts], expected="int")
            schema_json = self.check_schema(decl, fields) if decl.schema is not None else None
            if decl.topic is not None and decl.output_topic is not None:
                raise self.err(ModelStructureError, f"{decl.name} is read FROM TOPIC, so no query "
                               "derives it and it cannot go TO TOPIC", decl.pos,
                               found="FROM TOPIC and TO TOPIC",
                               expected="FROM TOPIC for input types, TO TOPIC for derived types")
            types[decl.name] = EventType(decl.name, fields, ts, decl.topic, decl.schema, False,
                                         decl.pos, decl.output_topic, schema_json)
        return types

    def check_schema(self, decl: ast.EventDecl, fields: dict[str, str]) -> str | None:
        """The schema's JSON text, after checking the declaration against it."""
        path = _find_schema(decl.schema or "", self.file)
        if path is None:
            return None  # the schema may be generated later; the declaration is authoritative
        try:
            text = path.read_text(encoding="utf-8")
            schema = json.loads(text)
            avro_fields = {f["name"]: _avro_type(f["type"]) for f in schema["fields"]}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise self.err(SchemaMismatchError, f"cannot read Avro schema {decl.schema}: {exc}",
                           decl.pos) from None
        for name, typ in fields.items():
            if name not in avro_fields:
                raise self.err(SchemaMismatchError,
                               f"attribute {name} of {decl.name} is not in {decl.schema}", decl.pos,
                               found=name, expected=", ".join(avro_fields))
            if avro_fields[name] is not None and avro_fields[name] != typ:
                raise self.err(SchemaMismatchError,
                               f"attribute {name} of {decl.name} is {typ} but {decl.schema} says "
                               f"{avro_fields[name]}", decl.pos, found=typ,
                               expected=str(avro_fields[name]))
        return text

    def contexts(self) -> tuple[ContextInfo, ...]:
        blocks = self.model.contexts
        if not blocks:
            return (ContextInfo(IMPLICIT_DEFAULT, True, self.model.pos),)
        seen: dict[str, ast.ContextBlock] = {}
        for b in blocks:
            if b.name in seen:
                raise self.err(DuplicateNameError, f"context {b.name} is declared twice", b.pos,
                               found=b.name, expected="one CONTEXT block per context")
            seen[b.name] = b
        defaults = [b for b in blocks if b.default]
        if not defaults:
            raise self.err(ModelStructureError, "the model has contexts but no DEFAULT CONTEXT",
                           blocks[0].pos, expected="exactly one DEFAULT CONTEXT block")
        if len(defaults) > 1:
            raise self.err(ModelStructureError, "more than one DEFAULT CONTEXT", defaults[1].pos,
                           found=f"DEFAULT CONTEXT {defaults[1].name}",
                           expected=f"only DEFAULT CONTEXT {defaults[0].name}")
        for b in blocks:
            if b.default and b.keyed:
                raise self.err(ModelStructureError, "the default context cannot be keyed: it "
                               "holds exactly when no other context does", b.pos,
                               found=f"DEFAULT CONTEXT {b.name} KEYED",
                               expected=f"DEFAULT CONTEXT {b.name} {{")
        return tuple(ContextInfo(b.name, b.default, b.pos, b.keyed) for b in blocks)

    def partition(self, types: dict[str, EventType]) -> None:
        for attr in self.model.partition_by:
            for t in types.values():
                if t.topic is not None and attr not in t.fields:
                    raise self.err(UnknownNameError, f"PARTITION BY attribute {attr} is missing from "
                                   f"input event type {t.name}", self.model.partition_pos,
                                   found=attr, expected=", ".join(t.fields))

    def strategy(self, name: str, pos: SourcePosition) -> str:
        norm = name.lower()
        if norm not in STRATEGIES:
            raise self.err(PatternError, f"unknown event selection strategy {name}", pos,
                           found=name, expected=", ".join(STRATEGIES))
        return norm

    def ticks(self, d: ast.Duration, what: str) -> int:
        if d.amount <= 0:
            raise self.err(WindowError, f"{what} must be positive", d.pos, found=str(d.amount),
                           expected="a duration > 0")
        if d.unit is None:
            return d.amount
        total = d.amount * UNIT_MS[d.unit]
        tick = UNIT_MS[self.time_unit]
        if total % tick:
            raise self.err(WindowError, f"{what} of {d.amount} {d.unit} is not a whole number of "
                           f"{self.time_unit} (the model's TIME UNIT)", d.pos,
                           found=f"{d.amount} {d.unit}", expected=f"a multiple of 1 {self.time_unit}")
        return total // tick

    # ---- queries ----
    def queries(self, located, types: dict[str, EventType], contexts, names) -> tuple[CheckedQuery, ...]:
        default = next(c.name for c in contexts if c.default)
        all_contexts = tuple(c.name for c in contexts)
        # Which queries derive which types (schemas come from the DERIVE clauses).
        producers: dict[str, list[int]] = {}
        for i, (q, _home) in enumerate(located):
            if q.kind != "window":
                assert q.derive_type is not None
                producers.setdefault(q.derive_type, []).append(i)
        pending = list(range(len(located)))
        done: dict[int, CheckedQuery] = {}
        while pending:
            progress = False
            for i in list(pending):
                q, home = located[i]
                inputs = _input_types(q)
                waiting = [t for t in inputs if t not in types]
                missing = [t for t in inputs if t not in types and t not in producers]
                if missing:
                    t = missing[0]
                    raise self.err(UnknownNameError, f"unknown event type {t}", _type_pos(q, t),
                                   found=t, expected=_expected_names(list(types) + list(producers)))
                if waiting:
                    continue
                checked = self.query(i, q, home, types, names, default, all_contexts)
                self.register_output(checked, q, types)
                done[i] = checked
                pending.remove(i)
                progress = True
            if not progress:
                q, _home = located[pending[0]]
                cycle = sorted({t for i in pending for t in _input_types(located[i][0])
                                if t not in types})
                raise self.err(ModelStructureError, "derived event types depend on each other in a "
                               "cycle: " + ", ".join(cycle), q.pos,
                               expected="queries whose outputs do not feed back into themselves")
        result = tuple(done[i] for i in range(len(located)))
        self.check_independence(result)
        self.check_keyed(result, contexts)
        return result

    def check_independence(self, queries: tuple[CheckedQuery, ...]) -> None:
        """Paper assumption (1), section 3.3: a query consumes only events
        derived while its own contexts hold, so each combined plan belongs
        to the contexts of its consumer."""
        made_in: dict[str, set[str]] = {}
        for q in queries:
            if q.kind == "processing":
                made_in.setdefault(q.output_type, set()).update(q.contexts)
        for q in queries:
            for t in q.input_types:
                if t in made_in and not set(q.contexts) <= made_in[t]:
                    missing = sorted(set(q.contexts) - made_in[t])
                    raise self.err(ModelStructureError, f"{t} is never derived in context "
                                   f"{', '.join(missing)}, where this query runs", q.source.pos,
                                   found=f"CONTEXT {', '.join(q.contexts)}",
                                   expected=f"contexts where {t} is derived: "
                                   + ", ".join(sorted(made_in[t])))

    def register_output(self, cq: CheckedQuery, q: ast.Query, types: dict[str, EventType]) -> None:
        if cq.kind == "deriving":
            return
        fields = dict(cq.output_schema)
        name = cq.output_type
        existing = types.get(name)
        if existing is None:
            types[name] = EventType(name, fields, "ts", None, None, True, q.target_pos)
            return
        if existing.topic is not None:
            raise self.err(ModelStructureError, f"DERIVE {name}: {name} is an input event type "
                           "(it has a topic)", q.pos, found=name, expected="a derived event type")
        if existing.fields != fields:
            raise self.err(SchemaMismatchError, f"DERIVE {name} produces fields "
                           f"{_fmt_fields(fields)} but {name} is {_fmt_fields(existing.fields)}",
                           q.pos, found=_fmt_fields(fields), expected=_fmt_fields(existing.fields))

    def query(self, index: int, q: ast.Query, home: str | None, types, names, default,
              all_contexts) -> CheckedQuery:
        qid = f"q{index + 1}"
        for c in q.contexts:
            if c not in names:
                raise self.err(UnknownNameError, f"unknown context {c}", q.contexts_pos, found=c,
                               expected=_expected_names(sorted(names)))
        if home is not None:
            if q.contexts and home not in q.contexts:
                raise self.err(ModelStructureError, f"a query in context {home} must run in "
                               f"{home}", q.contexts_pos, found="CONTEXT " + ", ".join(q.contexts),
                               expected=f"CONTEXT {home} (or no CONTEXT clause)")
            contexts = q.contexts or (home,)
        else:
            contexts = q.contexts or all_contexts
        contexts = tuple(dict.fromkeys(contexts))
        action = target = None
        if q.kind == "window":
            action, target = q.action, q.target
            assert action is not None and target is not None
            if target not in names:
                raise self.err(UnknownNameError, f"{action} to undefined context {target}",
                               q.target_pos, found=target, expected=_expected_names(sorted(names)))
            if target == default and action != "SWITCH":
                raise self.err(ModelStructureError, f"{action} CONTEXT {target}: the default context "
                               "holds exactly when no other context does", q.target_pos,
                               found=f"{action} CONTEXT {target}",
                               expected=f"SWITCH CONTEXT {target} or TERMINATE the other context")
        kind = "deriving" if q.kind == "window" else "processing"
        if q.kind == "aggregate":
            return self.aggregate(qid, q, home, contexts, types)
        return self.pattern(qid, q, home, contexts, kind, action, target, types)

    # ---- pattern queries ----
    def pattern(self, qid, q: ast.Query, home, contexts, kind, action, target, types) -> CheckedQuery:
        assert q.pattern is not None
        comps = q.pattern.components
        scope: dict[str, ast.Component] = {}
        var_names: list[str] = []
        for i, c in enumerate(comps):
            var = c.var or (c.types[0] if len(c.types) == 1 and not c.any_of else f"any{i + 1}")
            if var in scope:
                raise self.err(DuplicateNameError, f"pattern variable {var} is bound twice", c.pos,
                               found=var, expected="a distinct variable per component "
                               "(write e.g. SEQ(A a1, A a2))")
            for t in c.types:
                if t not in types:
                    raise self.err(UnknownNameError, f"unknown event type {t}", c.pos, found=t,
                                   expected=_expected_names(list(types)))
            if c.negated and c.kleene:
                raise self.err(PatternError, "a negated component cannot be a Kleene closure",
                               c.pos, found=f"NOT {'/'.join(c.types)}+", expected="NOT T v")
            scope[var] = c
            var_names.append(var)
        if all(c.negated for c in comps):
            raise self.err(PatternError, "a pattern needs at least one positive component",
                           q.pattern.pos, found="only negated components", expected="SEQ(..., T v, ...)")
        within = self.ticks(q.within, "WITHIN") if q.within is not None else None
        if within is None and (comps[0].negated or comps[-1].negated):
            c = comps[0] if comps[0].negated else comps[-1]
            raise self.err(PatternError, "a negation at the start or end of a sequence needs WITHIN "
                           "to bound the time it covers", c.pos, found="no WITHIN",
                           expected="WITHIN <duration>")
        env = _PatternEnv(self, scope, var_names, types)
        conjuncts: list[Conjunct] = []
        equivalence: list[str] = []
        built: list[PatternComponent] = []
        for var, c in zip(var_names, comps, strict=True):
            iteration_filter = None
            if c.filter is not None:
                if c.kleene:
                    ex, t = env.compile(c.filter, iteration_of=var)
                    env.expect_bool(t, c.filter)
                    iteration_filter = ex
                else:
                    for part in _split_and(c.filter):
                        ex, t = env.compile(part)
                        env.expect_bool(t, part)
                        conjuncts.append(Conjunct(ex, part.pos, var))
            built.append(PatternComponent(var=var, types=c.types, negated=c.negated,
                                          kleene=c.kleene, iteration_filter=iteration_filter))
        for part in _split_and(q.where):
            if isinstance(part, ast.Equivalence):
                for attr in part.attrs:
                    env.check_equivalence(attr, part)
                    if attr not in equivalence:
                        equivalence.append(attr)
                continue
            ex, t = env.compile(part)
            env.expect_bool(t, part)
            conjuncts.append(Conjunct(ex, part.pos))
        negated = {v for v, c in scope.items() if c.negated}
        for cj in conjuncts:
            read = ir.variables(cj.expr) & negated
            if len(read) > 1:
                raise self.err(PatternError, "a WHERE conjunct reads more than one negated variable, "
                               "so it cannot be checked against one candidate event", cj.pos,
                               found=", ".join(sorted(read)),
                               expected="at most one negated variable per AND-separated condition")
        strategy = self.strategy(q.strategy, q.strategy_pos) if q.strategy else self.default_strategy
        if kind == "deriving":
            assert action is not None and target is not None
            output_type, fields = marker_type(action, target), self.key_fields(q, env)
        else:
            output_type = q.derive_type or ""
            fields = self.output_fields(q, env)
        return CheckedQuery(qid=qid, kind=kind, form="pattern", source=q, home=home,
                            contexts=contexts, action=action, target=target,
                            output_type=output_type, output_fields=fields,
                            output_schema=dict(env.output_types),
                            input_types=tuple(dict.fromkeys(t for c in comps for t in c.types)),
                            components=tuple(built), conjuncts=tuple(conjuncts),
                            equivalence=tuple(equivalence), within=within, strategy=strategy)

    def key_fields(self, q: ast.Query, env: _PatternEnv) -> tuple[tuple[str, ir.Expr], ...]:
        """KEYED BY: the instance key, carried as the marker's fields key1, key2, ..."""
        out = []
        for i, node in enumerate(q.instance_key, start=1):
            ex, t = env.compile(node, output=True)
            env.output_types[f"key{i}"] = t
            out.append((f"key{i}", ex))
        return tuple(out)

    def check_keyed(self, queries: tuple[CheckedQuery, ...],
                    contexts: tuple[ContextInfo, ...]) -> None:
        """Every query that opens or closes a keyed context names the instance
        (KEYED BY), with as many values as the context's other queries."""
        keyed = {c.name for c in contexts if c.keyed}
        arity: dict[str, CheckedQuery] = {}
        for q in queries:
            if q.kind != "deriving":
                continue
            assert q.target is not None
            n = len(q.source.instance_key)
            touched = []  # (context, "opens" | "closes")
            if q.action != "TERMINATE" and q.target in keyed:
                touched.append((q.target, "opens"))
            ended = (q.target,) if q.action == "TERMINATE" else \
                q.contexts if q.action == "SWITCH" else ()
            touched += [(c, "closes") for c in ended
                        if c in keyed and (c != q.target or q.action == "TERMINATE")]
            if n and not touched:
                raise self.err(ModelStructureError, f"KEYED BY on a query that neither opens nor "
                               f"closes a keyed context ({q.action} CONTEXT {q.target})",
                               q.source.key_pos, found="KEYED BY",
                               expected=f"CONTEXT {q.target} KEYED {{ ... }} to declare keyed "
                               "instances, or no KEYED BY")
            for ctx, verb in touched:
                if not n:
                    raise self.err(ModelStructureError,
                                   f"context {ctx} is KEYED, so a query that {verb} it must "
                                   "name the instance", q.source.pos, found="no KEYED BY",
                                   expected=f"{q.action} CONTEXT {q.target} KEYED BY <expr>, ...")
                first = arity.setdefault(ctx, q)
                want = len(first.source.instance_key)
                if n != want:
                    raise self.err(ModelStructureError,
                                   f"context {ctx} is keyed by {want} value(s) at line "
                                   f"{first.source.key_pos.line}, so every query that {verb} it "
                                   "names its instance the same way", q.source.key_pos,
                                   found=f"KEYED BY with {n} value(s)",
                                   expected=f"KEYED BY with {want} value(s)")

    def output_fields(self, q: ast.Query, env: _PatternEnv) -> tuple[tuple[str, ir.Expr], ...]:
        out: dict[str, ir.Expr] = {}
        for item in q.items:
            ex, t = env.compile(item.expr, output=True)
            name = item.alias or _default_alias(item.expr)
            if name is None:
                raise self.err(ModelStructureError, "this DERIVE field needs a name", item.pos,
                               found="an expression", expected="<expr> AS <name>")
            if name in out:
                raise self.err(DuplicateNameError, f"DERIVE field {name} is given twice", item.pos,
                               found=name, expected="distinct field names (use AS)")
            out[name] = ex
            env.output_types[name] = t
        return tuple(out.items())

    # ---- aggregation queries ----
    def aggregate(self, qid, q: ast.Query, home, contexts, types) -> CheckedQuery:
        assert q.source is not None and q.window is not None
        source = types[q.source]
        w = q.window
        size = self.ticks(w.size, "WINDOW size")
        slide = self.ticks(w.slide, "WINDOW slide") if w.slide is not None else size
        if slide > size:
            raise self.err(WindowError, "a sliding window cannot slide by more than its size",
                           w.slide.pos if w.slide else w.pos, found=f"EVERY {slide} ticks",
                           expected=f"at most {size} ticks")
        for g in q.group_by:
            if g not in source.fields:
                raise self.err(UnknownNameError, f"GROUP BY attribute {g} is not an attribute of "
                               f"{source.name}", q.pos, found=g,
                               expected=", ".join(source.fields))
        env = _AggEnv(self, source, q.source_var)
        where: list[Conjunct] = []
        for part in _split_and(q.where):
            ex, t = env.compile(part)
            env.expect_bool(t, part)
            where.append(Conjunct(ex, part.pos))
        aggs: list[tuple[str, str, ir.Expr | None]] = []
        out_types: dict[str, str] = {}
        for g in q.group_by:
            out_types[g] = source.fields[g]
        for item in q.items:
            name = item.alias or _default_alias(item.expr)
            e = item.expr
            if isinstance(e, ast.Ref) and e.name in q.group_by and \
                    (e.var is None or e.var == q.source_var):
                if name != e.name:
                    raise self.err(ModelStructureError, "a GROUP BY attribute keeps its name in the "
                                   "output", item.pos, found=f"AS {name}", expected=e.name)
                continue
            if not (isinstance(e, ast.CallExpr) and e.func in AGGREGATES - {"first", "last"}):
                raise self.err(ModelStructureError, "an aggregation query derives aggregates and "
                               "GROUP BY attributes only", item.pos, found=_describe(e),
                               expected="count(*), count(DISTINCT a), sum(a), avg(a), min(a), "
                               "max(a) or a GROUP BY attribute")
            if name is None:
                raise self.err(ModelStructureError, "this aggregate needs a name", item.pos,
                               expected="<aggregate> AS <name>")
            if name in out_types:
                raise self.err(DuplicateNameError, f"output field {name} is given twice", item.pos,
                               found=name, expected="distinct output names")
            func, arg, typ = env.aggregate(e)
            aggs.append((name, func, arg))
            out_types[name] = typ
        having: list[ir.Expr] = []
        for part in _split_and(q.having):
            ex, t = _OutputEnv(self, out_types).compile(part)
            if t != "bool":
                raise self.err(ModelTypeError, "HAVING must be a condition", part.pos, found=t,
                               expected="bool")
            having.append(ex)
        fields = tuple((n, ir.Attr(None, n)) for n in out_types)
        return CheckedQuery(qid=qid, kind="processing", form="aggregate", source=q, home=home,
                            contexts=contexts, action=None, target=None,
                            output_type=q.derive_type or "", output_fields=fields,
                            output_schema=out_types, input_types=(source.name,), conjuncts=tuple(where), size=size,
                            slide=slide, group_by=q.group_by, aggregates=tuple(aggs),
                            having=tuple(having))


# ---- expression environments ----------------------------------------------


class _Env:
    def __init__(self, checker: _Checker) -> None:
        self.c = checker
        self.output_types: dict[str, str] = {}

    def err(self, cls, message, pos, **kw):
        return self.c.err(cls, message, pos, **kw)

    def expect_bool(self, t: str, node: ast.ExprNode) -> None:
        if t != "bool":
            raise self.err(ModelTypeError, "a condition must be true or false", node.pos,
                           found=f"a value of type {t}", expected="a comparison or AND/OR/NOT")

    def ref(self, node: ast.Ref, **kw) -> tuple[ir.Expr, str]:
        raise NotImplementedError

    def call(self, node: ast.CallExpr, **kw) -> tuple[ir.Expr, str]:
        return self.function(node, **kw)

    def compile(self, node: ast.ExprNode, **kw) -> tuple[ir.Expr, str]:
        match node:
            case ast.Literal(value=v):
                t = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else \
                    "float" if isinstance(v, float) else "string"
                return ir.Const(v), t
            case ast.Ref():
                return self.ref(node, **kw)
            case ast.UnaryExpr(op="NOT", operand=o):
                ex, t = self.compile(o, **kw)
                self.expect_bool(t, o)
                return ir.Unary("NOT", ex), "bool"
            case ast.UnaryExpr(operand=o):
                ex, t = self.compile(o, **kw)
                if t not in NUMERIC:
                    raise self.err(ModelTypeError, "unary minus needs a number", node.pos,
                                   found=t, expected="int or float")
                return ir.Unary("-", ex), t
            case ast.BinaryExpr(op=op, left=l, right=r):
                le, lt = self.compile(l, **kw)
                re_, rt = self.compile(r, **kw)
                return self.binary(node, op, le, lt, re_, rt)
            case ast.CallExpr():
                return self.call(node, **kw)
            case ast.Equivalence():
                raise self.err(PatternError, "an equivalence test [attr] is only allowed as an "
                               "AND-separated condition of a pattern's WHERE", node.pos,
                               found="[" + ", ".join(node.attrs) + "]",
                               expected="WHERE [attr] AND ...")
        raise TypeError(node)

    def binary(self, node, op, le, lt, re_, rt) -> tuple[ir.Expr, str]:
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

    def function(self, node: ast.CallExpr, **kw) -> tuple[ir.Expr, str]:
        if node.func in AGGREGATES:
            raise self.err(ModelTypeError, f"aggregate {node.func} is not allowed here", node.pos,
                           found=f"{node.func}(...)",
                           expected="aggregates over a Kleene variable (pattern queries) or in "
                           "the DERIVE list of an aggregation query")
        if node.func not in FUNCTIONS:
            raise self.err(UnknownNameError, f"unknown function {node.func}", node.pos,
                           found=node.func, expected=", ".join(sorted(FUNCTIONS | AGGREGATES)))
        if node.star or node.distinct:
            raise self.err(ModelTypeError, f"{node.func} takes plain arguments", node.pos,
                           found="* or DISTINCT", expected=f"{node.func}(expr)")
        args = [self.compile(a, **kw) for a in node.args]
        want = 1 if node.func in ("abs", "floor", "ceil") else None
        if (want is not None and len(args) != want) or (want is None and len(args) < 2):
            raise self.err(ModelTypeError, f"wrong number of arguments to {node.func}", node.pos,
                           found=str(len(args)), expected=str(want) if want else "at least 2")
        for (_, t), a in zip(args, node.args, strict=True):
            if t not in NUMERIC:
                raise self.err(ModelTypeError, f"{node.func} needs numbers", a.pos, found=t,
                               expected="int or float")
        types = {t for _, t in args}
        if node.func in ("floor", "ceil"):
            typ = "int"
        else:
            typ = "float" if "float" in types else "int"
        return ir.Call(node.func, tuple(e for e, _ in args)), typ  # type: ignore[arg-type]


class _PatternEnv(_Env):
    def __init__(self, checker, scope: dict[str, ast.Component], order: list[str], types) -> None:
        super().__init__(checker)
        self.scope = scope
        self.order = order
        self.types = types

    def attr_type(self, var: str, name: str, pos) -> str:
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

    def ref(self, node: ast.Ref, iteration_of: str | None = None, output: bool = False,
            in_agg: str | None = None) -> tuple[ir.Expr, str]:
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
        if comp.negated and output:
            raise self.err(PatternError, f"{var} is negated: it has no event to derive from",
                           node.pos, found=f"{var}.{node.name}", expected="a positive variable")
        if iteration_of is not None and var != iteration_of:
            if self.order.index(var) > self.order.index(iteration_of) or comp.negated:
                raise self.err(PatternError, "a Kleene FILTER may read only earlier positive "
                               "variables and the iterated event", node.pos, found=var,
                               expected=f"{iteration_of} or a variable before it")
        return ir.Attr(var, node.name), typ

    def call(self, node: ast.CallExpr, **kw) -> tuple[ir.Expr, str]:
        if node.func not in AGGREGATES:
            return self.function(node, **kw)
        if kw.get("iteration_of") is not None or kw.get("in_agg") is not None:
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
        func = "count_distinct" if node.distinct else node.func
        if node.distinct and node.func != "count":
            raise self.err(ModelTypeError, "DISTINCT is only for count", node.pos,
                           found=f"{node.func}(DISTINCT ...)", expected="count(DISTINCT ...)")
        if node.func == "count" and not node.distinct and isinstance(arg, ast.Ref) and \
                arg.var is None and arg.name in self.scope:
            if not self.scope[arg.name].kleene:
                raise self.err(PatternError, f"count({arg.name}) needs a Kleene variable", arg.pos,
                               found=arg.name, expected=", ".join(kleene) or "a T+ component")
            return ir.Agg("count", arg.name, None), "int"
        vars_read = _refs(arg)
        target = next((v for v in vars_read if v in self.scope and self.scope[v].kleene), None)
        if target is None:
            if len(kleene) == 1 and all(v is None for v in vars_read):
                target = kleene[0]
            else:
                raise self.err(PatternError, f"{node.func} must aggregate over a Kleene variable",
                               node.pos, found=_describe(arg),
                               expected=", ".join(f"{v}.<attr>" for v in kleene) or
                               "a T+ component in the pattern")
        ex, t = self.compile(arg, in_agg=target)
        typ = _agg_type(func, t)
        if typ is None:
            raise self.err(ModelTypeError, f"{node.func} needs numbers", arg.pos, found=t,
                           expected="int or float")
        return ir.Agg(func, target, ex), typ  # type: ignore[arg-type]

    def check_equivalence(self, attr: str, node: ast.Equivalence) -> None:
        seen: set[str] = set()
        for var in self.order:
            for t in self.scope[var].types:
                fields = self.types[t].fields
                if attr not in fields:
                    raise self.err(UnknownNameError, f"equivalence test [{attr}]: {t} has no "
                                   f"attribute {attr}", node.pos, found=f"[{attr}]",
                                   expected="an attribute every pattern event type has")
                seen.add(fields[attr])
        if len(seen) > 1:
            raise self.err(ModelTypeError, f"equivalence test [{attr}] compares different types",
                           node.pos, found=", ".join(sorted(seen)), expected="one type")


class _AggEnv(_Env):
    def __init__(self, checker, source: EventType, var: str | None) -> None:
        super().__init__(checker)
        self.source = source
        self.var = var

    def ref(self, node: ast.Ref, **kw) -> tuple[ir.Expr, str]:
        if node.var is not None and node.var != self.var:
            raise self.err(UnknownNameError, f"unknown variable {node.var}", node.pos,
                           found=node.var, expected=self.var or node.name)
        if node.name not in self.source.fields:
            raise self.err(UnknownNameError, f"{self.source.name} has no attribute {node.name}",
                           node.pos, found=node.name, expected=", ".join(self.source.fields))
        return ir.Attr(None, node.name), self.source.fields[node.name]

    def aggregate(self, node: ast.CallExpr) -> tuple[str, ir.Expr | None, str]:
        if node.star:
            if node.func != "count":
                raise self.err(ModelTypeError, f"{node.func}(*) is not an aggregate", node.pos,
                               found=f"{node.func}(*)", expected="count(*)")
            return "count", None, "int"
        if len(node.args) != 1:
            raise self.err(ModelTypeError, f"{node.func} takes one argument", node.pos,
                           found=str(len(node.args)), expected="1")
        if node.distinct and node.func != "count":
            raise self.err(ModelTypeError, "DISTINCT is only for count", node.pos,
                           found=f"{node.func}(DISTINCT ...)", expected="count(DISTINCT ...)")
        func = "count_distinct" if node.distinct else node.func
        ex, t = self.compile(node.args[0])
        typ = _agg_type(func, t)
        if typ is None:
            raise self.err(ModelTypeError, f"{node.func} needs numbers", node.args[0].pos,
                           found=t, expected="int or float")
        return func, ex, typ


class _OutputEnv(_Env):
    def __init__(self, checker, outputs: dict[str, str]) -> None:
        super().__init__(checker)
        self.outputs = outputs

    def ref(self, node: ast.Ref, **kw) -> tuple[ir.Expr, str]:
        if node.var is not None or node.name not in self.outputs:
            raise self.err(UnknownNameError, f"HAVING reads output fields; {node.name} is not one",
                           node.pos, found=_describe(node), expected=", ".join(self.outputs))
        return ir.Attr(None, node.name), self.outputs[node.name]


# ---- helpers ---------------------------------------------------------------


def _agg_type(func: str, t: str) -> str | None:
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


def _refs(node: ast.ExprNode) -> list[str | None]:
    match node:
        case ast.Ref(var=v):
            return [v]
        case ast.UnaryExpr(operand=o):
            return _refs(o)
        case ast.BinaryExpr(left=l, right=r):
            return _refs(l) + _refs(r)
        case ast.CallExpr(args=args):
            return [v for a in args for v in _refs(a)]
    return []


def _split_and(node: ast.ExprNode | None) -> list[ast.ExprNode]:
    if node is None:
        return []
    if isinstance(node, ast.BinaryExpr) and node.op == "AND":
        return _split_and(node.left) + _split_and(node.right)
    return [node]


def _default_alias(node: ast.ExprNode) -> str | None:
    if isinstance(node, ast.Ref):
        return node.name
    if isinstance(node, ast.CallExpr) and node.func in AGGREGATES:
        return ("count_distinct" if node.distinct else node.func)
    return None


def _describe(node: ast.ExprNode) -> str:
    from caesar.language.formatter import format_expr

    return format_expr(node)


def _input_types(q: ast.Query) -> tuple[str, ...]:
    if q.kind == "aggregate":
        return (q.source,) if q.source else ()
    assert q.pattern is not None
    return tuple(dict.fromkeys(t for c in q.pattern.components for t in c.types))


def _type_pos(q: ast.Query, t: str) -> SourcePosition:
    if q.pattern is not None:
        for c in q.pattern.components:
            if t in c.types:
                return c.pos
    return q.target_pos if q.kind == "aggregate" else q.pos


def _expected_names(names) -> str:
    names = sorted(set(names))
    return ", ".join(names) if names else "a declared name"


def _fmt_fields(fields: dict[str, str]) -> str:
    return "(" + ", ".join(f"{k} {v}" for k, v in fields.items()) + ")"


def _avro_type(t) -> str | None:
    if isinstance(t, list):
        non_null = [x for x in t if x != "null"]
        return _avro_type(non_null[0]) if len(non_null) == 1 else None
    if isinstance(t, dict):
        if t.get("logicalType") in ("timestamp-millis", "timestamp-micros"):
            return "int"
        return _avro_type(t.get("type"))
    return {"int": "int", "long": "int", "float": "float", "double": "float", "string": "string",
            "boolean": "bool"}.get(t)


def _find_schema(ref: str, model_file: str) -> Path | None:
    path = Path(ref)
    if path.is_absolute():
        return path if path.is_file() else None
    base = Path(model_file).resolve().parent if model_file and not model_file.startswith("<") \
        else Path.cwd()
    for folder in [base, *base.parents][:4]:
        if (folder / path).is_file():
            return folder / path
    return None


def check(model: ast.Model) -> CheckedModel:
    return _Checker(model).run()
