"""The JVM side of the peer benchmark: fetch the peer jars, build the Java
harness, and drive one long-lived harness process per engine.

A harness (bench/peers/java/) loads the event file once and then runs
workloads on command (see Harness.java for the line protocol). Keeping the
JVM alive across repetitions is what lets its JIT warm up, as it would in a
long-running deployment; the driver discards the first repetitions.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
JAVA_SRC = HERE / "java"
FETCH = HERE / "fetch_peers.sh"
ESPER_VERSION = os.environ.get("CAESAR_ESPER_VERSION", "8.9.0")
FLINK_VERSION = os.environ.get("CAESAR_FLINK_VERSION", "1.18.1")
ENGINES = {"esper": ("EsperHarness", ESPER_VERSION), "flink": ("FlinkHarness", FLINK_VERSION)}
# Flink on Java 17 reflects into the JDK (its documented flags, trimmed to
# what a local MiniCluster needs).
FLINK_OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
    "java.lang", "java.lang.reflect", "java.io", "java.net", "java.nio", "sun.nio.ch",
    "java.text", "java.time", "java.util", "java.util.concurrent",
    "java.util.concurrent.atomic", "java.util.concurrent.locks")]
DEFAULT_JVM_OPTS = ["-Xms1g", "-Xmx3g", "-XX:+UseG1GC"]


class PeerError(RuntimeError):
    pass


def cache_root() -> Path:
    return Path(os.environ.get("CAESAR_CACHE", Path.home() / ".cache" / "caesar")) / "peers"


def java_available() -> str | None:
    """Why the JVM peers cannot run here, or None when they can."""
    for tool in ("java", "javac", "mvn"):
        if shutil.which(tool) is None:
            return f"{tool} not found (the peer harness needs a JDK 17+ and Maven)"
    return None


def libs(engine: str) -> Path:
    """The engine's jars, fetched from Maven Central on first use."""
    _main, version = ENGINES[engine]
    root = cache_root() / f"{engine}-{version}"
    if not (root / ".complete").exists():
        subprocess.run(["bash", str(FETCH), engine], check=True)
    return root / "libs"


def build(engine: str) -> Path:
    """Compile the harness for one engine (javac; cached by source hash)."""
    sources = sorted((JAVA_SRC / "common").rglob("*.java")) + \
        sorted((JAVA_SRC / engine).rglob("*.java"))
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.name.encode())
        digest.update(src.read_bytes())
    lib = libs(engine)
    digest.update(str(lib).encode())
    out = cache_root() / "harness" / f"{engine}-{digest.hexdigest()[:16]}"
    if (out / ".complete").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    print(f"[peers] compiling the {engine} harness ({len(sources)} sources) into {out}")
    subprocess.run(["javac", "-nowarn", "-XDsuppressNotes", "-encoding", "UTF-8", "-d", str(out),
                    "-cp", f"{lib}/*", *map(str, sources)], check=True)
    (out / ".complete").touch()
    return out


@dataclass
class JvmResult:
    wall_ns: int
    thread_cpu_ns: int
    process_cpu_ns: int
    matches: int
    setup_ns: int


def _cpu_ticks(pids: list[int]) -> int:
    """User + system CPU of the processes so far, in clock ticks."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


def settle(pids: list[int], window: float = 0.2, busy: float = 0.05,
           limit: float = 5.0) -> float:
    """Wait until the JVMs are quiet: under `busy` of a core over a
    `window` (at most `limit` seconds); the seconds waited. A JVM keeps
    compiling and collecting for a while after its run, on threads beside
    its event thread; on 2 cores that work took a share of the next run's
    core (CAESAR's wall time exceeded its CPU time by 25-30 ms per 300,000
    events with both JVMs alive, not with none), so each run starts once
    the previous engine has finished its after-work."""
    if not pids or not Path("/proc/self/stat").exists():
        return 0.0
    hz = os.sysconf("SC_CLK_TCK")
    t0 = time.perf_counter()
    while True:
        before = _cpu_ticks(pids)
        time.sleep(window)
        used = (_cpu_ticks(pids) - before) / hz
        waited = time.perf_counter() - t0
        if used <= busy * window or waited >= limit:
            return waited


class Harness:
    """One JVM running one engine's harness; commands over stdin/stdout."""

    def __init__(self, engine: str, jvm_opts: list[str] | None = None) -> None:
        main, _version = ENGINES[engine]
        classes = build(engine)
        opts = jvm_opts if jvm_opts is not None else (
            os.environ.get("CAESAR_PEERS_JVM_OPTS", "").split() or DEFAULT_JVM_OPTS)
        if engine == "flink":
            opts = opts + FLINK_OPENS
        cmd = ["java", *opts, "-cp", f"{classes}:{libs(engine)}/*", f"caesar.peers.{main}"]
        self.engine = engine
        self._log = (cache_root() / f"{engine}-harness.log").open("w")
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log, text=True, bufsize=1)
        self._expect("READY")

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _expect(self, prefix: str) -> str:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise PeerError(f"{self.engine} harness exited (see {self._log.name})")
        line = line.strip()
        if line.startswith("ERROR"):
            raise PeerError(f"{self.engine}: {line[6:]} (see {self._log.name})")
        if not line.startswith(prefix):
            raise PeerError(f"{self.engine} harness said {line!r}, expected {prefix}")
        return line

    def _send(self, line: str) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()

    def load(self, events_file: Path) -> int:
        self._send(f"load {events_file}")
        return int(self._expect("OK").split()[1])

    def run(self, workload_file: Path, matches_out: Path | None = None) -> JvmResult:
        self._send(f"run {workload_file}" + (f" {matches_out}" if matches_out else ""))
        fields = dict(kv.split("=") for kv in self._expect("RESULT").split()[1:])
        return JvmResult(**{k: int(v) for k, v in fields.items()})

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._send("quit")
                self._proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        self._log.close()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_matches(path: Path) -> list[tuple[int, tuple[int, ...]]]:
    """The harness's match file: (query number, seqs) per line."""
    out = []
    with path.open() as fh:
        for line in fh:
            nums = [int(x) for x in line.split()]
            out.append((nums[0], tuple(nums[1:])))
    return out
