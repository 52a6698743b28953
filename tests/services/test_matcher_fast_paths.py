"""The matcher's fast paths around the engine against the code they replace
(e150f03), the reference: results placed in their context partition through
a per-call memo instead of `_home` per result, derived results made columns
by one transpose instead of one lookup per row and attribute, results that
feed later stages passed as the engine's match columns (process_columns)
instead of one DerivedEvent and dict each, and the alerts of a step built
from the placed results. Same alerts (fields, partition, key, times, topic),
same dead letters, same columns, for any input, context-aware or not."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.events.batch import EventBatch, TypeColumns, _attribute_lists
from caesar.language import compile_model
from caesar.plans.engine import DerivedEvent
from caesar.plans.pattern import PatternPlan
from caesar.plans.serialize import stage_identity
from caesar.services.common.messages import Alert, InputRecord, partition_id
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.processor import MatcherProcessor
from caesar.services.matcher.stage_graph import StageGraph, StageOutput

# ---------------------------------------------------------------- reference


class ReferenceGraph(StageGraph):
    """The stage graph's result routing as it was before the fast paths."""

    def _route_plain(self, derived, feed):  # type: ignore[no-untyped-def]
        outputs: list[StageOutput] = []
        clock = self._clock
        for ev in derived:
            ts, home = max(ev.end_ts, clock), self._home(ev.partition, ev.fields)
            if self._muted and ev.plan_id in self.muted_at(home, ts):
                continue
            if ev.event_type in self._consumed:
                feed.append((ev.event_type, ev.fields, ts, home))
            if self._emit is None or ev.plan_id in self._emit:
                outputs.append(self._derived(ev, clamp=clock))
        return outputs

    def _columns_of(self, rows):  # type: ignore[no-untyped-def]
        by_type: dict[str, list[int]] = defaultdict(list)
        for i, (t, *_) in enumerate(rows):
            if t in self._consumed:
                by_type[t].append(i)
        out = {}
        for t, idx in by_type.items():
            schema = self._schemas.get(t, {})
            lists = {a: [rows[i][1].get(a) for i in idx] for a in schema}
            out[t] = TypeColumns.from_lists(
                lists, schema, self.strings,
                ts=np.fromiter((rows[i][2] for i in idx), np.int64, len(idx)),
                seq=np.asarray(idx, dtype=np.int64),
                partition=np.fromiter((rows[i][3] for i in idx), np.int64, len(idx)))
        return EventBatch(out, self.strings)


class ReferenceMatcher(MatcherProcessor):
    def _alerts(self, outputs):  # type: ignore[no-untyped-def]
        alerts = []
        for o in outputs:
            topic = o.stage.output_topic
            timeout = o.stage.plan.timeout if isinstance(o.stage.plan, PatternPlan) else None
            if timeout is not None and o.record["type"] == timeout.event_type:
                topic = o.stage.timeout_topic
            if topic is None:
                continue
            if o.stage.plan.plan_id in self.graph.muted_at(o.record["_p"], o.record["_ts"]):
                continue
            fields = {k: v for k, v in o.record.items() if k != "type" and not k.startswith("_")}
            alerts.append(Alert(plan_id=stage_identity(o.stage), event_type=o.record["type"],
                                partition=o.record["_p"], key=o.record["_key"],
                                start_ts=o.start_ts, end_ts=o.end_ts, fields=fields,
                                topic=topic, ingest_ms=self.ingest.get(o.record["_p"], 0)))
        return alerts


def reference_pipeline(model: str, context_aware: bool = True) -> EmbeddedPipeline:
    pipe = EmbeddedPipeline(compile_model(model, context_aware=context_aware))
    pipe.matcher.__class__ = ReferenceMatcher
    for graph in (pipe.matcher.graph, pipe.deriver.graph):
        graph.__class__ = ReferenceGraph
        graph._columnar_route = False  # one DerivedEvent per result, as before
    return pipe


# ------------------------------------------------------- attribute lists

value = st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=2),
                  st.floats(allow_nan=False, width=32), st.booleans())
names = st.lists(st.sampled_from("abcde"), unique=True, max_size=5)


@settings(max_examples=300, deadline=None)
@given(names, st.lists(st.dictionaries(st.sampled_from("abcdef"), value, max_size=6),
                       max_size=8), st.booleans())
def test_attribute_lists_equal_lookups_one_by_one(attrs: list[str],
                                                  records: list[dict[str, Any]],
                                                  complete: bool) -> None:
    if complete:  # the usual case: every record has every attribute
        records = [{a: r.get(a) for a in attrs} | r for r in records]
    assert _attribute_lists(records, attrs) == {a: [r.get(a) for r in records] for a in attrs}


# -------------------------------------------------------- home partition


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.booleans(),
                          st.one_of(st.integers(0, 4), st.none(), st.just("x"))),
                min_size=1, max_size=30))
def test_home_memo_places_results_as_home(rows: list[tuple[int, int, bool, Any]]) -> None:
    graph = StageGraph([], {}, context_key=("seg",), stream_attrs=1)
    assert graph.partitions is not None
    keys = {partition_id(f"{road}|{seg}"): f"{road}|{seg}" for road in range(2)
            for seg in range(3)}
    graph.partitions.learn(keys)
    pids = sorted(keys) + [partition_id("0"), partition_id("1"), 12345]
    home = graph._home_memo()
    for p, other, has_key, seg in rows:
        fields: dict[str, Any] = {"vid": other}
        if has_key:
            fields["seg"] = seg
        partition = pids[(p * 3 + other) % len(pids)]
        assert home(partition, fields) == graph._home(partition, fields)


# ------------------------------------------------------ derived columns


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["A", "B", "C"]), st.integers(0, 3),
                          st.booleans(), st.integers(0, 100), st.integers(0, 5)),
                max_size=25))
def test_columns_of_equal_reference(rows: list[tuple[str, int, bool, int, int]]) -> None:
    schemas = {"A": {"x": "int", "s": "string"}, "B": {"x": "int"}}
    graph = StageGraph([], schemas)
    ref = StageGraph([], schemas, strings=graph.strings)
    ref.__class__ = ReferenceGraph
    graph._consumed = ref._consumed = frozenset({"A", "B"})
    given_rows = [(t, {"x": x, **({"s": str(x)} if with_s else {})}, ts, p)
                  for t, x, with_s, ts, p in rows]
    fast, slow = graph._columns_of(given_rows), ref._columns_of(given_rows)
    assert fast.by_type.keys() == slow.by_type.keys()
    for t, c in fast.by_type.items():
        r = slow.by_type[t]
        for a in ("ts", "seq", "partition"):
            assert np.array_equal(getattr(c, a), getattr(r, a)), a
        assert c.columns.keys() == r.columns.keys()
        for a in c.columns:
            assert np.array_equal(c.columns[a], r.columns[a]) and c.columns[a].dtype == \
                r.columns[a].dtype
        assert c.nulls.keys() == r.nulls.keys()
        assert all(np.array_equal(c.nulls[a], r.nulls[a]) for a in c.nulls)


# --------------------------------------------- whole pipeline, CONTEXTS PER

MODEL = """MODEL m
TIME UNIT SECONDS
PARTITION BY road
CONTEXTS PER seg
EVENT R(ts INT, vid INT, road INT, seg INT, spd INT, tag STRING) FROM TOPIC "r"
EVENT Slow(vid INT, seg INT, spd INT) TO TOPIC "slow"
EVENT Entered(vid INT, seg INT, spd INT, tag STRING, fast BOOL, half FLOAT)
EVENT Note(vid INT, seg INT, spd INT, tag STRING, half FLOAT) TO TOPIC "note"
EVENT Moved(vid INT, seg INT, from_seg INT) TO TOPIC "moved"
EVENT Avg(seg INT, lav FLOAT)
EVENT Warn(vid INT, seg INT) TO TOPIC "warn"
EVENT Steps(vid INT, seg INT, n INT)
EVENT Climb(vid INT, seg INT, n INT) TO TOPIC "climb"
DERIVE Avg(seg, avg(spd) AS lav) FROM R GROUP BY seg WINDOW TUMBLING 10 SECONDS
DERIVE Entered(b.vid, b.seg, b.spd, b.tag, b.spd > 60 AS fast, b.spd / 2.0 AS half)
  PATTERN SEQ(NOT R a, R b) WHERE [vid] AND a.seg = b.seg WITHIN 5
DERIVE Moved(b.vid, b.seg, a.seg AS from_seg) PATTERN SEQ(R a, R b)
  WHERE [vid] AND a.seg != b.seg WITHIN 5
-- held matches (after-match skip) released with older timestamps
DERIVE Steps(a.vid, a.seg, count(b) AS n) PATTERN SEQ(R a, R+ b, R c)
  WHERE [vid] AND c.spd > a.spd WITHIN 5
  STRATEGY skip_till_next_match AFTER MATCH SKIP PAST LAST EVENT
DERIVE Climb(s.vid, s.seg, s.n) PATTERN Steps s
DEFAULT CONTEXT clear {
  SWITCH CONTEXT jam PATTERN Avg a WHERE a.lav < 30
  DERIVE Note(e.vid, e.seg, e.spd, e.tag, e.half) PATTERN Entered e WHERE e.spd > 50 OR e.fast
}
CONTEXT jam {
  DERIVE Slow(e.vid, e.seg, e.spd) PATTERN Entered e WHERE e.spd < 40
  -- lands in the next segment's context partition, where jam may not hold
  DERIVE Slow(e.vid, e.seg + 1 AS seg, e.spd) PATTERN Entered e WHERE e.spd < 20
  -- reads a result of this context (muted where jam does not hold, context-independent)
  DERIVE Warn(s.vid, s.seg) PATTERN Slow s
  DERIVE Warn(s.vid, s.seg - 1 AS seg) PATTERN Slow s
  SWITCH CONTEXT clear PATTERN Avg a WHERE a.lav >= 30
}
"""

events = st.lists(st.fixed_dictionaries({
    "ts": st.integers(0, 60), "vid": st.integers(0, 5), "road": st.integers(0, 1),
    "seg": st.integers(0, 3), "spd": st.integers(0, 100),
    "tag": st.sampled_from(["a", "b", ""])}), max_size=80)


def _run(pipe: EmbeddedPipeline, raw: list[dict[str, Any]]) -> list[Alert]:
    raw = sorted(raw, key=lambda e: e["ts"])
    records = [InputRecord("r", 0, i, {"type": "R", **e}) for i, e in enumerate(raw)]
    out: list[Alert] = []
    for i in range(0, len(records), 9):
        out += pipe.feed(records[i:i + 9])
    return out + pipe.finish()


def _key(a: Alert) -> tuple:
    return (a.plan_id, a.event_type, a.partition, a.key, a.start_ts, a.end_ts, a.topic,
            a.ingest_ms, tuple(a.fields.items()))


@settings(max_examples=60, deadline=None)
@given(events, st.booleans())
def test_pipeline_alerts_equal_reference(raw: list[dict[str, Any]], aware: bool) -> None:
    fast = EmbeddedPipeline(compile_model(MODEL, context_aware=aware))
    assert fast.matcher.graph._columnar_route
    ref = reference_pipeline(MODEL, context_aware=aware)
    got, want = _run(fast, raw), _run(ref, raw)
    assert [_key(a) for a in got] == [_key(a) for a in want]
    assert fast.result.context_changes == ref.result.context_changes
    assert fast.result.dead_letters == ref.result.dead_letters


def test_reference_classes_are_the_old_code() -> None:
    """The reference graph really takes the old path (a guard against a
    refactoring that makes both sides the same code)."""
    assert ReferenceGraph._route_plain is not StageGraph._route_plain
    assert ReferenceGraph._columns_of is not StageGraph._columns_of
    assert ReferenceMatcher._alerts is not MatcherProcessor._alerts
    ev = DerivedEvent("q", "A", 7, 1, 2, {"x": 1})
    g = ReferenceGraph([], {"A": {"x": "int"}})
    g._consumed = frozenset({"A"})
    feed: list[tuple[str, Mapping[str, Any], int, int]] = []
    g._emit = frozenset()
    assert g._route_plain([ev], feed) == [] and feed == [("A", {"x": 1}, 2, 7)]


# -- ContextPartitions.stream_of: a C memo against a lookup per row ---------

_keys = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1), st.integers(0, 99)),
                 max_size=12)


@settings(max_examples=150, deadline=None)
@given(learned=_keys, contexts=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1),
                                                  st.integers(0, 99)), max_size=12),
       rows=st.lists(st.integers(0, 5), max_size=40), stray=st.lists(st.integers(-2**63, 2**63 - 1), max_size=4),
       between=st.integers(0, 40))
def test_stream_of_is_a_lookup_per_row(learned: list[tuple[int, int, int]],
                                       contexts: list[tuple[int, int, int]], rows: list[int],
                                       stray: list[int], between: int) -> None:
    """Every row's stream partition as `stream_id` gives it, row by row,
    whatever was learned or placed before or between two calls (the table
    is forgotten when the map grows) and for ids never seen (themselves)."""
    from caesar.services.matcher.partitions import ContextPartitions

    parts = ContextPartitions(2, ["seg"])
    parts.learn({partition_id(f"{x}|{d}|{s}"): f"{x}|{d}|{s}" for x, d, s in learned})
    known = list(parts.text) + stray
    ids = np.array([known[i % len(known)] for i in rows] if known else [], dtype=np.int64)
    first = parts.stream_of(ids)
    assert first.tolist() == [parts.stream_id(p) for p in ids.tolist()]
    for x, d, s in contexts:
        parts.context_of(partition_id(f"{x}|{d}"), (s,))
    known = list(parts.text) + stray
    ids = np.array([known[(i + between) % len(known)] for i in rows] if known else [],
                   dtype=np.int64)
    assert parts.stream_of(ids).tolist() == [parts.stream_id(p) for p in ids.tolist()]


# -- unique_pairs and group_rows (transactions) against np.unique(axis=0) ---

_int64 = st.integers(-2**63, 2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(st.one_of(st.integers(-3, 3), _int64),
                                st.one_of(st.integers(-3, 3), _int64)), max_size=60))
def test_unique_pairs_is_numpys_unique_of_rows(pairs: list[tuple[int, int]]) -> None:
    from caesar.events.batch import unique_pairs

    a = np.array([x for x, _ in pairs], dtype=np.int64)
    b = np.array([y for _, y in pairs], dtype=np.int64)
    got_a, got_b, inverse, counts = unique_pairs(a, b)
    if not pairs:
        assert len(got_a) == len(got_b) == len(inverse) == len(counts) == 0
        return
    want, want_inverse, want_counts = np.unique(np.stack([a, b], axis=1), axis=0,
                                                return_inverse=True, return_counts=True)
    assert got_a.tolist() == want[:, 0].tolist()
    assert got_b.tolist() == want[:, 1].tolist()
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()
    assert counts.tolist() == want_counts.tolist()


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.one_of(st.integers(-3, 3), _int64), max_size=60),
       dtype=st.sampled_from([np.int64, np.intp]))
def test_distinct_is_numpys_unique(values: list[int], dtype: Any) -> None:
    """distinct and distinct_inverse (a sort, events.batch) against
    np.unique (a hash in NumPy 2): the same values, dtype and inverse, also
    for no rows and one repeated value."""
    _assert_distinct_is_unique(np.array(values, dtype=dtype))


def _assert_distinct_is_unique(a: np.ndarray) -> None:
    from caesar.events.batch import distinct, distinct_inverse

    want, want_inverse = np.unique(a, return_inverse=True)
    got = distinct(a)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()
    got, inverse = distinct_inverse(a)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 3).flatmap(lambda k: st.lists(
    st.tuples(*[st.one_of(st.integers(-3, 3), _int64)] * k), min_size=1, max_size=60)))
def test_group_rows_is_numpys_unique_of_rows(rows: list[tuple[int, ...]]) -> None:
    from caesar.events.batch import group_rows

    keys = [np.array(col, dtype=np.int64) for col in zip(*rows, strict=True)]
    first, inverse = group_rows(keys)
    _, want_first, want_inverse = np.unique(np.stack(keys, axis=1), axis=0,
                                            return_index=True, return_inverse=True)
    assert first.tolist() == want_first.tolist()
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()


@settings(max_examples=300, deadline=None)
@given(rows=st.integers(1, 4).flatmap(lambda k: st.lists(
    st.tuples(*[st.one_of(st.integers(-3, 3), _int64, st.integers(0, 2**40).map(
        lambda x: x << 20))] * k), max_size=120)),
    presorted=st.booleans())
def test_lex_groups_in_c_is_the_lexsort_reference(rows: list[tuple[int, ...]],
                                                  presorted: bool) -> None:
    """grouping.lex_groups (a hash table of the distinct keys, a counting
    sort) against batch.lex_groups_reference (np.lexsort): the same stable
    order, group starts and groups, with many groups (the table grows),
    keys equal in their low bits, sorted input; is_sorted against NumPy."""
    from caesar.events import grouping
    from caesar.events.batch import lex_groups_reference

    if presorted:
        rows = sorted(rows)
    k = len(rows[0]) if rows else 1
    keys = [np.array([r[j] for r in rows], dtype=np.int64) for j in range(k)]
    got = grouping.lex_groups(keys)
    want = lex_groups_reference(keys)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.int64 and g.tolist() == w.tolist()
    assert grouping.is_sorted(keys[0]) == bool(np.all(keys[0][1:] >= keys[0][:-1]))
    # lex_sorted takes np.lexsort's keys: in order exactly when lexsort is the identity
    assert grouping.lex_sorted(keys) == bool(
        (np.lexsort(keys) == np.arange(len(rows))).all())


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.integers(-3, 3), max_size=40),
       dtype=st.sampled_from([np.int8, np.int32, np.uint16, np.bool_, np.uint64, np.float64]))
def test_grouping_wrappers_keep_dtype_and_fall_back(values: list[int], dtype: Any) -> None:
    """distinct, distinct_inverse and lex_groups (events.batch) on other
    dtypes: narrow ints and bools through C as int64 (same order and
    equality), uint64 and floats through the NumPy reference; results as
    np.unique gives them, in the input's dtype."""
    from caesar.events.batch import lex_groups, lex_groups_reference

    a = np.array([abs(v) if dtype in (np.uint16, np.uint64) else v for v in values]).astype(dtype)
    _assert_distinct_is_unique(a)
    if a.dtype.kind != "f":
        for g, w in zip(lex_groups([a, a]), lex_groups_reference([a, a]), strict=True):
            assert g.tolist() == w.tolist()


@settings(max_examples=200, deadline=None)
@given(k=st.integers(0, 2), rows=st.lists(st.tuples(st.integers(0, 3), st.integers(-2, 2),
                                                   st.one_of(st.integers(-1, 1), _int64)),
                                         min_size=0, max_size=40),
       as_objects=st.booleans())
def test_context_homes_ask_once_per_distinct_row_and_place_every_row(
        k: int, rows: list[tuple[int, int, int]], as_objects: bool) -> None:
    """context_homes (int columns grouped in C, other columns memoised row by
    row) against home(partition, key) asked for every row: the same home per
    row, home asked once per distinct (partition, key)."""
    from caesar.services.matcher.stage_graph import context_homes

    asked: list[tuple[int, tuple[Any, ...]]] = []

    def home(p: int, key: tuple[Any, ...]) -> int:
        asked.append((p, key))
        return hash((p, key)) % 1000

    partition = np.array([r[0] for r in rows], dtype=np.int64)
    cols = [np.array([r[1 + j] for r in rows], dtype=object if as_objects else np.int64)
            for j in range(k)]
    got = context_homes(partition, cols, home)
    want = [hash((r[0], tuple(r[1:1 + k]))) % 1000 for r in rows]
    assert got.dtype == np.int64 and got.tolist() == want
    assert sorted(asked) == sorted({(r[0], tuple(r[1:1 + k])) for r in rows})
    # with a KeyTable: the same homes, each distinct row asked once over
    # every call (here: the rows, then their reverse)
    from caesar.services.matcher.key_table import KeyTable

    asked.clear()
    table = KeyTable(1 + k)
    for order in (slice(None), slice(None, None, -1)):
        got = context_homes(partition[order], [c[order] for c in cols], home, table)
        assert got.dtype == np.int64 and got.tolist() == want[order]
    if not as_objects:  # (object columns are memoised per call only)
        assert sorted(asked) == sorted({(r[0], tuple(r[1:1 + k])) for r in rows})


# -- the matcher's bulk encoding against its per-record path -----------------

_field_value = st.one_of(st.integers(-3, 3), st.integers(-2**31, 2**31 - 1), _int64,
                         st.integers(2**63, 2**64), st.booleans(), st.none(),
                         st.floats(allow_nan=False, width=32))


_FLAT_FIELDS = {"TollNotification": ["vid", "time", "xway", "dir", "seg", "lav", "toll"],
                "AccidentAlert": ["vid", "time", "xway", "dir", "seg", "acc_seg"],
                "TollCharge": ["ts", "vid", "time", "toll"]}


@st.composite
def _alert_rows(draw: Any) -> tuple[str, dict[str, Any], int, str]:
    """An alert of a flat LR output type: its fields mostly small ints, some
    left out or of another kind (the per-record path's cases)."""
    etype = draw(st.sampled_from(sorted(_FLAT_FIELDS)))
    fields = {}
    for name in _FLAT_FIELDS[etype]:
        if draw(st.integers(0, 19)) == 0:
            continue
        odd = draw(st.integers(0, 9)) == 0
        fields[name] = draw(_field_value if odd else st.integers(0, 100))
    return etype, fields, draw(st.integers(0, 2**40)), draw(st.text("ab", max_size=2))


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(_alert_rows(), max_size=12))
def test_bulk_encoding_equals_the_per_record_path(
        rows: list[tuple[str, dict[str, Any], int, str]]) -> None:
    """OutputEncoder._bulk (flat integer schemas, columns at once) gives the
    records, dead letters and order the per-record path gives."""
    from caesar.codecs import make_codec
    from caesar.services.common.config import ServiceConfig
    from caesar.services.common.messages import Alert
    from caesar.services.matcher.runner import OutputEncoder
    from caesar.settings import TopicSettings

    class PerRecord(OutputEncoder):
        def _bulk(self, etype: str, group: list[Alert]) -> list[bytes] | None:
            return None

    plan = _lr_plan()
    cfg = ServiceConfig(plan, TopicSettings(partitions=1, alerts_copy=False), make_codec(),
                        (0,), "t")
    alerts = [Alert("q", etype, 0, key, 1, 2, fields, f"topic-{etype}", ingest)
              for etype, fields, ingest, key in rows]
    got = OutputEncoder(cfg).encode(alerts, plan)
    want = PerRecord(cfg).encode(alerts, plan)
    assert [_comparable(cfg, r) for r in got] == [_comparable(cfg, r) for r in want]
    # one full row of a flat type does take the bulk path
    full = Alert("q", "TollCharge", 0, "k", 1, 2, {"ts": 1, "vid": 2, "time": 3, "toll": 4},
                 "t", 5)
    enc = OutputEncoder(cfg)
    enc.encode([], plan)
    assert enc._bulk("TollCharge", [full]) is not None


def _comparable(cfg: Any, r: Any) -> tuple:
    """A record's topic, key and value; a dead letter's value decoded, the
    alert inside too, without the times they were made."""
    if r.topic != cfg.topics.dead_letters:
        return r.topic, r.key, r.value
    _, rec = cfg.codec.decode(r.value)
    rec.pop("time_ms")
    _, alert = cfg.codec.decode(rec.pop("value"))
    alert.pop("emit_ms")
    return r.topic, r.key, sorted(rec.items()), sorted(alert.items())


_PLAN: list[Any] = []


def _lr_plan() -> Any:
    from caesar.examples import model_path
    from caesar.language import compile_model

    if not _PLAN:
        _PLAN.append(compile_model(model_path("linear_road")))
    return _PLAN[0]


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(st.lists(st.one_of(
    st.sampled_from([-1.0, 0.0, 5.0, 10.0, 10.5, 60000.0, 60001.0]),
    st.floats(-1e3, 1e6, allow_nan=False)), max_size=20), max_size=4))
def test_observe_many_is_observe_of_each(batches: list[list[float]]) -> None:
    """The encoder's latency histogram, a batch at a time, counts as one
    observe() per value (bucket edges, negatives, the +Inf bucket)."""
    from caesar.services.common.latency import LatencyHistogram

    one, many = LatencyHistogram(), LatencyHistogram()
    for batch in batches:
        for ms in batch:
            one.observe(ms)
        many.observe_many(np.array(batch))
    assert (many.counts, many.count, many.max_ms) == (one.counts, one.count, one.max_ms)
    assert many.total_ms == pytest.approx(one.total_ms, rel=1e-9, abs=1e-6)


def _state(alert: Alert) -> dict[str, Any]:
    """Every field of an alert (a slots class: no vars())."""
    return {f.name: getattr(alert, f.name) for f in dataclasses.fields(alert)}


_values = st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False), st.text(max_size=3),
                    st.booleans(), st.none())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=2), max_size=4, unique=True), st.integers(0, 6),
       st.text(max_size=3), st.text(max_size=3), st.text(max_size=3), st.data())
def test_alert_rows_are_the_python_reference(names: list[str], n: int, identity: str,
                                             etype: str, topic: str, data: st.DataObject
                                             ) -> None:
    """alert_rows.pyx makes the alerts of match rows as the Python
    reference does: same order, every field compared (ingest too)."""
    from caesar.services.matcher.alert_rows import alert_rows
    from caesar.services.matcher.alerts import alert_rows_reference

    rows = st.lists(st.integers(-(2**40), 2**40), min_size=n, max_size=n)
    columns = [data.draw(st.lists(_values, min_size=n, max_size=n)) for _ in names]
    homes = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    texts = {h: f"k{h}" for h in homes}
    ingest = data.draw(st.dictionaries(st.integers(0, 3), st.integers(0, 2**40)))
    args = (identity, etype, topic, tuple(names), columns, data.draw(rows), data.draw(rows),
            data.draw(rows), homes, texts, ingest)
    made = alert_rows(Alert, *args)
    expected = alert_rows_reference(Alert, *args)
    assert [(o, _state(a)) for o, a in made] == [(o, _state(a)) for o, a in expected]
    assert all(type(a) is Alert for _o, a in made)


def test_alert_rows_refuse_columns_of_other_lengths() -> None:
    from caesar.services.matcher.alert_rows import alert_rows

    with pytest.raises(ValueError, match="column 'a' has 1 rows, not 2"):
        alert_rows(Alert, "q", "T", "t", ("a",), [[1]], [0, 1], [0, 0], [0, 0], [0, 0],
                   {0: ""}, {})
    with pytest.raises(ValueError, match="need 2 rows"):
        alert_rows(Alert, "q", "T", "t", (), [], [0], [0, 0], [0, 0], [0, 0], {0: ""}, {})

    # Alert's fields without slots: they have no place to be written to
    unslotted = dataclasses.make_dataclass(
        "Unslotted", [(f.name, f.type) for f in dataclasses.fields(Alert)])
    with pytest.raises(TypeError, match="has no slots"):
        alert_rows(unslotted, "q", "T", "t", (), [], [0], [0], [0], [0], {0: ""}, {})
