"""The message bus every service runner uses: Kafka in production, in-memory
queues in embedded mode and unit tests (same partitioning, offsets, groups)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from caesar.bus.errors import BusError, UnknownTopicError
from caesar.bus.memory import InMemoryBus
from caesar.bus.partitioner import murmur2, partition_for_key
from caesar.bus.protocol import Bus, BusConsumer, BusProducer
from caesar.bus.records import OutRecord, Record, TopicPartition, TopicSpec
from caesar.bus.topics import topic_specs

if TYPE_CHECKING:
    from caesar.bus.kafka import KafkaBus
    from caesar.settings import KafkaSettings, Settings


def kafka_bus(settings: Settings | KafkaSettings | None = None) -> KafkaBus:
    """A KafkaBus for `settings.kafka` (Settings or KafkaSettings). Imported lazily
    so embedded mode does not load librdkafka."""
    from caesar.bus.kafka import KafkaBus
    from caesar.settings import Settings

    return KafkaBus(settings.kafka if isinstance(settings, Settings) else settings)


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
