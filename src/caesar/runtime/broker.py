"""A single-node Apache Kafka broker in KRaft mode (combined broker+controller)
run from the cached Maven Central jars, on loopback ports, state in one dir."""

from __future__ import annotations

import base64
import contextlib
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from caesar.errors import RuntimeEnvironmentError
from caesar.runtime.kafka_jars import ensure_kafka_jars
from caesar.runtime.processes import (
    PidFileProcess,
    pid_alive,
    port_open,
    stop_pid,
    tail,
    wait_for_port,
)

LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = {level}
logger.apache.name = org.apache.kafka
logger.apache.level = {level}
"""


@dataclass
class BrokerConfig:
    directory: Path
    port: int = 9092
    controller_port: int = 9093
    kafka_version: str = "4.1.1"
    heap: str = "768m"
    # Tests/dev: no initial rebalance delay, small segments and fast shutdown.
    dev: bool = True
    log_level: str = "WARN"
    extra: dict[str, str] | None = None
    jvm_options: tuple[str, ...] = ()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def kafka_cluster_id() -> str:
    """A random KRaft cluster id (Kafka's Uuid: 16 bytes, url-safe base64, no padding;
    Kafka never hands out ids starting with '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class LocalBroker(PidFileProcess):
    """Start/stop one broker. The PID file makes `stop` work from another process."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.dir = config.directory
        self.data_dir = self.dir / "data"
        self.properties = self.dir / "server.properties"
        self.log_file = self.dir / "broker.log"
        self.pid_file = self.dir / "broker.pid"
        self.pending_archive_file = self.dir / "cds-archive.pending"
        self.killed = False  # the last stop needed SIGKILL
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return self.config.bootstrap


    def _write_config(self) -> None:
        c = self.config
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{c.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}",
            "advertised.listeners":
                f"PLAINTEXT://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "auto.create.topics.enable": "true",
        }
        if c.dev:
            props.update({
                "group.initial.rebalance.delay.ms": "0",
                # The broker is unfenced on a heartbeat: beat often so it serves sooner.
                "broker.heartbeat.interval.ms": "500",
                # Let compaction run on small test topics within seconds.
                "log.cleaner.min.compaction.lag.ms": "0",
                "log.cleaner.backoff.ms": "1000",
                "controlled.shutdown.enable": "true",
            })
        props.update(c.extra or {})
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.dir / "log4j2.properties").write_text(LOG4J2.format(level=c.log_level))

    def _java(self, libs: Path, heap: str, options: list[str] | None = None) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise RuntimeEnvironmentError("java is not on PATH; install a Java 17+ runtime")
        return [java, f"-Xmx{heap}", f"-Xms{min_heap(heap)}", "-XX:+UseG1GC",
                "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError",
                "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
                *(options or []), *self.config.jvm_options, "-cp", f"{libs}/*"]

    def _class_archive(self, libs: Path) -> tuple[list[str], Path | None]:
        """JVM options for class-data sharing. The first broker of a Kafka version
        dumps the classes it loaded when it stops (a dynamic CDS archive next to the
        jars); later starts map it, which roughly halves start-up on this machine.
        A stale or unusable archive is ignored by the JVM (-Xshare:auto)."""
        archive = libs.parent / "broker.jsa"
        if archive.is_file():
            return [f"-XX:SharedArchiveFile={archive}"], None
        pending = libs.parent / f"broker.jsa.{uuid.uuid4().hex[:8]}.tmp"
        return [f"-XX:ArchiveClassesAtExit={pending}"], pending

    def _format(self, libs: Path) -> None:
        if (self.data_dir / "meta.properties").is_file():
            return  # formatted by an earlier start: keep the data
        self.data_dir.mkdir(parents=True, exist_ok=True)
        archive = libs.parent / "broker.jsa"
        # A short-lived tool: C1 only starts faster.
        fast = ["-XX:TieredStopAtLevel=1"]
        if archive.is_file():
            fast.append(f"-XX:SharedArchiveFile={archive}")
        cmd = self._java(libs, "256m", fast) + [
            "kafka.tools.StorageTool", "format", "--standalone", "-g",
            "-t", kafka_cluster_id(), "-c", str(self.properties)]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeEnvironmentError(
                f"formatting Kafka storage in {self.data_dir} failed:\n"
                f"{(result.stderr or result.stdout)[-2000:]}")

    def start(self, timeout_s: float = 60.0) -> None:
        if self.running():
            raise RuntimeEnvironmentError(
                f"a broker from {self.dir} is already running (pid {self.pid})")
        for port in (self.config.port, self.config.controller_port):
            if port_open(port):
                raise RuntimeEnvironmentError(
                    f"port {port} is already in use; pick other ports "
                    "(--port/--controller-port or CAESAR_RUNTIME__BROKER_PORT)")
        libs = ensure_kafka_jars(self.config.kafka_version)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        self._format(libs)
        cds, pending = self._class_archive(libs)
        # Recorded on disk: `caesar down` (another process) publishes the archive.
        self.pending_archive_file.unlink(missing_ok=True)
        if pending is not None:
            self.pending_archive_file.write_text(str(pending))
        with open(self.log_file, "ab") as log:  # the broker keeps its own descriptor
            self._process = subprocess.Popen(
                self._java(libs, self.config.heap, cds) + ["kafka.Kafka", str(self.properties)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.dir)
        self.pid_file.write_text(str(self._process.pid))
        started = time.monotonic()
        if not wait_for_port(self.config.port, timeout_s, self._alive):
            died = not self._alive()
            self.stop()
            what = "exited" if died else f"did not open port {self.config.port} in {timeout_s:.0f} s"
            raise RuntimeEnvironmentError(
                f"the Kafka broker {what}; last lines of {self.log_file}:\n{tail(self.log_file)}")
        self.start_seconds = time.monotonic() - started

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop the broker by PID (SIGTERM = controlled shutdown). True if it was running."""
        pid = self.pid
        if pid is None:
            return False
        was_running = pid_alive(pid)
        killed = stop_pid(pid, timeout_s) if was_running else False
        self.killed = killed
        if self._process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=5)
            self._process = None
        self.pid_file.unlink(missing_ok=True)
        self._publish_archive(complete=not killed)
        return was_running

    def _publish_archive(self, complete: bool) -> None:
        try:
            pending = Path(self.pending_archive_file.read_text().strip())
        except OSError:
            return
        self.pending_archive_file.unlink(missing_ok=True)
        if complete and pending.is_file() and pending.stat().st_size > 0:
            pending.replace(pending.with_name("broker.jsa"))  # atomic; last writer wins
        else:
            pending.unlink(missing_ok=True)


def min_heap(heap: str) -> str:
    """Initial heap: a quarter of the max, so an idle broker stays small."""
    units = {"k": 1, "m": 1024, "g": 1024 * 1024}
    number, unit = heap[:-1], heap[-1].lower()
    if unit not in units or not number.isdigit():
        raise RuntimeEnvironmentError(f"bad heap size {heap!r}: use e.g. 512m or 1g")
    kib = int(number) * units[unit] // 4
    return f"{max(kib // 1024, 64)}m"


