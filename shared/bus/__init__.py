"""The message bus every service runner uses: Kafka in production, in-memory
queues in embedded mode and unit tests (same partitioning, offsets, groups)."""

from __future__ import annotations

from shared.bus.errors import BusError, UnknownTopicError
from shared.bus.memory import InMemoryBus
from shared.bus.partitioner import murmur2, partition_for_key
from shared.bus.protocol import Bus, BusConsumer, BusProducer
from shared.bus.records import OutRecord, Record, TopicPartition, TopicSpec
from shared.bus.topics import topic_specs


def kafka_bus(settings=None):  # noqa: ANN001, ANN201 - lazy import keeps confluent-kafka optional here
    """A KafkaBus for `settings.kafka` (Settings or KafkaSettings)."""
    from shared.bus.kafka import KafkaBus

    kafka = getattr(settings, "kafka", settings)
    return KafkaBus(kafka)


__all__ = [
    "Bus",
    "BusConsumer",
    "BusError",
    "BusProducer",
    "InMemoryBus",
    "OutRecord",
    "Record",
    "TopicPartition",
    "TopicSpec",
    "UnknownTopicError",
    "kafka_bus",
    "murmur2",
    "partition_for_key",
    "topic_specs",
]
