from __future__ import annotations

import json

import pytest
from fastavro.schema import fingerprint as fastavro_fingerprint
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.codecs import (
    CorruptRecordError,
    SchemaRepository,
    SchemaViolationError,
    SingleObjectCodec,
    UnknownSchemaError,
)
from caesar.codecs.fingerprint import crc64_avro
from caesar.codecs.single_object import MAGIC


@pytest.fixture(scope="module")
def codec() -> SingleObjectCodec:
    return SingleObjectCodec(SchemaRepository.from_directory())


def derived(**over):
    rec = dict(version=1, plan_id="p1", event_type="Toll", partition_key="seg-7", partition=7,
               start_ts=10, end_ts=20, fields={"a": 1, "b": "x", "c": None, "d": 1.5, "e": True},
               event_seqs=[1, 2], contexts=["congestion"], ingest_ms=1000, emit_ms=1005)
    rec.update(over)
    return rec


def test_fingerprint_matches_avro_spec_values():
    # Avro spec / Java SchemaNormalization: CRC-64-AVRO of the canonical form of "int".
    assert crc64_avro('"int"') == 0x7275D51A3F395C8F
    assert crc64_avro('"int"').to_bytes(8, "little") == bytes.fromhex("8f5c393f1ad57572")


def test_every_schema_fingerprint_agrees_with_fastavro(codec):
    names = codec.repository.names()
    for required in ("caesar.TransactionBatch", "caesar.RoutedBatch", "caesar.ContextChange",
                     "caesar.Progress",
                     "caesar.DerivedEvent", "caesar.DeadLetter", "caesar.ChangelogRecord",
                     "caesar.Checkpoint"):
        assert required in names
    for entry in codec.repository.entries():
        assert entry.fingerprint_bytes.hex() == fastavro_fingerprint(entry.canonical, "CRC-64-AVRO")
        # standalone: the canonical form parses without other files
        json.loads(entry.canonical)


def test_header_layout(codec):
    data = codec.encode("DerivedEvent", derived())
    entry = codec.repository.get("caesar.DerivedEvent")
    assert data[:2] == MAGIC == b"\xc3\x01"
    assert data[2:10] == entry.fingerprint.to_bytes(8, "little")


def test_round_trip_every_internal_schema(codec):
    ints = dict(base=42, width=1, data=b"\x00\x01")
    tx = dict(version=2, seq=5, keys=[dict(partition=3, key="car-1")], types=[
        dict(type="Pos", rows=2, ts=ints, seq=ints, partition=dict(base=0, width=1, data=b"\0\0"),
             ingest_ms=None, columns=[
                 dict(name="speed", kind="INT", ints=ints, floats=None, nulls=None, dictionary=[]),
                 dict(name="lane", kind="STRING", ints=dict(base=0, width=1, data=b"\0\0"),
                      floats=None, nulls=b"\0\1", dictionary=["L"])])])
    samples = {
        "TransactionBatch": tx,
        "RoutedBatch": dict(version=2, batch=tx, txn_partition=ints, txn_ts=ints,
                            txn_active=ints, txn_muted=ints, active_sets=[["q1"]],
                            muted_sets=[[]], discards=[dict(partition=3, partition_key="car-1",
                                                            ts=40, plans=["q2"])]),
        "ContextChange": dict(version=1, partition_key="k", partition=1, ts=5, txn_seq=2,
                              contexts=0b101, previous=0b001, active=["a", "c"], ingest_ms=3),
        "Progress": dict(version=1, stage="DERIVER", source="deriver-0", kafka_partition=2,
                         partition_key=None, ts=99, txn_seq=4, wall_ms=1),
        "DerivedEvent": derived(),
        "DeadLetter": dict(version=1, topic="in", partition=1, offset=7, key=b"k", value=b"\x00\xff",
                           headers={"h": b"v"}, record_ms=5, reason="UNDECODABLE",
                           detail="bad header", service="scheduler", time_ms=6),
        "ChangelogRecord": dict(version=1, store="ctx", state_format=1, key=b"k", state=None,
                                covers=[dict(topic="tx", partition=0, offset=10)], ts=3, wall_ms=4),
        "Checkpoint": dict(version=1, service="matcher", actor="matcher-0", epoch=3,
                           inputs=[dict(topic="tx", partition=0, offset=10)], changelogs=[],
                           state_format=1, wall_ms=9),
    }
    for name, record in samples.items():
        data = codec.encode(name, record)
        full, back = codec.decode(data)
        assert full == f"caesar.{name}"
        assert back == record
        assert codec.decode_as(name, data) == record


def test_encode_many_matches_encode(codec):
    records = [derived(plan_id=f"p{i}") for i in range(5)]
    assert codec.encode_many("DerivedEvent", records) == [codec.encode("DerivedEvent", r)
                                                          for r in records]


value_st = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                     st.floats(allow_nan=False), st.text(max_size=20))


@settings(max_examples=60, deadline=None)
@given(fields=st.dictionaries(st.text(max_size=10), value_st, max_size=6),
       seqs=st.lists(st.integers(0, 2**62), max_size=5), ts=st.integers(-(2**62), 2**62))
def test_round_trip_property(codec, fields, seqs, ts):
    record = derived(fields=fields, event_seqs=seqs, start_ts=ts, end_ts=ts)
    _, back = codec.decode(codec.encode("DerivedEvent", record))
    assert back == record
    # bool stays bool and int stays int through the union
    for key, value in fields.items():
        assert type(back["fields"][key]) is type(value)


def test_unknown_fingerprint_is_a_clear_error(codec):
    data = bytearray(codec.encode("DerivedEvent", derived()))
    data[2:10] = (0x1234).to_bytes(8, "little")
    with pytest.raises(UnknownSchemaError, match="fingerprint 0000000000001234"):
        codec.decode(bytes(data))


@pytest.mark.parametrize("data, message", [
    (b"", "shorter than the 10-byte"),
    (b"\xc3\x01abc", "shorter than the 10-byte"),
    (b'{"json": "record"}', "not an Avro single-object record"),
    (b"\x00\x00\x00\x00\x01" + b"\x00" * 10, "not an Avro single-object record"),
])
def test_bad_header(codec, data, message):
    with pytest.raises(CorruptRecordError, match=message):
        codec.decode(data)


def test_truncated_body(codec):
    data = codec.encode("DerivedEvent", derived())
    with pytest.raises(CorruptRecordError, match="DerivedEvent body"):
        codec.decode(data[:-6])


def test_trailing_garbage(codec):
    data = codec.encode("Progress", dict(version=1, stage="SCHEDULER", source="s", ts=1, wall_ms=2))
    with pytest.raises(CorruptRecordError, match="trailing"):
        codec.decode(data + b"\x01\x02")


def test_corrupt_body_bytes(codec):
    data = bytearray(codec.encode("DeadLetter", dict(
        topic="t", partition=0, offset=1, reason="LATE", detail="d", service="s", time_ms=1)))
    data[11] = 0xFF  # inside the varint of a string length
    data[12] = 0xFF
    with pytest.raises(CorruptRecordError):
        codec.decode(bytes(data))


def test_record_breaking_schema_names_the_problem(codec):
    with pytest.raises(SchemaViolationError, match="DerivedEvent"):
        codec.encode("DerivedEvent", derived(start_ts="not a number"))
    with pytest.raises(SchemaViolationError):
        codec.encode("DerivedEvent", {"plan_id": "only"})


def test_decode_as_other_type_is_refused(codec):
    data = codec.encode("DerivedEvent", derived())
    with pytest.raises(UnknownSchemaError, match="expected a caesar.Progress record"):
        codec.decode_as("Progress", data)


def test_unknown_schema_name(codec):
    with pytest.raises(UnknownSchemaError, match="no schema named 'Nope'"):
        codec.encode("Nope", {})


def test_schema_evolution_by_fingerprint(tmp_path):
    v1 = {"type": "record", "name": "Ev", "namespace": "t",
          "fields": [{"name": "a", "type": "long"}]}
    v2 = {"type": "record", "name": "Ev", "namespace": "t",
          "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": "string", "default": "-"}]}
    repo = SchemaRepository()
    repo.add(v1)
    old = SingleObjectCodec(repo).encode("t.Ev", {"a": 5})
    repo.add(v2)  # the reader now knows both versions; latest is v2
    codec = SingleObjectCodec(repo)
    assert codec.decode(old) == ("t.Ev", {"a": 5})
    assert codec.decode_as("t.Ev", old) == {"a": 5, "b": "-"}


def test_bad_schema_file_names_the_file(tmp_path):
    (tmp_path / "bad.avsc").write_text('{"type": "record", "name": "X", "fields": [')
    with pytest.raises(Exception, match="bad.avsc:1"):
        SchemaRepository.from_directory(tmp_path)
    (tmp_path / "bad.avsc").write_text('{"type": "record", "name": "X", "fields": [{"name": "y", "type": "Missing"}]}')
    with pytest.raises(Exception, match="unknown named type"):
        SchemaRepository.from_directory(tmp_path)


_NUMERIC = {"type": "record", "name": "Nums", "namespace": "t", "fields": [
    {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
    {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
    {"name": "n", "type": ["null", "int"]}, {"name": "b", "type": "boolean"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
_ints = st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1),
                  st.sampled_from([2**31, -(2**31) - 1, 2**31 - 1, -(2**31)]), st.booleans())


@settings(max_examples=400, deadline=None)
@given(i=_ints, long_=_ints, f=st.one_of(st.floats(-1e6, 1e6), st.booleans()),
       d=st.one_of(st.floats(allow_nan=False), st.booleans()),
       n=st.one_of(st.none(), _ints), ts=st.integers(0, 2**40))
def test_numbers_the_writer_lets_through_are_refused(i, long_, f, d, n, ts):
    """fastavro's writer puts a bool into int, long, float and double fields
    and any int into an int field, where a Java reader fails or misreads. The
    codec refuses exactly what fastavro's validator (the Avro spec) refuses,
    and what it writes reads back as it was."""
    from fastavro.validation import validate

    repo = SchemaRepository()
    repo.add(_NUMERIC)
    codec = SingleObjectCodec(repo)
    rec = {"i": i, "l": long_, "f": f, "d": d, "n": n, "b": True, "ts": ts}
    valid = validate(rec, repo.get("t.Nums").parsed, raise_errors=False)
    if not valid:
        with pytest.raises(SchemaViolationError, match="t.Nums"):
            codec.encode("t.Nums", rec)
        return
    name, back = codec.decode(codec.encode("t.Nums", rec))
    assert name == "t.Nums"
    assert {k: v for k, v in back.items() if k not in ("f", "ts")} == \
        {k: v for k, v in rec.items() if k not in ("f", "ts")}


def test_an_out_of_range_int_names_the_field(codec):
    repo = SchemaRepository()
    repo.add(_NUMERIC)
    rec = {"i": 2**40, "l": 1, "f": 1.0, "d": 1.0, "n": None, "b": True, "ts": 0}
    with pytest.raises(SchemaViolationError, match="i = 1099511627776 is outside"):
        SingleObjectCodec(repo).encode("t.Nums", rec)
    with pytest.raises(SchemaViolationError, match="l is a boolean"):
        SingleObjectCodec(repo).encode("t.Nums", {**rec, "i": 1, "l": False})
