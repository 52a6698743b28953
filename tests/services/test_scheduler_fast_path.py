"""The scheduler's columnar fast path (a clean batch of one topic and one type
decided at once with a running maximum over its ts column) against its
record-by-record path, the reference: the same transactions (columns, seq,
keys), progress, dead letters (reason, detail, offset) and state, for any
input and any cut into batches."""

import dataclasses
import math
from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from service_plans import two_context_plan

from caesar.services.common.messages import (
    INGEST,
    InputRecord,
    Progress,
    Transaction,
    TxnBatch,
    partition_id,
    partition_key,
)
from caesar.services.scheduler.processor import SchedulerOutput, SchedulerProcessor
from caesar.services.store.state_format import pack, unpack


class RecordByRecord(SchedulerProcessor):
    """The reference: every batch through `_accept`, one record at a time."""

    def _process_fast(self, records, out):  # type: ignore[no-untyped-def]
        return False


class Original(RecordByRecord):
    """Record by record, buffering dicts and releasing through
    `TxnBatch.of` as the scheduler did before the columnar path (3f3e046):
    the reference for the release order (ts, key text, topic, offset) and
    `seq`."""

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.dicts = {}

    def _buffer(self, rec, etype, ts):  # type: ignore[no-untyped-def]
        event = dict(rec.value or {})
        event[self.type_field] = etype.name
        key = partition_key(event, self.plan.transaction_key)
        slot = self.dicts.setdefault(ts, {})
        slot.setdefault(partition_id(key), (key, []))[1].append((rec.topic, rec.offset, event))
        self.max_ts = max(self.max_ts, ts)
        self._source(rec.topic, max_ts=ts)

    def _release(self, out):  # type: ignore[no-untyped-def]
        txns = []
        for ts in sorted(t for t in self.dicts if t < self.watermark):
            slot = self.dicts.pop(ts)
            for pid in sorted(slot, key=lambda p: slot[p][0]):
                key, events = slot[pid]
                events.sort(key=lambda e: (e[0], e[1]))
                txns.append(Transaction(pid, key, ts, tuple(e for _, _, e in events)))
        if txns:
            out.transactions.append(TxnBatch.of(txns, self.schemas, self.strings,
                                                self.type_field, first_seq=self.next_seq))
            self.next_seq += sum(len(t.events) for t in txns)
        if self.watermark > -(2**62):
            out.transactions.append(Progress(self.watermark, "scheduler"))


def plan_for(key_kind):
    """Pos on topics a and b (as Pos and Pos2), keyed by seg of `key_kind`."""
    plan = two_context_plan()
    pos = plan.event_types[0]
    fields = {**pos.fields, "seg": key_kind}
    return replace(plan, event_types=(replace(pos, fields=fields, topic="a"),
                                      replace(pos, name="Pos2", fields=fields, topic="b")))


def seg_value(kind, seg):
    return {"int": seg, "string": f"s{seg}", "float": seg / 2 - 1.0}[kind]


record = st.tuples(
    st.sampled_from(["a", "a", "a", "b"]),           # topic
    st.integers(0, 40),                               # ts
    st.integers(0, 3),                                # seg
    st.sampled_from(["ok"] * 12 + ["wm", "int_spd", "null", "far", "ingest"]))


def values_of(kind, topic, ts, seg, what, vid=0):
    v = {"type": "Pos" if topic == "a" else "Pos2", "ts": ts, "vid": vid,
         "seg": seg_value(kind, seg), "spd": float(seg)}
    if what == "int_spd":
        v["spd"] = seg  # an int in a float column: valid, the record path's job
    elif what == "null":
        v["vid"] = None
    elif what == "far":
        v["ts"] = ts + 10**6
    elif what == "ingest":
        v[INGEST] = 1000 + ts
    return v


def batch_view(item, strings):
    if isinstance(item, Progress):
        return ("progress", item.watermark)
    assert isinstance(item, TxnBatch)
    types = {}
    for name, c in sorted(item.events.by_type.items()):
        types[name] = (c.ts.tolist(), c.seq.tolist(), c.partition.tolist(),
                       c.values(strings), {k: v.tolist() for k, v in c.nulls.items()},
                       None if c.ingest is None else c.ingest.tolist())
    return ("batch", types, sorted(item.keys.items()))


def view(out: SchedulerOutput, strings):
    return ([batch_view(i, strings) for i in out.transactions],
            [(d.reason, d.detail, d.topic, d.offset) for d in out.dead_letters])


def drive(proc, kind, rows, cuts, advances, restore_at, state=True):
    outs = []
    offsets = {"a": 0, "b": 0}
    bounds = sorted({c % (len(rows) + 1) for c in cuts} | {0, len(rows)})
    for n, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        recs = []
        for topic, ts, seg, what in rows[lo:hi]:
            off = offsets[topic]
            offsets[topic] += 1
            if what == "wm":
                recs.append(InputRecord(topic, 0, off, None, watermark=ts))
            else:
                recs.append(InputRecord(topic, 0, off,
                                        values_of(kind, topic, ts, seg, what, off)))
        outs.append(view(proc.process(recs), proc.strings))
        if n in advances:
            outs.append(view(proc.advance(advances[n]), proc.strings))
        if n == restore_at:
            state = proc.snapshot()
            proc = type(proc)(proc.plan, proc.allowance, max_ahead=proc.max_ahead,
                              ahead_confirm=proc.ahead_confirm)
            proc.restore(unpack(pack(state)))
    if state:
        outs.append(("buffered", proc.buffered))
        outs.append(("state", proc.snapshot()))
    outs.append(view(proc.flush(), proc.strings))
    return outs


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["int", "string", "float"]), st.lists(record, max_size=60),
       st.lists(st.integers(0, 60), max_size=8), st.integers(0, 6),
       st.sampled_from([None, 10_000, 0]), st.integers(1, 4),
       st.dictionaries(st.integers(0, 8), st.integers(0, 45), max_size=3), st.integers(-1, 8),
       st.booleans())
def test_fast_path_decides_exactly_as_record_by_record(kind, rows, cuts, allowance, max_ahead,
                                                       confirm, advances, restore_at, one_topic):
    if one_topic:
        rows = [("a", ts, seg, what) for _, ts, seg, what in rows]
    plan = plan_for(kind)
    args = dict(max_ahead=max_ahead, ahead_confirm=confirm)
    want = drive(RecordByRecord(plan, allowance, **args), kind, rows, cuts, advances, restore_at)
    got = drive(SchedulerProcessor(plan, allowance, **args), kind, rows, cuts, advances,
                restore_at)
    assert got == want


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["int", "string", "float"]), st.lists(record, max_size=60),
       st.lists(st.integers(0, 60), max_size=8), st.integers(0, 6),
       st.dictionaries(st.integers(0, 8), st.integers(0, 45), max_size=3), st.booleans())
def test_columnar_release_matches_the_dict_release(kind, rows, cuts, allowance, advances,
                                                   one_topic):
    if one_topic:
        rows = [("a", ts, seg, what) for _, ts, seg, what in rows]
    plan = plan_for(kind)
    want = drive(Original(plan, allowance, max_ahead=10_000), kind, rows, cuts, advances, -1,
                 state=False)
    got = drive(SchedulerProcessor(plan, allowance, max_ahead=10_000), kind, rows, cuts,
                advances, -1, state=False)
    assert got == want


def test_a_clean_batch_takes_the_fast_path_and_late_records_are_dead_lettered():
    plan = plan_for("int")
    stamps = [5, 3, 9, 6, 7, 12, 2, 12]
    recs = [InputRecord("a", 0, i, values_of("int", "a", t, t % 3, "ok"))
            for i, t in enumerate(stamps)]
    fast, ref = SchedulerProcessor(plan, allowance=2), RecordByRecord(plan, allowance=2)
    out = SchedulerOutput()
    assert fast._process_fast(recs, out)
    fast._release(out)
    want = ref.process(recs)
    # 3 < 5-2? no; 6 < 9-2 = 7: late; 2 < 12-2: late
    assert [(d.offset, d.detail) for d in out.dead_letters] == [
        (3, "ts 6 is below the partition's watermark 7 (allowed out-of-orderness 2)"),
        (6, "ts 2 is below the partition's watermark 10 (allowed out-of-orderness 2)")]
    assert view(out, fast.strings) == view(want, ref.strings)
    assert fast.snapshot() == ref.snapshot()
    assert not [b for b in out.transactions if isinstance(b, TxnBatch)], "topic b is silent"
    released = [b for b in fast.advance(10).transactions if isinstance(b, TxnBatch)]
    assert np.array_equal(released[0].events.by_type["Pos"].ts, [3, 5, 7, 9])
    assert released[0].events.by_type["Pos"].seq.tolist() == [0, 1, 2, 3]


def test_a_batch_with_far_ahead_records_or_mixed_topics_goes_record_by_record():
    plan = plan_for("int")
    p = SchedulerProcessor(plan, allowance=0, max_ahead=100)
    p.process([InputRecord("a", 0, 0, values_of("int", "a", 1, 1, "ok"))])
    far = [InputRecord("a", 0, 1, values_of("int", "a", 2, 1, "far")),
           InputRecord("a", 0, 2, values_of("int", "a", 3, 1, "ok"))]
    assert not p._process_fast(far, SchedulerOutput())
    mixed = [InputRecord("a", 0, 3, values_of("int", "a", 4, 1, "ok")),
             InputRecord("b", 0, 0, values_of("int", "b", 4, 1, "ok"))]
    assert not p._process_fast(mixed, SchedulerOutput())
    assert p.buffered == 1 and p.dead == 0


# ------------------------------------------- per-record validation, one pass

_KINDS = ("int", "float", "string", "bool")
_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.sampled_from([2**63 - 1, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3))


@given(st.lists(st.sampled_from(_KINDS), min_size=1, max_size=4),
       st.data(), st.sampled_from([False, False, False, True]))
@settings(max_examples=400, deadline=None)
def test_strictly_valid_accepts_only_what_event_problem_accepts(kinds, data, checked) -> None:
    from caesar.plans.execution import EventTypeDef, FieldCheck
    from caesar.services.scheduler.processor import event_problem, strict_fields, strictly_valid

    fields = {"ts": "int", **{f"f{i}": k for i, k in enumerate(kinds)}}
    checks = {"f0": FieldCheck(not_null=True)} if checked else {}
    etype = EventTypeDef("T", fields, "ts", None, None, checks=checks)
    typical = {"ts": 5, **{f"f{i}": {"int": 1, "float": 1.5, "string": "x", "bool": True}[k]
                           for i, k in enumerate(kinds)}}
    own = {"int": st.one_of(st.sampled_from([2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 2**62,
                                             -(2**62), 0]), st.integers(-(2**64), 2**64)),
           "float": st.one_of(st.sampled_from([math.inf, -math.inf, math.nan, 0.0]),
                              st.floats(allow_nan=True, allow_infinity=True)),
           "string": st.text(max_size=3), "bool": st.booleans()}
    # a typical record with some fields replaced (a value of the field's own
    # kind, edges included, or of any kind) or left out
    value = dict(typical)
    for a in data.draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, max_size=2)):
        how = data.draw(st.sampled_from(["own", "own", "any", "absent"]))
        if how == "absent":
            value.pop(a, None)
        else:
            value[a] = data.draw(own[fields[a]] if how == "own" else _values)
    strict = strict_fields(etype)
    if checked:
        assert strict is None  # checks go the full way
        return
    assert strict is not None
    assert strictly_valid(typical, "ts", strict)  # the usual record takes the fast path
    if strictly_valid(value, "ts", strict):
        assert event_problem(etype, value, ()) == ""


def _shaped(v: dict, shape: str) -> dict:
    """A record of another shape than its producer's usual one."""
    if shape == "extra":
        return {"type": "T", **v, "f9": 1}
    if shape == "reorder":
        return dict(reversed(v.items()))
    if shape == "copied keys":
        return {"".join(list(a)): x for a, x in v.items()}
    return v


@given(st.lists(st.sampled_from(_KINDS), min_size=1, max_size=4),
       st.lists(st.lists(_values, min_size=4, max_size=4), min_size=0, max_size=6),
       st.lists(st.integers(0, 3), max_size=3),
       st.lists(st.sampled_from(["extra", "reorder", "copied keys"]), max_size=6))
@settings(max_examples=400, deadline=None)
def test_strict_columns_are_the_python_reference_in_one_pass(kinds, rows, drop, shapes) -> None:
    """clean_columns.pyx against processor._clean_lists (the reference, for
    any Mapping): the same columns (dtype and values) or both None, whatever
    the values (None, bools in int fields, ints beyond 64 bits, NaN, text),
    with fields left out, and no values (None: nothing to decide); a value
    that is not a dict is a TypeError. Records differ in shape as a producer's
    may not (strict_columns remembers where the record before held each
    attribute): keys that are not attributes, another key order, equal keys
    that are other string objects."""
    from caesar.plans.execution import EventTypeDef
    from caesar.services.scheduler.clean_columns import strict_columns
    from caesar.services.scheduler.processor import _clean_lists

    fields = {f"f{i}": k for i, k in enumerate(kinds)}
    etype = EventTypeDef("T", fields, "f0", None, None)
    typical = {"int": 1, "float": 1.5, "string": "x", "bool": True}
    values = []
    for n, row in enumerate(rows):
        # mostly values of the field's own kind, so that clean batches occur
        v = {a: (row[i] if (n + i) % 3 == 0 else typical[k])
             for i, (a, k) in enumerate(fields.items())}
        for i in drop if n == 0 else ():
            v.pop(f"f{i}", None)
        values.append(_shaped(v, shapes[n] if n < len(shapes) else ""))
    got, want = strict_columns(values, fields), _clean_lists(etype, values)
    assert (got is None) == (want is None), (got, want)
    if got is not None:
        assert got[0] == want[0]
        assert got[1].keys() == want[1].keys()
        for a, col in want[1].items():
            assert got[1][a].dtype == col.dtype
            np.testing.assert_array_equal(got[1][a], col)
    if values:
        import types
        try:
            strict_columns([types.MappingProxyType(values[0])], fields)
        except TypeError as e:
            assert "not a dict" in str(e)
        else:
            raise AssertionError("a Mapping that is not a dict must raise TypeError")


# ------------------------- records decoded in bulk (InputColumns), no dicts

def int_plan(checked):
    """Pos on topic a with int fields only, as a flat Avro schema decodes
    them; `checked`: spd BETWEEN 0 AND 30 (a batch outside goes record by
    record, where the out-of-range record is dead lettered)."""
    from caesar.plans.execution import FieldCheck

    plan = two_context_plan()
    pos = plan.event_types[0]
    checks = {"spd": FieldCheck(low=0, high=30)} if checked else {}
    return replace(plan, event_types=(replace(
        pos, fields={"vid": "int", "seg": "int", "spd": "int", "ts": "int"}, topic="a",
        checks=checks),))


bulk_row = st.tuples(st.integers(0, 40), st.integers(0, 3), st.integers(-2, 32),
                     st.sampled_from([None, None, None, "far"]))


def drive_columns(proc, rows, cuts, advances, restore_at, as_columns):
    """The rows through `process_columns` (as_columns) or through `process`
    as the records the bulk decoder's caller made before (the reference)."""
    from caesar.services.common.messages import InputColumns

    outs = []
    bounds = sorted({c % (len(rows) + 1) for c in cuts} | {0, len(rows)})
    for n, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        part = rows[lo:hi]
        cols = {"vid": [lo + i for i in range(len(part))],
                "seg": [seg for _, seg, _, _ in part],
                "spd": [spd for _, _, spd, _ in part],
                "ts": [ts + (10**6 if far else 0) for ts, _, _, far in part],
                "extra": [7] * len(part)}  # a field of the schema the model does not declare
        ingest = [5000 + lo + i for i in range(len(part))]
        batch = InputColumns("a", "Pos", np.zeros(len(part), dtype=np.int64),
                             np.arange(lo, hi, dtype=np.int64), np.array(ingest, dtype=np.int64),
                             {k: np.array(v, dtype=np.int64) for k, v in cols.items()},
                             [b"raw%d" % (lo + i) for i in range(len(part))])
        if as_columns:
            got = proc.process_columns(batch)
        else:
            got = proc.process([
                InputRecord("a", 0, lo + i, {**{k: v[i] for k, v in cols.items()},
                                             "type": "Pos", INGEST: ingest[i]},
                            b"raw%d" % (lo + i), timestamp_ms=ingest[i])
                for i in range(len(part))])
        outs.append(view(got, proc.strings))
        outs.append([(d.reason, d.offset, d.raw, d.partition) for d in got.dead_letters])
        if n in advances:
            outs.append(view(proc.advance(advances[n]), proc.strings))
        if n == restore_at:
            state = proc.snapshot()
            outs.append(("state", state))
            proc = type(proc)(proc.plan, proc.allowance, max_ahead=proc.max_ahead)
            proc.restore(unpack(pack(state)))
    outs.append(("buffered", proc.buffered))
    outs.append(("state", proc.snapshot()))
    outs.append(view(proc.flush(), proc.strings))
    return outs


@settings(max_examples=150, deadline=None)
@given(st.lists(bulk_row, max_size=50), st.lists(st.integers(0, 50), max_size=6),
       st.integers(0, 6), st.dictionaries(st.integers(0, 6), st.integers(0, 45), max_size=3),
       st.integers(-1, 6), st.booleans())
def test_columns_decide_exactly_as_the_records_they_were(rows, cuts, allowance, advances,
                                                         restore_at, checked):
    """`process_columns` takes a clean batch of int columns without making
    a record or a dict per event: the same transactions, dead letters (raw
    value, offset), snapshots (the buffered values as dicts) and flush as
    the records the batch was decoded from, through `process`."""
    plan = int_plan(checked)
    want = drive_columns(SchedulerProcessor(plan, allowance, max_ahead=10_000), rows, cuts,
                         advances, restore_at, as_columns=False)
    got = drive_columns(SchedulerProcessor(plan, allowance, max_ahead=10_000), rows, cuts,
                        advances, restore_at, as_columns=True)
    assert got == want


def test_a_clean_int_batch_takes_the_column_path():
    from caesar.services.common.messages import InputColumns

    proc = SchedulerProcessor(int_plan(False), allowance=1)
    taken = []
    proc._process_fast = lambda records, out: taken.append(len(records)) or False  # type: ignore[method-assign]
    batch = InputColumns("a", "Pos", np.zeros(3, dtype=np.int64), np.arange(3, dtype=np.int64),
                         np.array([1, 2, 3], dtype=np.int64),
                         {"vid": np.array([1, 2, 3]), "seg": np.array([0, 0, 1]),
                          "spd": np.array([5, 6, 7]), "ts": np.array([4, 1, 6])},
                         [b"", b"", b""])
    out = proc.process_columns(batch)
    assert taken == [], "no record was made"
    assert [(d.reason, d.offset) for d in out.dead_letters] == [("late", 1)]
    released = [b for b in out.transactions if isinstance(b, TxnBatch)]
    assert released[0].events.by_type["Pos"].ts.tolist() == [4]  # below 6 - 1
    assert proc.buffered == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 4)), max_size=5), st.data())
def test_value_parts_are_the_list_of_their_values(shape, data):
    """ValueParts (buffered values of column and record batches side by
    side) index, iterate, take and concatenate as the flat list would."""
    from caesar.services.scheduler.processor import ColumnValues, ValueParts

    parts, flat, base = [], [], 0
    for as_columns, n in shape:
        rows = [{"a": base + i, "type": "T", INGEST: 100 + base + i} for i in range(n)]
        base += n
        flat += rows
        parts.append(ColumnValues(["a"], [np.arange(base - n, base, dtype=np.int64)], "type",
                                  "T", np.arange(100 + base - n, 100 + base, dtype=np.int64))
                     if as_columns else rows)
    values = ColumnValues.concat(parts) if parts else ValueParts([])
    assert list(values) == flat and len(values) == len(flat)
    for i in range(-len(flat), len(flat)):
        assert values[i] == flat[i]
    rows = data.draw(st.lists(st.integers(0, max(len(flat) - 1, 0)), max_size=8)
                     if flat else st.just([]))
    if data.draw(st.booleans()):
        rows = sorted(set(rows))
    taken = values.take(np.array(rows, dtype=np.int64))
    assert list(taken) == [flat[i] for i in rows]


def _record_values_reference(records, type_field, ingest_key):
    """What processor._process_fast asked of a batch in Python before
    record_values (clean_columns.pyx) did it in one pass."""
    topic = records[0].topic
    if any(r.value is None or r.topic != topic or r.error is not None
           or r.watermark is not None or type(r.value) is not dict for r in records):
        return None
    values = [r.value for r in records]
    try:
        names = {v.get(type_field) for v in values}
    except TypeError:
        names = {0, 1}
    one = len(names) == 1 and next(iter(names)) in (None,) + tuple(
        n for n in names if type(n) is str)
    has = [ingest_key in v for v in values]
    return values, one, has, any(has), [r.offset for r in records]


_type_names = st.one_of(st.none(), st.sampled_from(["A", "B"]), st.integers(0, 1),
                        st.just(["A"]))


@dataclasses.dataclass
class _DuckRecord:
    """A record of another class (no slots): record_values reads its
    attributes, not InputRecord's slots in place."""

    topic: str
    partition: int
    offset: int
    value: Any
    error: str | None = None
    watermark: int | None = None


@st.composite
def _input_record(draw):
    kind = draw(st.sampled_from(["plain"] * 6 + ["none", "error", "watermark", "mapping",
                                                 "duck"]))
    topic = draw(st.sampled_from(["a", "a", "a", "b"]))
    value = {"x": draw(st.integers(0, 3))}
    name = draw(st.one_of(st.just("absent"), _type_names))
    if name != "absent":
        value["type"] = name
    if draw(st.booleans()):
        value[INGEST] = draw(st.integers(0, 9))
    offset = draw(st.integers(0, 10**6))
    if kind == "none":
        return InputRecord(topic, 0, offset, None)
    if kind == "error":
        return InputRecord(topic, 0, offset, None, b"x", "bad")
    if kind == "watermark":
        return InputRecord(topic, 0, offset, None, watermark=5)
    if kind == "mapping":
        import types
        return InputRecord(topic, 0, offset, types.MappingProxyType(value))
    if kind == "duck":
        return _DuckRecord(topic, 0, offset, value)
    return InputRecord(topic, 0, offset, value)


@settings(max_examples=400, deadline=None)
@given(st.lists(_input_record(), min_size=1, max_size=8))
def test_record_values_is_the_python_reference_in_one_pass(records) -> None:
    """record_values (clean_columns.pyx) against the Python it replaced: None
    for the same batches; else the same values, one-type verdict, ingest
    flags and offsets."""
    from caesar.services.scheduler.clean_columns import record_values

    got = record_values(records, "type", INGEST)
    want = _record_values_reference(records, "type", INGEST)
    assert (got is None) == (want is None)
    if got is not None:
        values, one, has, any_ingest, offsets = got
        assert values == want[0] and all(a is b for a, b in zip(values, want[0], strict=True))
        assert one == want[1]
        assert has.dtype == np.bool_ and has.tolist() == want[2] and any_ingest == want[3]
        assert offsets.dtype == np.int64 and offsets.tolist() == want[4]
