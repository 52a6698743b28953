"""Unit: the Spark jobs' Kafka options carry CAESAR's security settings in the
Java client's names (Spark's Kafka source/sink), plus --kafka-option pairs."""

from __future__ import annotations

import pytest

from caesar.errors import ConfigError
from caesar.jobs.kafka_options import spark_kafka_options

ENV = "CAESAR_KAFKA__SECURITY__"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith("CAESAR_"):
            monkeypatch.delenv(name)


def test_plaintext_by_default():
    assert spark_kafka_options() == {"kafka.security.protocol": "PLAINTEXT"}


def test_sasl_scram_over_tls_from_the_environment(monkeypatch):
    for key, value in {"PROTOCOL": "SASL_SSL", "SASL_MECHANISM": "SCRAM-SHA-512",
                       "SASL_USERNAME": "caesar", "SASL_PASSWORD": 'p"w\\x',
                       "SSL_CA_LOCATION": "/etc/kafka/ca.pem",
                       "SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "none"}.items():
        monkeypatch.setenv(ENV + key, value)
    assert spark_kafka_options() == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                                  'required username="caesar" password="p\\"w\\\\x";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/kafka/ca.pem",
        "kafka.ssl.endpoint.identification.algorithm": "",
    }


def test_mutual_tls_passes_the_pem_key_and_chain(monkeypatch, tmp_path):
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    cert.write_text("-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nBBB\n-----END PRIVATE KEY-----\n")
    monkeypatch.setenv(ENV + "PROTOCOL", "SSL")
    monkeypatch.setenv(ENV + "SSL_CERTIFICATE_LOCATION", str(cert))
    monkeypatch.setenv(ENV + "SSL_KEY_LOCATION", str(key))
    monkeypatch.setenv(ENV + "SSL_KEY_PASSWORD", "kp")
    options = spark_kafka_options()
    assert options["kafka.ssl.keystore.type"] == "PEM"
    assert options["kafka.ssl.keystore.certificate.chain"] == cert.read_text()
    assert options["kafka.ssl.keystore.key"] == key.read_text()
    assert options["kafka.ssl.key.password"] == "kp"


def test_kafka_option_pairs_add_and_override():
    options = spark_kafka_options(["security.protocol=SSL", "kafka.client.id=lr-producer",
                                   "sasl.kerberos.service.name=kafka"])
    assert options == {"kafka.security.protocol": "SSL", "kafka.client.id": "lr-producer",
                       "kafka.sasl.kerberos.service.name": "kafka"}


@pytest.mark.parametrize("bad", ["no-equals", "=value"])
def test_bad_kafka_option_is_a_clear_error(bad):
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        spark_kafka_options([bad], from_settings=False)
