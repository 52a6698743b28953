"""CAESAR settings: one pydantic-settings model read from a YAML/TOML file and
CAESAR_* environment variables (nested fields with `__`, e.g.
CAESAR_KAFKA__BOOTSTRAP_SERVERS=host:9092, CAESAR_TOPICS__ALERTS=my.alerts).

Precedence: explicit arguments > environment > config file > defaults.
The config file is `load_settings(path)` or the CAESAR_CONFIG variable.
"""

from __future__ import annotations

import contextvars
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_serializer, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
    YamlConfigSettingsSource,
)

from caesar.errors import ConfigError
from caesar.services.names import PIPELINE

CACHE_DIR = Path(os.environ.get("CAESAR_CACHE", Path.home() / ".cache" / "caesar"))


class _Section(BaseModel):
    # A misspelt key is an error, not a silently ignored setting.
    model_config = ConfigDict(extra="forbid")


class SecuritySettings(_Section):
    """Client security, passed through to every Kafka client (librdkafka names)."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: str | None = None  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: SecretStr | None = None
    ssl_endpoint_identification_algorithm: str | None = None  # "https" or "none"
    # Any other librdkafka property, verbatim (e.g. "sasl.oauthbearer.method").
    extra: dict[str, str] = Field(default_factory=dict)

    @field_serializer("sasl_password", "ssl_key_password", when_used="json")
    def _reveal_in_json(self, value: SecretStr | None) -> str | None:
        # Settings travel to Ray actors as JSON (model_dump_json): the secret must
        # survive that trip. repr/str and model_dump() (Python mode) stay masked;
        # do not log the JSON.
        return None if value is None else value.get_secret_value()

    def client_config(self) -> dict[str, str]:
        conf: dict[str, str] = {"security.protocol": self.protocol}
        pairs: dict[str, str | SecretStr | None] = {
            "sasl.mechanism": self.sasl_mechanism,
            "sasl.username": self.sasl_username,
            "sasl.password": self.sasl_password,
            "ssl.ca.location": self.ssl_ca_location,
            "ssl.certificate.location": self.ssl_certificate_location,
            "ssl.key.location": self.ssl_key_location,
            "ssl.key.password": self.ssl_key_password,
            "ssl.endpoint.identification.algorithm": self.ssl_endpoint_identification_algorithm,
        }
        for name, value in pairs.items():
            if value is None:
                continue
            conf[name] = value.get_secret_value() if isinstance(value, SecretStr) else value
        conf.update(self.extra)
        return conf

    def java_client_config(self) -> dict[str, str]:
        """The same security for Kafka's Java client (Spark's Kafka source and
        sink take these as `kafka.<name>` options). `extra` holds librdkafka
        names and is not translated; PEM files are read here because the Java
        client takes a key and certificate chain as text."""
        conf: dict[str, str] = {"security.protocol": self.protocol}
        if self.sasl_mechanism:
            conf["sasl.mechanism"] = self.sasl_mechanism
            module = _JAAS_MODULES.get(self.sasl_mechanism.upper())
            if module and self.sasl_username is not None:
                password = self.sasl_password.get_secret_value() if self.sasl_password else ""
                conf["sasl.jaas.config"] = (f'{module} required username="{_jaas(self.sasl_username)}"'
                                            f' password="{_jaas(password)}";')
        if self.ssl_ca_location:
            conf["ssl.truststore.type"] = "PEM"
            conf["ssl.truststore.location"] = self.ssl_ca_location
        if self.ssl_certificate_location and self.ssl_key_location:
            conf["ssl.keystore.type"] = "PEM"
            conf["ssl.keystore.certificate.chain"] = Path(self.ssl_certificate_location).read_text()
            conf["ssl.keystore.key"] = Path(self.ssl_key_location).read_text()
            if self.ssl_key_password is not None:
                conf["ssl.key.password"] = self.ssl_key_password.get_secret_value()
        if self.ssl_endpoint_identification_algorithm is not None:
            algorithm = self.ssl_endpoint_identification_algorithm
            conf["ssl.endpoint.identification.algorithm"] = "" if algorithm == "none" else algorithm
        return conf


_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _jaas(value: str) -> str:
    # JAAS option values are double-quoted strings with backslash escapes.
    return value.replace("\\", "\\\\").replace('"', '\\"')


class KafkaSettings(_Section):
    bootstrap_servers: str = "127.0.0.1:9092"
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    # When set, records use Confluent Schema Registry framing instead of
    # Avro single-object encoding ("mock://name" = in-memory, for tests).
    schema_registry_url: str | None = None
    schema_registry_config: dict[str, str] = Field(default_factory=dict)
    client_id: str = "caesar"
    # Producer batching (librdkafka linger.ms / batch.size) and consumer batches.
    linger_ms: int = 5
    # How long a record may wait for its broker (librdkafka message.timeout.ms;
    # Java's delivery.timeout.ms, same default): `flush()` waits this long, so
    # a broker stalled for half a minute delays a bulk load instead of failing it.
    delivery_timeout_ms: int = Field(default=120_000, gt=0)
    # Transactions (exactly-once): the broker aborts a transaction left open this
    # long (a crashed producer); a restarted actor aborts it at once.
    transaction_timeout_ms: int = 60_000
    producer_batch_bytes: int = 1_000_000
    consume_batch_size: int = 2000
    # A service handles at most this many bytes of a poll at once and commits
    # in between (internal records carry up to 20,000 rows each).
    consume_batch_bytes: int = Field(default=262_144, gt=0)
    poll_timeout_s: float = 0.5
    # Extra librdkafka properties for producers / consumers, verbatim.
    producer: dict[str, str] = Field(default_factory=dict)
    consumer: dict[str, str] = Field(default_factory=dict)

    def client_config(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap_servers, "client.id": self.client_id,
                **self.security.client_config()}


class TopicSettings(_Section):
    """Topic names. Input topics: `inputs[event_type]` or `input_prefix + event_type`."""

    inputs: dict[str, str] = Field(default_factory=dict)
    input_prefix: str = "caesar.input."
    transactions: str = "caesar.transactions"
    context_changes: str = "caesar.context-changes"  # compacted: key = stream partition
    progress: str = "caesar.progress"
    alerts: str = "caesar.alerts"
    derived: str = "caesar.derived"
    dead_letters: str = "caesar.dead-letters"
    checkpoints: str = "caesar.checkpoints"  # compacted: key = service/partition
    plans: str = "caesar.plans"  # compacted: key = plan version (model upgrades)
    changelog_prefix: str = "caesar.changelog."  # + store name; compacted
    partitions: int = Field(4, ge=1)
    replication_factor: int = Field(1, ge=1)
    # Per-topic partition overrides (e.g. dead letters need few).
    partitions_by_topic: dict[str, int] = Field(default_factory=dict)
    retention_ms: int | None = None  # None = broker default, on non-compacted topics
    # Every alert also as a caesar.DerivedEvent on `alerts` (the firehose that
    # `caesar run --bus memory` and tools read). False: an alert whose type has
    # an output topic goes only there, in its own schema (half the encoding).
    alerts_copy: bool = True

    @classmethod
    def under(cls, prefix: str, **overrides: Any) -> TopicSettings:
        """Every topic of a deployment named under `prefix` (several
        deployments, or test runs, sharing one broker)."""
        names: dict[str, Any] = {
            "input_prefix": f"{prefix}.in.", "transactions": f"{prefix}.txn",
            "context_changes": f"{prefix}.ctx", "progress": f"{prefix}.progress",
            "alerts": f"{prefix}.alerts", "derived": f"{prefix}.derived",
            "dead_letters": f"{prefix}.dead", "checkpoints": f"{prefix}.ckpt",
            "plans": f"{prefix}.plans", "changelog_prefix": f"{prefix}.changelog."}
        return cls(**(names | overrides))

    def input_topic(self, event_type: str) -> str:
        return self.inputs.get(event_type, self.input_prefix + event_type)

    def changelog_topic(self, store: str) -> str:
        return self.changelog_prefix + store


class RaySettings(_Section):
    # None = $RAY_ADDRESS if set, else an in-process local Ray; "127.0.0.1:6379" =
    # the head `caesar up` started (`caesar status` shows its address);
    # "ray://host:10001" or "host:6379" for a cluster. ("auto" only finds
    # clusters in Ray's default temp dir, not the `caesar up` head.)
    address: str | None = None
    namespace: str = "caesar"
    actors_per_service: int = Field(1, ge=1)
    # Per-service overrides (Flink's per-operator parallelism), e.g.
    # {matcher: 2}: the service that carries the work gets more actors.
    actors: dict[str, int] = Field(default_factory=dict)

    @field_validator("actors")
    @classmethod
    def _known_services(cls, v: dict[str, int]) -> dict[str, int]:
        for service, n in v.items():
            if service not in PIPELINE:  # not acep: one actor owns all its partitions
                raise ValueError(f"ray.actors: unknown service {service!r} "
                                 f"(one of {', '.join(PIPELINE)})")
            if n < 1:
                raise ValueError(f"ray.actors: {service} needs at least 1 actor, not {n}")
        return v

    def actors_of(self, service: str) -> int:
        return self.actors.get(service, self.actors_per_service)


class LocalRuntimeSettings(_Section):
    """What `caesar up` starts on this machine."""

    runtime_dir: Path = CACHE_DIR / "run"
    kafka_version: str = "4.1.1"
    broker_port: int = 9092
    controller_port: int = 9093
    broker_heap: str = "768m"
    start_timeout_s: float = 60.0
    ray: bool = True
    ray_port: int = 6379
    ray_num_cpus: int = 2
    ray_memory_mb: int = 3072
    ray_object_store_mb: int = 512
    # The dashboard adds ~1-2 s and ~150 MB to start; off unless asked for.
    ray_dashboard: bool = False


_CONFIG_FILE: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "caesar_config_file", default=None)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAESAR_", env_nested_delimiter="__",
                                      extra="forbid")

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    topics: TopicSettings = Field(default_factory=TopicSettings)
    ray: RaySettings = Field(default_factory=RaySettings)
    runtime: LocalRuntimeSettings = Field(default_factory=LocalRuntimeSettings)
    # User-defined functions a model calls: name -> "package.module:function"
    # (imported by the CLI and by every Ray actor; never code in the settings).
    functions: dict[str, str] = Field(default_factory=dict)

    @field_validator("kafka")
    @classmethod
    def _check_security(cls, kafka: KafkaSettings) -> KafkaSettings:
        sec = kafka.security
        if sec.protocol.startswith("SASL") and not sec.sasl_mechanism:
            raise ValueError(f"security protocol {sec.protocol} needs kafka.security.sasl_mechanism")
        return kafka

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _CONFIG_FILE.get()
        if path is not None:
            if path.suffix in (".yaml", ".yml"):
                sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=path))
            else:
                sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Settings from `config_file` (or $CAESAR_CONFIG), the environment and overrides."""
    from pydantic import ValidationError

    raw = config_file if config_file is not None else os.environ.get("CAESAR_CONFIG")
    path = Path(raw) if raw else None
    if path is not None:
        if not path.is_file():
            raise ConfigError(f"settings file {path} does not exist")
        if path.suffix not in (".yaml", ".yml", ".toml"):
            raise ConfigError(f"settings file {path}: use a .yaml, .yml or .toml file")
    token = _CONFIG_FILE.set(path)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        where = f" (from {path})" if path else ""
        raise ConfigError(f"invalid settings{where}:\n{exc}") from exc
    finally:
        _CONFIG_FILE.reset(token)
