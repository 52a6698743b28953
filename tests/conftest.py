"""Session fixtures for integration tests: a REAL Kafka broker (KRaft, from the
cached Maven Central jars) and a real local Ray. Each starts only when a test
asks for it, once per session, on free ports in a temp dir, and is torn down
at the end. Mark tests that use them `@pytest.mark.integration`."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator

import pytest


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """bootstrap.servers of a broker started for this session ("127.0.0.1:PORT")."""
    from caesar.runtime.broker import BrokerConfig, LocalBroker
    from caesar.runtime.processes import free_port

    directory = tmp_path_factory.mktemp("kafka")
    broker = LocalBroker(BrokerConfig(
        directory=directory, port=free_port(), controller_port=free_port(),
        kafka_version=os.environ.get("CAESAR_KAFKA_VERSION", "4.1.1"), heap="768m", dev=True))
    broker.start(timeout_s=90)
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def _ray_for_session() -> Iterator[None]:
    import ray

    try:
        yield None
    finally:
        ray.shutdown()


@pytest.fixture
def ray_session(_ray_for_session: None) -> None:
    """A local Ray (2 CPUs, no dashboard) for the session; started again when
    a test connected this process to another cluster meanwhile (the fault
    tests' own head)."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 namespace="caesar-tests", configure_logging=False)


@pytest.fixture
def kafka_settings(kafka_bootstrap: str):
    """KafkaSettings pointing at the session broker."""
    from caesar.settings import KafkaSettings

    return KafkaSettings(bootstrap_servers=kafka_bootstrap, linger_ms=1)


@pytest.fixture
def kafka_bus(kafka_settings):
    """A KafkaBus on the session broker, closed after the test."""
    from caesar.bus.kafka import KafkaBus

    bus = KafkaBus(kafka_settings)
    yield bus
    bus.close()


_names = itertools.count()


@pytest.fixture
def unique_name() -> Callable[[str], str]:
    """Topic / group names unique to this session and test, so tests sharing the
    session broker never see each other's records."""
    run = uuid.uuid4().hex[:6]

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{run}-{next(_names)}"

    return make


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The figures a test records as `record_property("figures", text)` (the
    fault runs' drain, recovery and replay), printed at the end: with
    pytest-xdist a worker's own prints do not reach the terminal, its
    reports' user properties do."""
    lines = [f"{report.nodeid.split('::')[-1]}: {value}"
             for key in ("passed", "failed")
             for report in terminalreporter.stats.get(key, [])
             if getattr(report, "when", "") == "call"
             for name, value in getattr(report, "user_properties", ()) if name == "figures"]
    if lines:
        terminalreporter.section("recorded figures")
        for line in sorted(lines):
            terminalreporter.write_line(line)
