"""Bulk Avro for flat integer records (caesar/codecs/flat.py) equals fastavro
record by record, and refuses what is not a well-formed record."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.codecs import SchemaRepository, SingleObjectCodec
from caesar.codecs.flat import FlatCodec, flat_fields

SCHEMA = {"type": "record", "name": "Flat", "namespace": "test", "fields": [
    {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
    {"name": "b", "type": "boolean"}, {"name": "d", "type": "int", "default": -1}]}
INT32, INT64 = st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)


def setup() -> tuple[SingleObjectCodec, FlatCodec]:
    repo = SchemaRepository()
    entry = repo.add(SCHEMA)
    return SingleObjectCodec(repo), FlatCodec(entry)


rows = st.lists(st.tuples(INT32, INT64, st.booleans(), INT32), max_size=60)


@given(rows)
@settings(max_examples=150, deadline=None)
def test_encode_and_decode_equal_fastavro(data) -> None:
    codec, flat = setup()
    records = [dict(zip(("i", "l", "b", "d"), r, strict=True)) for r in data]
    cols = {k: np.array([int(r[k]) for r in records], dtype=np.int64) for k in "ildb"}
    encoded = flat.encode(cols)
    assert encoded == codec.encode_many("test.Flat", records)
    back = flat.decode(encoded)
    assert back is not None
    for k in "ild":
        assert back[k].tolist() == cols[k].tolist()
    assert back["b"].tolist() == [int(r["b"]) for r in records]


def test_refuses_what_is_not_a_record_of_the_schema() -> None:
    codec, flat = setup()
    good = codec.encode_many("test.Flat", [{"i": 1, "l": 2, "b": True, "d": 3}] * 3)
    assert flat.decode(good) is not None
    assert flat.decode([good[0], good[1][:-1], good[2]]) is None       # truncated
    assert flat.decode([good[0] + b"\x02"]) is None                    # a field too many
    assert flat.decode([b"\x00" + good[0][1:]]) is None                # not single-object
    other = SchemaRepository()
    other.add({**SCHEMA, "name": "Other"})
    foreign = SingleObjectCodec(other).encode("test.Other", {"i": 1, "l": 2, "b": True, "d": 3})
    assert flat.decode([foreign]) is None                              # another schema
    big = bytearray(good[0])
    big[10:11] = b"\xff\xff\xff\xff\xff\x01"                           # int of 6 bytes
    assert flat.decode([bytes(big)]) is None
    bad_bool = bytearray(good[0])
    bad_bool[12] = 2
    assert flat.decode([bytes(bad_bool)]) is None


def test_only_flat_integer_records() -> None:
    repo = SchemaRepository()
    assert flat_fields(repo.add(SCHEMA)) is not None
    nullable = {**SCHEMA, "name": "N", "fields": [{"name": "x", "type": ["null", "long"]}]}
    assert flat_fields(repo.add(nullable)) is None
    with pytest.raises(ValueError):
        FlatCodec(repo.get("test.N"))
