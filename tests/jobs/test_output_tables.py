"""Output records -> table rows (caesar.jobs.output_tables): derived events with
the model's field types, outputs in a schema of their own (Linear Road), and
everything else to `_undecodable` with the reason."""

from __future__ import annotations

from caesar.codecs import make_codec
from caesar.examples import model_path
from caesar.jobs.job_model import JobModel
from caesar.jobs.output_tables import UNDECODABLE, OutputDecoder
from caesar.services.common.messages import Alert
from caesar.services.common.wire import DERIVED, alert_record

HH = JobModel.load(model_path("hospital_hygiene"))
LR = JobModel.load(model_path("linear_road"))


def test_derived_events_become_typed_rows():
    codec = HH.codec()
    decoder = OutputDecoder(HH, codec)
    alert = Alert("q4", "EntryViolation", 1, "3", 100, 160, {"worker": 3, "room": 7, "at": 160},
                  ingest_ms=1234)
    value = codec.encode(DERIVED, alert_record(alert))
    name, row = decoder.decode("hospital_hygiene.EntryViolation", 2, 41, value, 5000, 9)
    table = decoder.tables[name]
    assert name == "EntryViolation"
    assert dict(zip(table.names, row, strict=True)) == {
        "worker": 3, "room": 7, "at": 160, "plan_id": "q4", "partition_key": "3",
        "start_ts": 100, "end_ts": 160, "ingest_ms": 1234, "emit_ms": row[table.names.index(
            "emit_ms")], "kafka_topic": "hospital_hygiene.EntryViolation",
        "kafka_partition": 2, "kafka_offset": 41, "kafka_ms": 5000, "batch_id": 9}
    assert table.arrow([row]).schema.field("worker").type == "int64"


def test_own_schema_outputs_use_their_schema():
    codec = make_codec()
    decoder = OutputDecoder(LR, codec)
    toll = {"vid": 7, "time": 120, "xway": 0, "dir": 1, "seg": 33, "lav": 38, "toll": 162,
            "ingest_ms": 99}
    value = codec.encode("caesar.linear_road.TollNotification", toll)
    name, row = decoder.decode("lr-tolls", 0, 5, value, 1000, 1)
    table = decoder.tables[name]
    assert name == "TollNotification"
    assert dict(zip(table.names, row, strict=True)) == {
        **toll, "kafka_topic": "lr-tolls", "kafka_partition": 0, "kafka_offset": 5,
        "kafka_ms": 1000, "batch_id": 1}
    assert table.arrow([row]).schema.field("time").type == "int32"  # the schema's int


def test_what_is_no_output_of_the_model_is_kept_with_the_reason():
    codec = HH.codec()
    decoder = OutputDecoder(HH, codec)
    name, row = decoder.decode("hospital_hygiene.EntryViolation", 0, 1, b"garbage", 1, 1)
    assert name == UNDECODABLE and "single-object" in row[5] and row[6] == b"garbage"
    other = Alert("q9", "Compliance", 1, "3", 0, 1, {"worker": 3}, ingest_ms=0)
    value = codec.encode(DERIVED, alert_record(other))
    name, row = decoder.decode("hospital_hygiene.EntryViolation", 0, 2, value, 1, 1)
    assert name == UNDECODABLE and "not an output of the model on topic" in row[5]
    name, row = decoder.decode("t", 0, 3, None, 1, 1)
    assert name == UNDECODABLE and "null value" in row[5]
