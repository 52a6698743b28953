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
