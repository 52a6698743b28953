"""Semantic analysis of a model: event types and their schemas, contexts,
the stream partition key, the order queries can be checked in (a query after
the queries deriving its inputs), and the rules that span queries (context
independence, keyed contexts). One query's body is checked in query_checks.py,
its expressions in expressions.py.

The result, `CheckedModel` (checked.py), is what phases 1 and 2 work from.
Errors are LanguageError subclasses with position, found and expected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from caesar.errors import SourcePosition
from caesar.language import ast
from caesar.language.avro_schemas import avro_checks, avro_type, find_schema
from caesar.language.checked import (
    IMPLICIT_DEFAULT,
    CheckedModel,
    CheckedQuery,
    ContextInfo,
    EventType,
    PatternBody,
    Transition,
    is_action,
)
from caesar.language.errors import (
    DuplicateNameError,
    LanguageError,
    ModelStructureError,
    ModelTypeError,
    NumberRangeError,
    SchemaMismatchError,
    UnknownNameError,
    WindowError,
)
from caesar.language.identity import query_identities
from caesar.language.pattern_features import strategy_name
from caesar.language.query_checks import check_aggregate, check_pattern, expected_names
from caesar.language.temporal_checks import (
    ModelSituations,
    check_temporal,
    edge_qid,
    query_input_types,
    situation_edges,
    unknown_source,
)
from caesar.plans.execution import FieldCheck
from caesar.plans.functions import Function
from caesar.plans.pattern import Strategy

MAX_TICKS = 2**62  # windows stay below END_OF_TIME ticks
UNIT_MS = {"MILLISECONDS": 1, "SECONDS": 1000, "MINUTES": 60_000, "HOURS": 3_600_000,
           "DAYS": 86_400_000}


class ModelChecker:
    def __init__(self, model: ast.Model, functions: Mapping[str, Function] | None = None
                 ) -> None:
        self.model = model
        self.functions: Mapping[str, Function] = functions or {}
        self.functions_used: set[str] = set()  # names of the functions the model calls
        self.text = model.source
        self.file = model.file
        self.time_unit = model.time_unit or "SECONDS"

    def err(self, cls: type[LanguageError], message: str, pos: SourcePosition,
            found: str | None = None, expected: str | None = None) -> LanguageError:
        return cls(message, pos, self.text, found=found, expected=expected)

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
        self.default_strategy: Strategy = \
            self.strategy(m.strategy, m.strategy_pos) if m.strategy else \
            "skip_till_any_match"
        self.situations = ModelSituations(self, m.situations)
        located = situation_edges(located)
        checked = self.queries(located, types, contexts, names)
        query_identities(checked, m.source)  # duplicate @name: an error here, with its position
        self.situations.check_all(types)
        self.partition(types)
        return CheckedModel(name=m.name or _file_model_name(self.file),
                            time_unit=self.time_unit, partition_by=m.partition_by,
                            context_key=m.context_key,
                            event_types=types, contexts=contexts, queries=checked, source=m,
                            functions_used=frozenset(self.functions_used))

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
            ts = self.timestamp(decl, fields)
            schema_json = self.check_schema(decl, fields) if decl.schema is not None else None
            checks = _field_checks(decl, schema_json)
            if decl.topic is not None and decl.output_topic is not None:
                raise self.err(ModelStructureError, f"{decl.name} is read FROM TOPIC, so no query "
                               "derives it and it cannot go TO TOPIC", decl.pos,
                               found="FROM TOPIC and TO TOPIC",
                               expected="FROM TOPIC for input types, TO TOPIC for derived types")
            types[decl.name] = EventType(decl.name, fields, ts, decl.topic, decl.schema, False,
                                         decl.pos, decl.output_topic, schema_json, checks)
        return types

    def timestamp(self, decl: ast.EventDecl, fields: dict[str, str]) -> str:
        """The event time attribute: TIMESTAMP, else `ts` or `time`; an input
        type must have one (an INT)."""
        ts = decl.timestamp
        if ts is None:
            ts = "ts" if "ts" in fields else ("time" if "time" in fields else None)
        if ts is None:
            if decl.topic is not None:
                raise self.err(ModelStructureError,
                               f"input event type {decl.name} has no timestamp attribute",
                               decl.pos, expected="TIMESTAMP <attr> or an attribute 'ts'")
            return "ts"
        if ts not in fields:
            raise self.err(UnknownNameError, f"TIMESTAMP attribute {ts} is not an attribute of "
                           f"{decl.name}", decl.pos, found=ts,
                           expected=", ".join(fields) or "an attribute")
        if fields[ts] != "int":
            raise self.err(ModelTypeError, f"timestamp attribute {ts} of {decl.name} must be INT",
                           decl.pos, found=fields[ts], expected="int")
        return ts

    def check_schema(self, decl: ast.EventDecl, fields: dict[str, str]) -> str | None:
        """The schema's JSON text, after checking the declaration against it."""
        path = find_schema(decl.schema or "", self.file)
        if path is None:
            return None  # the schema may be generated later; the declaration is authoritative
        try:
            text = path.read_text(encoding="utf-8")
            schema = json.loads(text)
            avro_fields = {f["name"]: avro_type(f["type"]) for f in schema["fields"]}
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
        m = self.model
        for attr in m.partition_by:
            for t in types.values():
                if t.topic is not None and attr not in t.fields:
                    raise self.err(UnknownNameError, f"PARTITION BY attribute {attr} is missing from "
                                   f"input event type {t.name}", m.partition_pos,
                                   found=attr, expected=", ".join(t.fields))
        if m.context_key and not m.partition_by:
            raise self.err(ModelStructureError, "CONTEXTS PER needs a PARTITION BY: contexts hold "
                           "per key inside a stream partition", m.context_key_pos,
                           found="CONTEXTS PER without PARTITION BY",
                           expected="PARTITION BY <attributes> before CONTEXTS PER")
        for attr in m.context_key:
            if attr in m.partition_by:
                raise self.err(ModelStructureError, f"{attr} is in PARTITION BY already; CONTEXTS "
                               "PER names attributes that divide a partition further",
                               m.context_key_pos, found=attr,
                               expected="attributes not in PARTITION BY")
            for t in types.values():
                if t.topic is not None and attr not in t.fields:
                    raise self.err(UnknownNameError, f"CONTEXTS PER attribute {attr} is missing "
                                   f"from input event type {t.name}", m.context_key_pos,
                                   found=attr, expected=", ".join(t.fields))
                if attr in t.fields and t.fields[attr] == "float":
                    raise self.err(ModelTypeError, f"CONTEXTS PER attribute {attr} of {t.name} "
                                   "is FLOAT; a context key must be INT, STRING or BOOL",
                                   m.context_key_pos, found="float",
                                   expected="int, string or bool")

    def strategy(self, name: str, pos: SourcePosition) -> Strategy:
        return strategy_name(self, name, pos)

    def ticks(self, d: ast.Duration, what: str) -> int:
        if d.amount <= 0:
            raise self.err(WindowError, f"{what} must be positive", d.pos, found=str(d.amount),
                           expected="a duration > 0")
        if d.unit is None:
            return self._bounded(d.amount, d, what)
        total = d.amount * UNIT_MS[d.unit]
        tick = UNIT_MS[self.time_unit]
        if total % tick:
            raise self.err(WindowError, f"{what} of {d.amount} {d.unit} is not a whole number of "
                           f"{self.time_unit} (the model's TIME UNIT)", d.pos,
                           found=f"{d.amount} {d.unit}", expected=f"a multiple of 1 {self.time_unit}")
        return self._bounded(total // tick, d, what)

    def _bounded(self, ticks: int, d: ast.Duration, what: str) -> int:
        # Event times are 64-bit with ts + window computed in the engine: keep
        # windows below 2^62 ticks (END_OF_TIME).
        if ticks >= MAX_TICKS:
            raise self.err(NumberRangeError, f"{what} of {d.amount}"
                           f"{' ' + d.unit if d.unit else ''} is too long", d.pos,
                           found=f"{ticks} ticks", expected=f"fewer than {MAX_TICKS} ticks")
        return ticks

    # ---- queries ----
    def queries(self, located: Sequence[tuple[ast.Query, str | None]],
                types: dict[str, EventType], contexts: tuple[ContextInfo, ...],
                names: set[str]) -> tuple[CheckedQuery, ...]:
        default = next(c.name for c in contexts if c.default)
        all_contexts = tuple(c.name for c in contexts)
        # Which queries derive which types (schemas come from the DERIVE clauses).
        producers: dict[str, list[int]] = {}
        for i, (q, _home) in enumerate(located):
            if q.kind != "window":
                assert q.derive_type is not None
                producers.setdefault(q.derive_type, []).append(i)
        timeouts = {q.timeout.derive_type: i for i, (q, _home) in enumerate(located)
                    if q.timeout is not None}
        pending = list(range(len(located)))
        done: dict[int, CheckedQuery] = {}
        while pending:
            progress = False
            for i in list(pending):
                q, home = located[i]
                if not self.inputs_ready(q, types, producers, timeouts):
                    continue
                checked = self.query(i, q, home, types, names, default, all_contexts)
                self.register_output(checked, q, types)
                done[i] = checked
                pending.remove(i)
                progress = True
            if not progress:
                q, _home = located[pending[0]]
                cycle = sorted({t for i in pending
                                for t in _input_types(located[i][0], self.situations.decls)
                                if t not in types})
                raise self.err(ModelStructureError, "derived event types depend on each other in a "
                               "cycle: " + ", ".join(cycle), q.pos,
                               expected="queries whose outputs do not feed back into themselves")
        result = tuple(done[i] for i in range(len(located)))
        self.check_independence(result)
        self.check_keyed(result, contexts)
        return result

    def inputs_ready(self, q: ast.Query, types: dict[str, EventType],
                     producers: dict[str, list[int]], timeouts: dict[str, int]) -> bool:
        """Are `q`'s input types all known yet? An input no topic and no
        query provides, or a timeout event, is an error."""
        inputs = _input_types(q, self.situations.decls)
        for t in inputs:
            if t in timeouts:
                raise self.err(ModelStructureError, f"{t} is the ON TIMEOUT event of "
                               f"query q{timeouts[t] + 1}: timeout events go to their "
                               "own topic and feed no other query", _type_pos(q, t),
                               found=t, expected="a type a DERIVE or a topic provides")
        missing = [t for t in inputs if t not in types and t not in producers]
        if missing:
            t = missing[0]
            if q.kind == "temporal" or q.temporal is not None:
                raise unknown_source(self, q, t, list(types) + list(producers))
            raise self.err(UnknownNameError, f"unknown event type {t}", _type_pos(q, t),
                           found=t, expected=expected_names(list(types) + list(producers)))
        return all(t in types for t in inputs)

    def check_independence(self, queries: tuple[CheckedQuery, ...]) -> None:
        """Paper assumption (1), section 3.3: a query consumes only events
        derived while its own contexts hold, so each combined plan belongs
        to the contexts of its consumer."""
        made_in: dict[str, set[str]] = {}
        for q in queries:
            if not q.deriving:
                made_in.setdefault(q.output_type, set()).update(q.contexts)
        for q in queries:
            for t in q.input_types:
                if t in made_in and not set(q.contexts) <= made_in[t]:
                    missing = sorted(set(q.contexts) - made_in[t])
                    raise self.err(ModelStructureError, f"{t} is never derived in context "
                                   f"{', '.join(missing)}, where this query runs",
                                   _type_pos(q.source, t),
                                   found=f"CONTEXT {', '.join(q.contexts)}",
                                   expected=f"contexts where {t} is derived: "
                                   + ", ".join(sorted(made_in[t])))

    def register_output(self, cq: CheckedQuery, q: ast.Query, types: dict[str, EventType]) -> None:
        if cq.deriving:
            return
        body = cq.body
        if isinstance(body, PatternBody) and body.timeout_type is not None:
            self.register_type(body.timeout_type, dict(cq.timeout_schema), q, types)
        self.register_type(cq.output_type, dict(cq.output_schema), q, types)

    def register_type(self, name: str, fields: dict[str, str], q: ast.Query,
                      types: dict[str, EventType]) -> None:
        """A type a query derives: new, or as declared (without a topic)."""
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

    def query(self, index: int, q: ast.Query, home: str | None, types: dict[str, EventType],
              names: set[str], default: str, all_contexts: tuple[str, ...]) -> CheckedQuery:
        qid = edge_qid(q) or f"q{index + 1}"
        contexts = self.query_contexts(q, home, names, all_contexts)
        transition = self.transition(q, names, default) if q.kind == "window" else None
        if q.kind == "aggregate":
            return check_aggregate(self, qid, q, home, contexts, types)
        if q.kind == "temporal" or q.temporal is not None:
            return check_temporal(self, qid, q, home, contexts, transition, types,
                                  self.situations)
        return check_pattern(self, qid, q, home, contexts, transition, types)

    def query_contexts(self, q: ast.Query, home: str | None, names: set[str],
                       all_contexts: tuple[str, ...]) -> tuple[str, ...]:
        """The contexts a query runs in: its CONTEXT clause, else its block, else all."""
        for c in q.contexts:
            if c not in names:
                raise self.err(UnknownNameError, f"unknown context {c}", q.contexts_pos, found=c,
                               expected=expected_names(sorted(names)))
        if home is not None:
            if q.contexts and home not in q.contexts:
                raise self.err(ModelStructureError, f"a query in context {home} must run in "
                               f"{home}", q.contexts_pos, found="CONTEXT " + ", ".join(q.contexts),
                               expected=f"CONTEXT {home} (or no CONTEXT clause)")
            contexts = q.contexts or (home,)
        else:
            contexts = q.contexts or all_contexts
        return tuple(dict.fromkeys(contexts))

    def transition(self, q: ast.Query, names: set[str], default: str) -> Transition:
        """What a context deriving query (INITIATE/SWITCH/TERMINATE) does."""
        action, target = q.action, q.target
        assert is_action(action) and target is not None  # the grammar allows no other
        if target not in names:
            raise self.err(UnknownNameError, f"{action} to undefined context {target}",
                           q.target_pos, found=target, expected=expected_names(sorted(names)))
        if target == default and action != "SWITCH":
            raise self.err(ModelStructureError, f"{action} CONTEXT {target}: the default context "
                           "holds exactly when no other context does", q.target_pos,
                           found=f"{action} CONTEXT {target}",
                           expected=f"SWITCH CONTEXT {target} or TERMINATE the other context")
        return Transition(action, target)

    def check_keyed(self, queries: tuple[CheckedQuery, ...],
                    contexts: tuple[ContextInfo, ...]) -> None:
        """Every query that opens or closes a keyed context names the instance
        (KEYED BY), with as many values as the context's other queries."""
        keyed = {c.name for c in contexts if c.keyed}
        arity: dict[str, CheckedQuery] = {}
        for q in queries:
            if q.transition is None:
                continue
            action, target = q.transition.action, q.transition.target
            n = len(q.source.instance_key)
            touched = []  # (context, "opens" | "closes")
            if action != "TERMINATE" and target in keyed:
                touched.append((target, "opens"))
            ended = (target,) if action == "TERMINATE" else \
                q.contexts if action == "SWITCH" else ()
            touched += [(c, "closes") for c in ended
                        if c in keyed and (c != target or action == "TERMINATE")]
            if n and not touched:
                raise self.err(ModelStructureError, f"KEYED BY on a query that neither opens nor "
                               f"closes a keyed context ({action} CONTEXT {target})",
                               q.source.key_pos, found="KEYED BY",
                               expected=f"CONTEXT {target} KEYED {{ ... }} to declare keyed "
                               "instances, or no KEYED BY")
            for ctx, verb in touched:
                if not n:
                    raise self.err(ModelStructureError,
                                   f"context {ctx} is KEYED, so a query that {verb} it must "
                                   "name the instance", q.source.pos, found="no KEYED BY",
                                   expected=f"{action} CONTEXT {target} KEYED BY <expr>, ...")
                first = arity.setdefault(ctx, q)
                want = len(first.source.instance_key)
                if n != want:
                    raise self.err(ModelStructureError,
                                   f"context {ctx} is keyed by {want} value(s) at line "
                                   f"{first.source.key_pos.line}, so every query that {verb} it "
                                   "names its instance the same way", q.source.key_pos,
                                   found=f"KEYED BY with {n} value(s)",
                                   expected=f"KEYED BY with {want} value(s)")


def _input_types(q: ast.Query, situations: dict[str, ast.SituationDef]) -> tuple[str, ...]:
    if q.kind == "aggregate":
        return (q.source,) if q.source else ()
    if q.kind == "temporal" or q.temporal is not None:
        return query_input_types(q, situations)
    assert q.pattern is not None
    return tuple(dict.fromkeys(t for c in q.pattern.components for t in c.types))


def _type_pos(q: ast.Query, t: str) -> SourcePosition:
    if q.pattern is not None:
        for c in q.pattern.components:
            if t in c.types:
                return c.pos
    return q.target_pos if q.kind == "aggregate" else q.pos


def _fmt_fields(fields: dict[str, str]) -> str:
    return "(" + ", ".join(f"{k} {v}" for k, v in fields.items()) + ")"


def _field_checks(decl: ast.EventDecl, schema_json: str | None) -> dict[str, FieldCheck]:
    """The model's NOT NULL / BETWEEN, completed from the Avro schema."""
    avro = avro_checks(json.loads(schema_json)) if schema_json else {}
    out = {}
    for f in decl.fields:
        not_null, low, high = avro.get(f.name, (False, None, None))
        if f.low is not None:
            low, high = f.low, f.high
        check = FieldCheck(f.not_null or not_null, low, high)
        if check != FieldCheck():
            out[f.name] = check
    return out


def check(model: ast.Model, functions: Mapping[str, Function] | None = None) -> CheckedModel:
    return ModelChecker(model, functions).run()


def _file_model_name(file: str) -> str:
    """A model without a MODEL line is named after its file; text compiled
    without one (file "<model>") is "model": the name prefixes Kafka topics,
    which allow only [A-Za-z0-9._-]."""
    stem = Path(file).stem
    return stem if re.fullmatch(r"[A-Za-z0-9._-]+", stem) else "model"

