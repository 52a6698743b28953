"""Local runtime: a KRaft Kafka broker from cached Maven Central jars and a
local Ray head, started and stopped by PID (`caesar up/down/status`)."""

from caesar.runtime.broker import BrokerConfig, LocalBroker
from caesar.runtime.kafka_jars import ensure_kafka_jars, jars_cached, kafka_libs
from caesar.runtime.local import LocalRuntime
from caesar.runtime.processes import free_port
from caesar.runtime.ray_local import LocalRay, RayConfig

__all__ = [
    "BrokerConfig",
    "LocalBroker",
    "LocalRay",
    "LocalRuntime",
    "RayConfig",
    "ensure_kafka_jars",
    "free_port",
    "jars_cached",
    "kafka_libs",
]
