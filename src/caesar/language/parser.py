"""Text -> Model AST (lark LALR parser, positions kept on every node)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Generic, TypedDict, TypeVar

from lark import Lark, Token, v_args
from lark.exceptions import (
    LarkError,
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
)
from lark.lark import PostLex
from lark.tree import Meta

from caesar.errors import SourcePosition
from caesar.language import ast
from caesar.language.errors import (
    LanguageError,
    ModelSyntaxError,
    NumberRangeError,
    PatternError,
)
from caesar.language.tables_parse import TableTransforms
from caesar.language.temporal_parse import TemporalTransforms

GRAMMAR = Path(__file__).with_name("grammar.lark")
INT64_MAX = 2**63 - 1

TYPE_NAMES = {"int": "int", "integer": "int", "long": "int", "float": "float", "double": "float",
              "string": "string", "bool": "bool", "boolean": "bool"}
UNITS = {"millisecond": "MILLISECONDS", "second": "SECONDS", "minute": "MINUTES",
         "hour": "HOURS", "day": "DAYS"}
COMPARISON_SPELLING = {"<>": "!=", "≠": "!=", "≤": "<=", "≥": ">="}

# Readable names for the grammar's terminals in "expected ..." messages.
TERMINAL_NAMES = {
    "NAME": "a name", "INT": "an integer", "DECIMAL": "a number", "STRING": "a string",
    "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "SEMICOLON": "';'", "LBRACE": "'{'",
    "RBRACE": "'}'", "DOT": "'.'", "LSQB": "'['", "RSQB": "']'", "COMP_OP": "a comparison",
    "ADD_OP": "'+' or '-'", "MUL_OP": "'*', '/' or '%'", "MINUS": "'-'", "PLUS": "'+'",
    "STAR": "'*'", "KLEENE": "'+'", "UNIT": "a time unit (SECONDS, MINUTES, ...)",
    "TYPE_NAME": "a type (INT, FLOAT, STRING, BOOL)", "ACTION": "INITIATE, SWITCH or TERMINATE",
    "DEFAULT": "DEFAULT", "$END": "end of model", "AT": "'@'",
    "ALT": "';' and another relation", "EDGE": "START or END",
}


# The text being parsed, for _WholeWords (lark hands it the tokens only).
_SOURCE: ContextVar[str] = ContextVar("caesar_model_source", default="")
# Terminals whose tokens are never keywords: a keyword is any other word token.
_NOT_KEYWORDS = frozenset({"NAME", "INT", "DECIMAL", "STRING", "COMMENT"})


class _GluedKeyword(Exception):
    """A keyword matched as the start of a longer name (see _WholeWords)."""

    def __init__(self, token: Token) -> None:
        super().__init__(token)
        self.token = token


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


class _WholeWords(PostLex):
    """Where a name is not expected, lark's contextual lexer matches a
    keyword as the start of a longer word ("model_per_segment" as MODEL
    _per_segment, "EVENTA(" as EVENT A): refuse a keyword that a word
    character follows. (A post-lexer, not lexer callbacks: those are keyed
    by terminal name, which only a first build of the ~2 s grammar gives.)"""

    always_accept: tuple[str, ...] = ()

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        text = _SOURCE.get()
        for token in stream:
            end = token.end_pos
            if token.type not in _NOT_KEYWORDS and str(token.value)[-1:].isalpha() and \
                    end is not None and end < len(text) and _word_char(text[end]):
                raise _GluedKeyword(token)
            yield token


@lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark(GRAMMAR.read_text(encoding="utf-8"), parser="lalr", propagate_positions=True,
                maybe_placeholders=False, postlex=_WholeWords())


def _describe_terminal(name: str) -> str:
    if name in TERMINAL_NAMES:
        return TERMINAL_NAMES[name]
    # Anonymous keyword terminals are named after their text, e.g. "WHERE" or "__ANON_3".
    pattern = _lark().get_terminal(name).pattern if name in _terminal_names() else None
    if pattern is not None and pattern.type == "str":
        return pattern.value.upper()
    return name


@lru_cache(maxsize=1)
def _terminal_names() -> frozenset[str]:
    return frozenset(t.name for t in _lark().terminals)


def _expected(names: set[str] | frozenset[str]) -> str:
    described = sorted({_describe_terminal(n) for n in names})
    if len(described) > 8:
        described = described[:8] + ["..."]
    return ", ".join(described)


def parse(text: str, file: str = "<model>") -> ast.Model:
    """Parse model text; raise ModelSyntaxError (a ModelError) on bad input."""
    if not isinstance(text, str):
        raise ModelSyntaxError("a model must be text", SourcePosition(file, 1, 1))
    source = _SOURCE.set(text)
    try:
        tree = _lark().parse(text)
    except _GluedKeyword as exc:
        raise _glued(exc.token, text, file) from None
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, file) from None
    except RecursionError:
        raise _too_deep(file) from None
    except LarkError as exc:  # defensive: any other lark failure is still a model error
        raise ModelSyntaxError(f"cannot parse model: {exc}", SourcePosition(file, 1, 1)) from None
    finally:
        _SOURCE.reset(source)
    try:
        return _ToAst(file, text).transform(tree)
    except LanguageError:
        raise
    except RecursionError:
        raise _too_deep(file) from None
    except LarkError as exc:
        inner = getattr(exc, "orig_exc", None)
        if isinstance(inner, LanguageError):
            raise inner from None
        raise ModelSyntaxError(f"cannot parse model: {exc}", SourcePosition(file, 1, 1)) from None


def _syntax_error(exc: UnexpectedInput, text: str, file: str) -> LanguageError:
    line = getattr(exc, "line", None) or 1
    column = getattr(exc, "column", None) or 1
    if isinstance(exc, UnexpectedEOF):
        lines = text.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
    pos = SourcePosition(file, max(line, 1), max(column, 1))
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        if token.type == "$END":
            lines = text.splitlines() or [""]
            pos = SourcePosition(file, len(lines), len(lines[-1]) + 1)
        found = "end of model" if token.type == "$END" else repr(str(token.value))
        return ModelSyntaxError("unexpected input", pos, text, found=found,
                                expected=_expected(exc.expected))
    if isinstance(exc, UnexpectedCharacters):
        at = exc.pos_in_stream
        char = text[at] if at is not None and at < len(text) else "end of model"
        return ModelSyntaxError("unexpected character", pos, text, found=repr(char),
                                expected=_expected(exc.allowed or set()))
    if isinstance(exc, UnexpectedEOF):
        return ModelSyntaxError("model ends too early", pos, text, found="end of model",
                                expected=_expected(set(exc.expected)))
    return ModelSyntaxError(f"cannot parse model: {exc}", pos, text)


def _glued(token: Token, text: str, file: str) -> LanguageError:
    start = token.start_pos or 0
    end = start
    while end < len(text) and _word_char(text[end]):
        end += 1
    return ModelSyntaxError(
        "unexpected input", SourcePosition(file, token.line or 1, token.column or 1), text,
        found=repr(text[start:end]),
        expected=f"{str(token.value).upper()} followed by a space or a symbol")


def _too_deep(file: str) -> LanguageError:
    return ModelSyntaxError("the model nests too deeply (parentheses, SEQ or NOT)",
                            SourcePosition(file, 1, 1), expected="less nesting")


T = TypeVar("T")

# What lark hands a rule: the already transformed children, tokens and AST
# nodes mixed as the grammar rule has them.
Children = Sequence[Any]


class _Tagged(Generic[T]):
    """A clause result tagged with its clause name (used while assembling queries)."""

    def __init__(self, tag: str, value: T, pos: SourcePosition) -> None:
        self.tag = tag
        self.value = value
        self.pos = pos


class _CommonClauses(TypedDict, total=False):
    """The clauses every query kind may have, as `ast.Query` keywords."""

    where: ast.ExprNode
    within: ast.Duration
    strategy: str
    strategy_pos: SourcePosition
    contexts: tuple[str, ...]
    contexts_pos: SourcePosition
    skip: ast.SkipClause
    timeout: ast.TimeoutClause
    output_rate: ast.OutputRate


# Model-level declarations that may each appear once, with their spelling.
HEADER_DECLARATIONS = {"model": "MODEL", "time_unit": "TIME UNIT", "strategy": "STRATEGY",
                       "partition": "PARTITION BY", "context_key": "CONTEXTS PER"}


@v_args(meta=True)
class _ToAst(TemporalTransforms, TableTransforms):
    _tagged = _Tagged

    def __init__(self, file: str, text: str) -> None:
        super().__init__()
        self.file = file
        self.text = text

    def _pos(self, meta: Meta) -> SourcePosition:
        if getattr(meta, "empty", True):
            return SourcePosition(self.file, 1, 1)
        return SourcePosition(self.file, meta.line, meta.column)

    def _tpos(self, token: Token) -> SourcePosition:
        return SourcePosition(self.file, token.line or 1, token.column or 1)

    # ---- model ----
    def start(self, meta: Meta, items: Children) -> ast.Model:
        header = self._header([i for i in items if isinstance(i, _Tagged)])
        name, time_unit = header.get("model"), header.get("time_unit")
        strategy, partition = header.get("strategy"), header.get("partition")
        context_key = header.get("context_key")
        return ast.Model(
            name=name.value if name else None,
            time_unit=time_unit.value if time_unit else None,
            partition_by=partition.value if partition else (),
            strategy=strategy.value if strategy else None,
            events=tuple(i for i in items if isinstance(i, ast.EventDecl)),
            contexts=tuple(i for i in items if isinstance(i, ast.ContextBlock)),
            queries=tuple(i for i in items if isinstance(i, ast.Query)),
            situations=tuple(i for i in items if isinstance(i, ast.SituationDef)),
            tables=tuple(i for i in items if isinstance(i, ast.TableDecl)),
            rules=tuple(i for i in items if isinstance(i, ast.RuleDecl)),
            file=self.file, source=self.text, pos=self._pos(meta),
            strategy_pos=strategy.pos if strategy else ast.NOWHERE,
            partition_pos=partition.pos if partition else ast.NOWHERE,
            context_key=context_key.value if context_key else (),
            context_key_pos=context_key.pos if context_key else ast.NOWHERE)

    def _header(self, declarations: list[_Tagged[Any]]) -> dict[str, _Tagged[Any]]:
        """The model-level declarations by tag; each may be given once."""
        seen: dict[str, _Tagged[Any]] = {}
        for item in declarations:
            if item.tag not in HEADER_DECLARATIONS:
                continue
            if item.tag in seen:
                raise ModelSyntaxError(f"{HEADER_DECLARATIONS[item.tag]} is declared twice",
                                       item.pos, self.text)
            seen[item.tag] = item
        return seen

    def model_decl(self, meta: Meta, children: Children) -> _Tagged[str]:
        return _Tagged("model", str(children[0]), self._pos(meta))

    def time_unit_decl(self, meta: Meta, children: Children) -> _Tagged[str]:
        return _Tagged("time_unit", _unit(children[0]), self._pos(meta))

    def partition_decl(self, meta: Meta, children: Children) -> _Tagged[tuple[str, ...]]:
        return _Tagged("partition", children[0], self._pos(meta))

    def context_key_decl(self, meta: Meta, children: Children) -> _Tagged[tuple[str, ...]]:
        return _Tagged("context_key", children[0], self._pos(meta))

    def strategy_decl(self, meta: Meta, children: Children) -> _Tagged[str]:
        name, pos = children[0]
        return _Tagged("strategy", name, pos)

    def strategy_name(self, meta: Meta, children: Children) -> tuple[str, SourcePosition]:
        """The name as written; `skip-till-any-match` keeps its hyphens so the
        checker can say how to spell it."""
        names = [str(c) for c in children if isinstance(c, Token) and c.type == "NAME"]
        return "-".join(names), self._tpos(children[0])

    def name_list(self, meta: Meta, children: Children) -> tuple[str, ...]:
        return tuple(str(c) for c in children)

    def event_decl(self, meta: Meta, children: Children) -> ast.EventDecl:
        name = str(children[0])
        fields = [c for c in children[1:] if isinstance(c, ast.FieldDecl)]
        opts = {}
        for c in children[1:]:
            if isinstance(c, _Tagged):
                if c.tag in opts:
                    raise ModelSyntaxError(f"{c.tag.upper().replace('_', ' ')} is given twice "
                                           f"for event {name}",
                                           c.pos, self.text)
                opts[c.tag] = c.value
        return ast.EventDecl(name=name, fields=tuple(fields), timestamp=opts.get("timestamp"),
                             topic=opts.get("topic"), schema=opts.get("schema"),
                             output_topic=opts.get("output_topic"),
                             pos=self._tpos(children[0]))

    def field_decl(self, meta: Meta, children: Children) -> ast.FieldDecl:
        checks: list[_Tagged[Any]] = [c for c in children[2:] if isinstance(c, _Tagged)]
        not_null = any(c.tag == "not_null" for c in checks)
        ranges = [c for c in checks if c.tag == "between"]
        if len(ranges) > 1:
            raise ModelSyntaxError(f"BETWEEN is given twice for {children[0]}", ranges[1].pos,
                                   self.text)
        low = high = None
        if ranges:
            low, high = ranges[0].value
            if low > high:
                raise ModelSyntaxError(f"BETWEEN {low} AND {high}: the low end is above the "
                                       "high end", ranges[0].pos, self.text)
        return ast.FieldDecl(str(children[0]), TYPE_NAMES[str(children[1]).lower()],
                             self._tpos(children[0]), not_null, low, high)

    def not_null(self, meta: Meta, children: Children) -> _Tagged[bool]:
        return _Tagged("not_null", True, self._pos(meta))

    def field_between(self, meta: Meta, children: Children) -> _Tagged[tuple[float, float]]:
        return _Tagged("between", (children[0], children[1]), self._pos(meta))

    def number(self, meta: Meta, children: Children) -> int | float:
        token: Token = children[-1]
        sign = -1 if len(children) > 1 else 1
        if token.type == "INT":
            return sign * self._int(token)
        return sign * self._float(token)

    def _int(self, token: Token) -> int:
        text = str(token)
        if len(text) > 19 or int(text) > INT64_MAX:
            raise NumberRangeError(f"integer {_abbrev(text)} does not fit in 64 bits",
                                   self._tpos(token), self.text,
                                   expected=f"at most {INT64_MAX}")
        return int(text)

    def _float(self, token: Token) -> float:
        value = float(str(token))
        if not math.isfinite(value):
            raise NumberRangeError(f"number {_abbrev(str(token))} is too large for a "
                                   "64-bit float", self._tpos(token), self.text)
        return value

    def named_query(self, meta: Meta, children: Children) -> ast.Query:
        label, name, query = children[0], children[1], children[2]
        if str(label).lower() != "name":
            raise ModelSyntaxError(f"unknown annotation @{label}", self._tpos(label), self.text,
                                   expected='@name("...")')
        text = _string(name)
        if not text.strip():
            raise ModelSyntaxError("a query name cannot be empty", self._tpos(name), self.text)
        return replace(query, name=text, name_pos=self._tpos(name))

    def timestamp_opt(self, meta: Meta, children: Children) -> _Tagged[str]:
        return _Tagged("timestamp", str(children[0]), self._pos(meta))

    def topic_opt(self, meta: Meta, children: Children) -> _Tagged[str]:
        return _Tagged("topic", _string(children[0]), self._pos(meta))

    def output_topic_opt(self, meta: Meta, children: Children) -> _Tagged[str]:
        return _Tagged("output_topic", _string(children[0]), self._pos(meta))

    def schema_opt(self, meta: Meta, children: Children) -> _Tagged[str]:
        return _Tagged("schema", _string(children[0]), self._pos(meta))

    def context_block(self, meta: Meta, children: Children) -> ast.ContextBlock:
        default = isinstance(children[0], Token) and children[0].type == "DEFAULT"
        rest = children[1:] if default else children
        name_tok = rest[0]
        keyed = any(isinstance(c, Token) and c.type == "KEYED" for c in rest[1:])
        return ast.ContextBlock(name=str(name_tok), default=default,
                                queries=tuple(q for q in rest[1:] if isinstance(q, ast.Query)),
                                pos=self._tpos(name_tok), keyed=keyed)

    # ---- queries ----
    def _clauses(self, children: Children) -> dict[str, _Tagged[Any]]:
        out: dict[str, _Tagged[Any]] = {}
        for c in children:
            if isinstance(c, _Tagged):
                out[c.tag] = c
        return out

    def window_query(self, meta: Meta, children: Children) -> ast.Query:
        action, target = children[0], children[1]
        cl = self._clauses(children[2:])
        key = cl.get("key")
        return ast.Query(kind="window", action=str(action).upper(), target=str(target),
                         pattern=cl["pattern"].value, **self._common(cl),
                         instance_key=key.value if key else (),
                         key_pos=key.pos if key else ast.NOWHERE,
                         pos=self._pos(meta), target_pos=self._tpos(target))

    def _common(self, cl: dict[str, _Tagged[Any]]) -> _CommonClauses:
        out: _CommonClauses = {}
        if "where" in cl:
            out["where"] = cl["where"].value
        if "within" in cl:
            out["within"] = cl["within"].value
        if "strategy" in cl:
            out["strategy"] = cl["strategy"].value
            out["strategy_pos"] = cl["strategy"].pos
        if "context" in cl:
            out["contexts"] = cl["context"].value
            out["contexts_pos"] = cl["context"].pos
        if "skip" in cl:
            out["skip"] = cl["skip"].value
        if "timeout" in cl:
            out["timeout"] = cl["timeout"].value
        if "output" in cl:
            out["output_rate"] = cl["output"].value
        return out

    def retrieval_query(self, meta: Meta, children: Children) -> ast.Query:
        name = children[0]
        items = tuple(c for c in children[1:] if isinstance(c, ast.DeriveItem))
        cl = self._clauses(children[1:])
        return ast.Query(kind="retrieval", derive_type=str(name), items=items,
                         pattern=cl["pattern"].value, **self._common(cl), pos=self._pos(meta),
                         target_pos=self._tpos(name))

    def aggregate_query(self, meta: Meta, children: Children) -> ast.Query:
        name = children[0]
        items = tuple(c for c in children[1:] if isinstance(c, ast.DeriveItem))
        tokens = [c for c in children[1:] if isinstance(c, Token)]
        source = tokens[0]
        source_var = str(tokens[1]) if len(tokens) > 1 else None
        cl = self._clauses(children[1:])
        common = self._common(cl)
        return ast.Query(kind="aggregate", derive_type=str(name), items=items, source=str(source),
                         source_var=source_var, window=cl["window"].value,
                         group_by=cl["group"].value if "group" in cl else (),
                         having=cl["having"].value if "having" in cl else None,
                         **common, pos=self._pos(meta), target_pos=self._tpos(source))

    def derive_item(self, meta: Meta, children: Children) -> ast.DeriveItem:
        alias = str(children[1]) if len(children) > 1 else None
        return ast.DeriveItem(children[0], alias, self._pos(meta))

    def count_window(self, meta: Meta, children: Children) -> _Tagged[ast.Window]:
        size = ast.Duration(int(children[0]), None, self._tpos(children[0]))
        slide = ast.Duration(int(children[1]), None, self._tpos(children[1])) \
            if len(children) > 1 else None
        return _Tagged("window", ast.Window("COUNT", size, slide, self._pos(meta)),
                       self._pos(meta))

    def session_window(self, meta: Meta, children: Children) -> _Tagged[ast.Window]:
        return _Tagged("window", ast.Window("SESSION", children[0], None, self._pos(meta)),
                       self._pos(meta))

    def tumbling(self, meta: Meta, children: Children) -> _Tagged[ast.Window]:
        return _Tagged("window", ast.Window("TUMBLING", children[0], None, self._pos(meta)),
                       self._pos(meta))

    def sliding(self, meta: Meta, children: Children) -> _Tagged[ast.Window]:
        return _Tagged("window", ast.Window("SLIDING", children[0], children[1], self._pos(meta)),
                       self._pos(meta))

    def key_clause(self, meta: Meta, children: Children) -> _Tagged[tuple[ast.ExprNode, ...]]:
        return _Tagged("key", tuple(children), self._pos(meta))

    def group_clause(self, meta: Meta, children: Children) -> _Tagged[tuple[str, ...]]:
        return _Tagged("group", children[0], self._pos(meta))

    def having_clause(self, meta: Meta, children: Children) -> _Tagged[ast.ExprNode]:
        return _Tagged("having", children[0], self._pos(meta))

    def pattern_clause(self, meta: Meta, children: Children) -> _Tagged[ast.Pattern]:
        return _Tagged("pattern", as_pattern(children[0]), self._pos(meta))

    def where_clause(self, meta: Meta, children: Children) -> _Tagged[ast.ExprNode]:
        return _Tagged("where", children[0], self._pos(meta))

    def within_clause(self, meta: Meta, children: Children) -> _Tagged[ast.Duration]:
        return _Tagged("within", children[0], self._pos(meta))

    def query_strategy(self, meta: Meta, children: Children) -> _Tagged[str]:
        name, pos = children[0]
        return _Tagged("strategy", name, pos)

    # ---- issue 16 clauses: after-match skip, timeouts, output rate ----
    def no_skip(self, meta: Meta, children: Children) -> _Tagged[ast.SkipClause]:
        return _Tagged("skip", ast.SkipClause("no_skip", None, self._pos(meta)), self._pos(meta))

    def skip_to_next(self, meta: Meta, children: Children) -> _Tagged[ast.SkipClause]:
        return _Tagged("skip", ast.SkipClause("to_next", None, self._pos(meta)), self._pos(meta))

    def skip_past_last(self, meta: Meta, children: Children) -> _Tagged[ast.SkipClause]:
        return _Tagged("skip", ast.SkipClause("past_last", None, self._pos(meta)),
                       self._pos(meta))

    def skip_to_first(self, meta: Meta, children: Children) -> _Tagged[ast.SkipClause]:
        return _Tagged("skip", ast.SkipClause("to_first", str(children[-1]), self._pos(meta)),
                       self._pos(meta))

    def skip_to_last(self, meta: Meta, children: Children) -> _Tagged[ast.SkipClause]:
        return _Tagged("skip", ast.SkipClause("to_last", str(children[-1]), self._pos(meta)),
                       self._pos(meta))

    def timeout_clause(self, meta: Meta, children: Children) -> _Tagged[ast.TimeoutClause]:
        items = tuple(c for c in children[1:] if isinstance(c, ast.DeriveItem))
        return _Tagged("timeout", ast.TimeoutClause(str(children[0]), items, self._pos(meta)),
                       self._pos(meta))

    def output_clause(self, meta: Meta, children: Children) -> _Tagged[ast.OutputRate]:
        kind = children[0] if isinstance(children[0], str) and not isinstance(children[0], Token) \
            else "ALL"
        return _Tagged("output", ast.OutputRate(kind, children[-1], self._pos(meta)),
                       self._pos(meta))

    def output_all(self, meta: Meta, children: Children) -> str:
        return "ALL"

    def output_first(self, meta: Meta, children: Children) -> str:
        return "FIRST"

    def output_last(self, meta: Meta, children: Children) -> str:
        return "LAST"

    def context_clause(self, meta: Meta, children: Children) -> _Tagged[tuple[str, ...]]:
        return _Tagged("context", children[0], self._pos(meta))

    def duration(self, meta: Meta, children: Children) -> ast.Duration:
        amount = self._int(children[0])
        unit = _unit(children[1]) if len(children) > 1 else None
        return ast.Duration(amount, unit, self._pos(meta))

    # ---- patterns ----
    def seq(self, meta: Meta, children: Children) -> ast.PatternGroup:
        items: list[ast.Component | ast.PatternGroup] = []
        for c in children:
            if isinstance(c, ast.PatternGroup) and c.op == "SEQ":
                items.extend(c.items)  # SEQ is associative: nested SEQs flatten
            else:
                items.append(c)
        return ast.PatternGroup("SEQ", tuple(items), self._pos(meta))

    def and_patt(self, meta: Meta, children: Children) -> ast.PatternGroup:
        return ast.PatternGroup("AND", tuple(children), self._pos(meta))

    def or_patt(self, meta: Meta, children: Children) -> ast.PatternGroup:
        return ast.PatternGroup("OR", tuple(children), self._pos(meta))

    def negated(self, meta: Meta, children: Children) -> ast.Component:
        node = children[0]
        if isinstance(node, ast.PatternGroup):
            raise PatternError(
                f"NOT applies to one event type, not to {node.op}(...)", self._pos(meta),
                self.text, found=f"NOT {node.op}(...)",
                expected="NOT T v or NOT ANY(T1, T2) v (for an absent sequence, derive it "
                "with its own query and negate the derived type)")
        comp: ast.Component = node
        return replace(comp, negated=True, pos=self._pos(meta))

    def component(self, meta: Meta, children: Children) -> ast.Component:
        types_node = children[0]
        any_of = isinstance(types_node, tuple) and types_node[0] == "any"
        types = types_node[1]
        quant: tuple[int, int | None, bool] | None = None
        var = None
        filt = None
        for c in children[1:]:
            if isinstance(c, _Quantifier):
                quant = (c.low, c.high, c.greedy)
            elif isinstance(c, Token):
                var = str(c)
            elif isinstance(c, _Tagged):
                filt = c.value
        if quant is None:
            return ast.Component(types, var, False, False, any_of, filt, self._pos(meta))
        return ast.Component(types, var, False, True, any_of, filt, self._pos(meta),
                             min_count=quant[0], max_count=quant[1], greedy=quant[2])

    def _greedy(self, children: Children) -> bool:
        return any(isinstance(c, Token) and c.type == "GREEDY" for c in children)

    def q_plus(self, meta: Meta, children: Children) -> _Quantifier:
        return _Quantifier(1, None, self._greedy(children))

    def q_star(self, meta: Meta, children: Children) -> _Quantifier:
        return _Quantifier(0, None, self._greedy(children))

    def q_opt(self, meta: Meta, children: Children) -> _Quantifier:
        return _Quantifier(0, 1, self._greedy(children))

    def q_exact(self, meta: Meta, children: Children) -> _Quantifier:
        n = int(children[0])
        return _Quantifier(n, n, self._greedy(children))

    def q_range(self, meta: Meta, children: Children) -> _Quantifier:
        ints = [int(c) for c in children if isinstance(c, Token) and c.type == "INT"]
        return _Quantifier(ints[0], ints[1] if len(ints) > 1 else None, self._greedy(children))

    def filter_clause(self, meta: Meta, children: Children) -> _Tagged[ast.ExprNode]:
        return _Tagged("filter", children[0], self._pos(meta))

    def single_type(self, meta: Meta, children: Children) -> tuple[str, tuple[str, ...]]:
        return ("single", (str(children[0]),))

    def any_type(self, meta: Meta, children: Children) -> tuple[str, tuple[str, ...]]:
        return ("any", tuple(str(c) for c in children))

    # ---- expressions ----
    def or_expr(self, meta: Meta, children: Children) -> ast.ExprNode:
        return _fold("OR", children, self._pos(meta))

    def and_expr(self, meta: Meta, children: Children) -> ast.ExprNode:
        return _fold("AND", children, self._pos(meta))

    def not_op(self, meta: Meta, children: Children) -> ast.UnaryExpr:
        return ast.UnaryExpr("NOT", children[0], self._pos(meta))

    def comparison(self, meta: Meta, children: Children) -> ast.BinaryExpr:
        op = str(children[1])
        return ast.BinaryExpr(COMPARISON_SPELLING.get(op, op), children[0], children[2],
                              self._tpos(children[1]))

    def sum(self, meta: Meta, children: Children) -> ast.ExprNode:
        return self._chain(children)

    def product(self, meta: Meta, children: Children) -> ast.ExprNode:
        return self._chain(children)

    def _chain(self, children: Children) -> ast.ExprNode:
        left = children[0]
        for i in range(1, len(children), 2):
            op = children[i]
            left = ast.BinaryExpr(str(op), left, children[i + 1], self._tpos(op))
        return left

    def neg(self, meta: Meta, children: Children) -> ast.ExprNode:
        operand = children[1]
        if isinstance(operand, ast.Literal) and isinstance(operand.value, int | float) \
                and not isinstance(operand.value, bool):
            return ast.Literal(-operand.value, self._pos(meta))
        return ast.UnaryExpr("-", operand, self._pos(meta))

    def int_lit(self, meta: Meta, children: Children) -> ast.Literal:
        return ast.Literal(self._int(children[0]), self._pos(meta))

    def float_lit(self, meta: Meta, children: Children) -> ast.Literal:
        return ast.Literal(self._float(children[0]), self._pos(meta))

    def str_lit(self, meta: Meta, children: Children) -> ast.Literal:
        return ast.Literal(_string(children[0]), self._pos(meta))

    def true_lit(self, meta: Meta, children: Children) -> ast.Literal:
        return ast.Literal(True, self._pos(meta))

    def false_lit(self, meta: Meta, children: Children) -> ast.Literal:
        return ast.Literal(False, self._pos(meta))

    def qualified(self, meta: Meta, children: Children) -> ast.Ref:
        return ast.Ref(str(children[0]), str(children[1]), self._pos(meta))

    def bare(self, meta: Meta, children: Children) -> ast.Ref:
        return ast.Ref(None, str(children[0]), self._pos(meta))

    def call(self, meta: Meta, children: Children) -> ast.CallExpr:
        return ast.CallExpr(str(children[0]).lower(), tuple(children[1:]), pos=self._pos(meta))

    def distinct_call(self, meta: Meta, children: Children) -> ast.CallExpr:
        return ast.CallExpr(str(children[0]).lower(), (children[1],), distinct=True,
                            pos=self._pos(meta))

    def star_call(self, meta: Meta, children: Children) -> ast.CallExpr:
        return ast.CallExpr(str(children[0]).lower(), (), star=True, pos=self._pos(meta))

    def equivalence(self, meta: Meta, children: Children) -> ast.Equivalence:
        return ast.Equivalence(tuple(str(c) for c in children), self._pos(meta))

    def equivalence_positive(self, meta: Meta, children: Children) -> ast.Equivalence:
        return ast.Equivalence(tuple(str(c) for c in children), self._pos(meta),
                               positive_only=True)


def _fold(op: str, children: Children, pos: SourcePosition) -> ast.ExprNode:
    left = children[0]
    for right in children[1:]:
        left = ast.BinaryExpr(op, left, right, pos)
    return left


def _abbrev(text: str) -> str:
    return text if len(text) <= 30 else f"{text[:12]}...{text[-6:]} ({len(text)} digits)"


def _unit(token: Token) -> str:
    word = str(token).lower().rstrip("s")
    return UNITS[word]


def _string(token: Token) -> str:
    return str(token)[1:-1]


@dataclass(frozen=True)
class _Quantifier:
    low: int
    high: int | None
    greedy: bool


def _components(node: ast.Component | ast.PatternGroup) -> list[ast.Component]:
    if isinstance(node, ast.Component):
        return [node]
    return [c for item in node.items for c in _components(item)]


def _has_and_or(node: ast.Component | ast.PatternGroup) -> bool:
    return isinstance(node, ast.PatternGroup) and (
        node.op != "SEQ" or any(_has_and_or(i) for i in node.items))


def as_pattern(node: ast.Pattern | ast.Component | ast.PatternGroup) -> ast.Pattern:
    """PATTERN with a single component is a one-component pattern; a plain
    SEQ is flat; with AND/OR the structure is kept in `tree`."""
    if isinstance(node, ast.Pattern):
        return node
    if isinstance(node, ast.Component):
        return ast.Pattern((node,), False, node.pos)
    comps = tuple(_components(node))
    if not _has_and_or(node):
        return ast.Pattern(comps, True, node.pos)
    return ast.Pattern(comps, node.op == "SEQ", node.pos, tree=node)
