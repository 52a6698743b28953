from __future__ import annotations

import pytest

from caesar.errors import ConfigError
from caesar.settings import Settings, load_settings


def test_defaults():
    s = load_settings()
    assert s.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert s.kafka.schema_registry_url is None
    assert s.topics.input_topic("Pos") == "caesar.input.Pos"
    assert s.kafka.client_config()["security.protocol"] == "PLAINTEXT"


def test_yaml_file_and_env_precedence(tmp_path, monkeypatch):
    cfg = tmp_path / "caesar.yaml"
    cfg.write_text(
        "kafka:\n"
        "  bootstrap_servers: kafka-0:9092,kafka-1:9092\n"
        "  consume_batch_size: 500\n"
        "topics:\n"
        "  partitions: 8\n"
        "  inputs: {Pos: lr.positions}\n"
        "ray:\n"
        "  address: auto\n")
    monkeypatch.setenv("CAESAR_KAFKA__CONSUME_BATCH_SIZE", "123")
    monkeypatch.setenv("CAESAR_TOPICS__ALERTS", "lr.alerts")
    s = load_settings(cfg)
    assert s.kafka.bootstrap_servers == "kafka-0:9092,kafka-1:9092"
    assert s.kafka.consume_batch_size == 123  # env beats file
    assert s.topics.partitions == 8
    assert s.topics.alerts == "lr.alerts"
    assert s.topics.input_topic("Pos") == "lr.positions"
    assert s.topics.input_topic("Other") == "caesar.input.Other"
    assert s.ray.address == "auto"
    # explicit arguments beat everything
    assert load_settings(cfg, ray={"address": "ray://x:10001"}).ray.address == "ray://x:10001"


def test_toml_file_via_env_var(tmp_path, monkeypatch):
    cfg = tmp_path / "caesar.toml"
    cfg.write_text('[kafka]\nschema_registry_url = "http://registry:8081"\n'
                   '[topics]\nreplication_factor = 3\n')
    monkeypatch.setenv("CAESAR_CONFIG", str(cfg))
    s = load_settings()
    assert s.kafka.schema_registry_url == "http://registry:8081"
    assert s.topics.replication_factor == 3


def test_security_passed_through_to_clients(monkeypatch):
    monkeypatch.setenv("CAESAR_KAFKA__SECURITY__PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("CAESAR_KAFKA__SECURITY__SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("CAESAR_KAFKA__SECURITY__SASL_USERNAME", "caesar")
    monkeypatch.setenv("CAESAR_KAFKA__SECURITY__SASL_PASSWORD", "s3cret")
    monkeypatch.setenv("CAESAR_KAFKA__SECURITY__SSL_CA_LOCATION", "/etc/ca.pem")
    monkeypatch.setenv("CAESAR_KAFKA__SECURITY__EXTRA", '{"sasl.oauthbearer.method": "oidc"}')
    s = load_settings()
    conf = s.kafka.client_config()
    assert conf["security.protocol"] == "SASL_SSL"
    assert conf["sasl.mechanism"] == "SCRAM-SHA-512"
    assert conf["sasl.username"] == "caesar" and conf["sasl.password"] == "s3cret"
    assert conf["ssl.ca.location"] == "/etc/ca.pem"
    assert conf["sasl.oauthbearer.method"] == "oidc"
    assert "s3cret" not in repr(s)  # secrets are not printed


def test_bad_settings_are_config_errors(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match="use a .yaml"):
        load_settings(bad)
    typo = tmp_path / "typo.yaml"
    typo.write_text("kafka:\n  bootstrap_server: x\n")
    with pytest.raises(ConfigError, match="bootstrap_server"):
        load_settings(typo)
    monkeypatch.setenv("CAESAR_KAFKA__SECURITY__PROTOCOL", "SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match="sasl_mechanism"):
        load_settings()


def test_topic_specs_partitions_and_compaction():
    from caesar.bus import topic_specs

    s = Settings(topics={"partitions": 6, "partitions_by_topic": {"caesar.dead-letters": 1},
                         "retention_ms": 3_600_000})
    specs = {t.name: t for t in topic_specs(s.topics, event_types=["Pos", "Pos"], stores=["ctx"])}
    assert specs["caesar.input.Pos"].partitions == 6
    assert specs["caesar.dead-letters"].partitions == 1
    assert specs["caesar.context-changes"].compacted
    assert specs["caesar.changelog.ctx"].compacted
    assert specs["caesar.checkpoints"].compacted
    assert not specs["caesar.transactions"].compacted
    assert specs["caesar.transactions"].config["retention.ms"] == "3600000"
    assert "retention.ms" not in specs["caesar.context-changes"].config


def test_settings_survive_the_json_trip_to_actors_with_secrets():
    s = Settings(kafka={"bootstrap_servers": "k:9092", "security": {
        "protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_username": "u",
        "sasl_password": "pw"}}, topics={"partitions": 2})
    back = Settings.model_validate_json(s.model_dump_json())
    assert back == s
    assert back.kafka.client_config()["sasl.password"] == "pw"
    assert "pw" not in repr(back) and "pw" not in str(s.model_dump())


def test_bootstrap_for_prefers_explicit_setting(monkeypatch, tmp_path):
    from caesar.cli.runtime_cmd import bootstrap_for

    monkeypatch.setenv("CAESAR_RUNTIME__RUNTIME_DIR", str(tmp_path))
    assert bootstrap_for(load_settings()) == "127.0.0.1:9092"  # nothing running: default
    monkeypatch.setenv("CAESAR_KAFKA__BOOTSTRAP_SERVERS", "remote:9093")
    assert bootstrap_for(load_settings()) == "remote:9093"


def test_topics_under_one_prefix():
    from caesar.settings import TopicSettings

    topics = TopicSettings.under("run7", partitions=3, changelog_prefix="run7.cl.")
    names = [topics.transactions, topics.context_changes, topics.progress, topics.alerts,
             topics.derived, topics.dead_letters, topics.checkpoints, topics.plans,
             topics.input_topic("Pos"), topics.changelog_topic("matcher")]
    assert all(n.startswith("run7.") for n in names) and len(set(names)) == len(names)
    assert topics.changelog_topic("matcher") == "run7.cl.matcher" and topics.partitions == 3
