"""Frames written on Spark executors are the codec's own bytes, for both the
single-object encoding and Schema Registry framing, and survive pickling."""

from __future__ import annotations

import pickle

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from caesar.codecs import SchemaRepository, SchemaViolationError, SingleObjectCodec
from caesar.codecs.registry import RegistryCodec
from caesar.examples import model_path
from caesar.jobs.frames import FrameEncoder
from caesar.jobs.job_model import JobModel

MODEL = JobModel.load(model_path("hospital_hygiene"))
RECORD = {"ts": 7, "worker": 3, "room": 11, "patient": True}


def codecs():
    repo = SchemaRepository.from_directory()
    client = SchemaRegistryClient.new_client({"url": "mock://frames"})
    return [SingleObjectCodec(repo), RegistryCodec("mock://frames", repo, client=client)]


@pytest.mark.parametrize("codec", codecs(), ids=["single-object", "registry"])
def test_frames_are_the_codecs_bytes(codec):
    names = MODEL.input_schema_names(codec.repository)
    frames = pickle.loads(pickle.dumps(FrameEncoder.from_codec(codec, names.values())))
    data = frames.encode(names["EnterRoom"], RECORD)
    assert data == codec.encode(names["EnterRoom"], RECORD)
    assert codec.decode(data) == (names["EnterRoom"], RECORD)
    with pytest.raises(SchemaViolationError, match="room"):
        frames.encode(names["EnterRoom"], {**RECORD, "room": "eleven"})
    with pytest.raises(SchemaViolationError, match="ts"):  # fastavro alone writes it as 1
        frames.encode(names["EnterRoom"], {**RECORD, "ts": True})
