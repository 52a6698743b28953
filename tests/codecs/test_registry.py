"""Confluent Schema Registry framing against confluent-kafka's in-memory mock:// registry."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from caesar.codecs import CorruptRecordError, SchemaRepository, UnknownSchemaError, make_codec
from caesar.codecs.registry import RegistryCodec
from caesar.settings import Settings


def alert():
    return dict(version=1, plan_id="p", event_type="A", partition_key="k", partition=1,
                start_ts=1, end_ts=2, fields={"n": 3}, event_seqs=[], contexts=[],
                ingest_ms=0, emit_ms=0)


@pytest.fixture
def client():
    return SchemaRegistryClient.new_client({"url": "mock://caesar-tests"})


def test_settings_with_registry_url_selects_registry_framing():
    settings = Settings(kafka={"schema_registry_url": "mock://x"})
    assert isinstance(make_codec(settings), RegistryCodec)
    assert not isinstance(make_codec(Settings()), RegistryCodec)


def test_framing_and_round_trip(client):
    repo = SchemaRepository.from_directory()
    writer = RegistryCodec("mock://caesar-tests", repo, client=client)
    data = writer.encode("DerivedEvent", alert())
    magic, schema_id = struct.unpack(">bI", data[:5])
    assert magic == 0
    assert schema_id == writer.schema_id("caesar.DerivedEvent")
    # the schema is registered under the record name (RecordNameStrategy)
    registered = client.get_latest_version("caesar.DerivedEvent")
    assert registered.schema_id == schema_id
    # a separate reader resolves the id through the registry
    reader = RegistryCodec("mock://caesar-tests", repo, client=client)
    assert reader.decode(data) == ("caesar.DerivedEvent", alert())
    assert reader.decode_as("DerivedEvent", data) == alert()


def test_distinct_schemas_get_distinct_ids(client):
    codec = RegistryCodec("mock://caesar-tests", client=client)
    assert codec.schema_id("Progress") != codec.schema_id("DeadLetter")
    assert codec.schema_id("Progress") == codec.schema_id("caesar.Progress")


def test_unknown_schema_id(client):
    codec = RegistryCodec("mock://caesar-tests", client=client)
    with pytest.raises(UnknownSchemaError, match="schema id 4242"):
        codec.decode(struct.pack(">bI", 0, 4242) + b"\x00")


def test_single_object_record_is_rejected_by_registry_codec(client):
    single = make_codec(Settings()).encode("DerivedEvent", alert())
    codec = RegistryCodec("mock://caesar-tests", client=client)
    with pytest.raises(CorruptRecordError, match="magic byte 0xc3"):
        codec.decode(single)
    with pytest.raises(CorruptRecordError, match="5-byte"):
        codec.decode(b"\x00\x01")


def test_truncated_registry_body(client):
    codec = RegistryCodec("mock://caesar-tests", client=client)
    data = codec.encode("DerivedEvent", alert())
    with pytest.raises(CorruptRecordError, match="DerivedEvent body"):
        codec.decode(data[:-4])


def test_record_from_a_foreign_producer_decodes_with_its_registered_schema(client):
    import io
    import json

    from confluent_kafka.schema_registry import Schema
    from fastavro import parse_schema, schemaless_writer

    foreign = {"type": "record", "name": "Reading", "namespace": "ext",
               "fields": [{"name": "id", "type": "string"}, {"name": "v", "type": "double"}]}
    schema_id = client.register_schema("ext.Reading-value", Schema(json.dumps(foreign), "AVRO"))
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(foreign), {"id": "s1", "v": 2.5})
    data = struct.pack(">bI", 0, schema_id) + body.getvalue()
    codec = RegistryCodec("mock://caesar-tests", client=client)
    assert codec.decode(data) == ("ext.Reading", {"id": "s1", "v": 2.5})
