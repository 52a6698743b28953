"""Rows -> Kafka records of the input topics (caesar.jobs.event_encoder): the
record decodes to the event, is keyed by PARTITION BY and placed where Kafka's
default partitioner puts its key; a bad row becomes a caesar.DeadLetter with
the reason and the row."""

from __future__ import annotations

import json

import pyarrow as pa

from caesar.bus.partitioner import partition_for_key
from caesar.examples import model_path
from caesar.jobs.input_rows import ColumnMapping
from caesar.jobs.job_model import JobModel
from caesar.jobs.produce import make_encoder
from caesar.services.common.wire import DEAD
from caesar.settings import Settings

HH = JobModel.load(model_path("hospital_hygiene"))
PARTITIONS = dict.fromkeys(HH.input_topics(), 3)


def test_rows_become_keyed_records_or_dead_letters():
    settings = Settings()
    encoder = make_encoder(HH, settings, ColumnMapping.parse(type_column="type"), PARTITIONS)
    codec = HH.codec(settings)
    rows = [{"type": "Sanitize", "ts": "5", "worker": 12, "dispenser": 2, "room": None,
             "zone": None, "patient": None},
            {"type": "Sanitize", "ts": "later", "worker": 12, "dispenser": 2, "room": None,
             "zone": None, "patient": None}]
    batch = pa.RecordBatch.from_pylist([{**r, "_n": i} for i, r in enumerate(rows)])
    [out] = list(encoder.encode_batches(iter([batch]), "_n"))
    good, bad = out.to_pylist()
    assert good["ok"] and good["topic"] == "hh-sanitize" and good["ts"] == 5
    assert good["key"] == b"12" and good["partition"] == partition_for_key(b"12", 3)
    assert codec.decode(good["value"]) == ("caesar.input.Sanitize",
                                            {"ts": 5, "worker": 12, "dispenser": 2})
    assert not bad["ok"] and bad["topic"] == settings.topics.dead_letters
    assert bad["reason"] == "schema" and "must be an int" in bad["detail"]
    letter = codec.decode_as(DEAD, bad["value"])
    assert letter["reason"] == "SCHEMA_VIOLATION" and letter["topic"] == "hh-sanitize"
    assert letter["offset"] == 1 and json.loads(letter["value"])["ts"] == "later"
    assert letter["service"] == "spark-produce"


def test_a_types_own_schema_is_validated_before_writing():
    # Linear Road's PositionReport schema has 32-bit ints; fastavro alone would write
    # 2**40 there (a Java reader would not read it back).
    lr = JobModel.load(model_path("linear_road"))
    encoder = make_encoder(lr, Settings(), ColumnMapping.parse(),
                           dict.fromkeys(lr.input_topics(), 2))
    report = {"time": 1, "vid": 7, "spd": 50, "xway": 0, "lane": 1, "dir": 0, "seg": 3,
              "pos": 3 * 5280, "pseg": 3, "ts": 1000}
    good = encoder.encode(report, 0)
    bad = encoder.encode({**report, "vid": 2**40}, 1)
    assert good[1] and lr.codec().decode(good[5])[1] == report
    assert not bad[1] and bad[8] == "schema" and "vid" in bad[9]
