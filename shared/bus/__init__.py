"""The message bus every service runner uses: Kafka in production, in-memory
queues in embedded mode and unit tests (same partitioning, offsets, groups)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.bus.errors import BusError, UnknownTopicError
from shared.bus.memory import InMemoryBus
from shared.bus.partitioner import murmur2, partition_for_key
from shared.bus.protocol import Bus, BusConsumer, BusProducer
from shared.bus.records import OutRecord, Record, TopicPartition, TopicSpec
from shared.bus.topics import topic_specs

if TYPE_CHECKING:
    from shared.bus.kafka import KafkaBus
    from shared.settings import KafkaSettings, Settings


def kafka_bus(settings: Settings | KafkaSettings | None = None) -> KafkaBus:
    """A KafkaBus for `settings.kafka` (Settings or KafkaSettings). Imported lazily
    so embedded mode does not load librdkafka."""
    from shared.bus.kafka import KafkaBus

    return KafkaBus(getattr(settings, "kafka", settings))


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
