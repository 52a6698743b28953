"""Kafka client options for the Spark jobs: Spark's Kafka source and sink
take the Java client's settings as `kafka.<name>` options. Security comes
from CAESAR's settings (settings file or CAESAR_KAFKA__SECURITY__* variables,
as the Helm chart sets them), translated to Java names; `--kafka-option
KEY=VALUE` adds or overrides any Java client setting."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from caesar.errors import ConfigError

if TYPE_CHECKING:
    from caesar.settings import Settings


def add_kafka_option_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                        help="Kafka Java client setting for Spark's Kafka source/sink, "
                             "e.g. security.protocol=SASL_SSL (repeatable; security also "
                             "comes from CAESAR settings and CAESAR_KAFKA__SECURITY__*)")


def spark_kafka_options(pairs: Sequence[str] = (), *, from_settings: bool = True,
                        settings: Settings | None = None) -> dict[str, str]:
    """`kafka.*` options: the security of `settings` (default: load_settings()),
    then each KEY=VALUE pair."""
    conf: dict[str, str] = {}
    if from_settings:
        from caesar.settings import load_settings

        conf.update((settings or load_settings()).kafka.security.java_client_config())
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().removeprefix("kafka.")
        if not sep or not key:
            raise ConfigError(f"--kafka-option expects KEY=VALUE, got {pair!r}")
        conf[key] = value
    return {f"kafka.{k}": v for k, v in conf.items()}
