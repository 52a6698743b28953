"""What the host did to every process, second by second, beside a benchmark:
a small process that sleeps 10 ms at a time and notes how late it woke (a
stall here stalls the services too), with the kernel's pressure stall
counters (/proc/pressure: time some task waited for a CPU, for I/O, for
memory) and its direct-reclaim and compaction stalls (/proc/vmstat).

    python -m bench.linear_road.host_stalls OUT.jsonl   # until SIGTERM

One JSON line per second: [wall time, longest late wake-up s, cpu some s,
io some s, io full s, memory some s, compaction stalls, reclaim stalls].
A collector pause in a service that lines up with a late wake-up here was
the host, not the collector.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

STEP_S = 0.01


def _pressure(kind: str) -> tuple[float, float]:
    """(some, full) seconds some task waited for `kind` since boot."""
    try:
        lines = Path(f"/proc/pressure/{kind}").read_text().splitlines()
    except OSError:
        return 0.0, 0.0
    totals = [int(line.rsplit("total=", 1)[1]) / 1e6 for line in lines]
    return totals[0], totals[1] if len(totals) > 1 else 0.0


def _vmstat() -> tuple[int, int]:
    """(compaction stalls, direct-reclaim stalls) since boot."""
    compact = reclaim = 0
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            name, value = line.split()
            if name == "compact_stall":
                compact = int(value)
            elif name.startswith("allocstall_"):
                reclaim += int(value)
    except OSError:
        pass
    return compact, reclaim


def _counters() -> list[float]:
    cpu, io, mem = _pressure("cpu"), _pressure("io"), _pressure("memory")
    return [cpu[0], io[0], io[1], mem[0], *_vmstat()]


def watch(out: Path) -> None:
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    with out.open("w") as f:
        before, second_at, late = _counters(), time.monotonic(), 0.0
        while not stop:
            t = time.monotonic()
            time.sleep(STEP_S)
            late = max(late, time.monotonic() - t - STEP_S)
            if time.monotonic() - second_at >= 1.0:
                now = _counters()
                deltas = [round(a - b, 4) for a, b in zip(now, before, strict=True)]
                f.write(json.dumps([round(time.time(), 3), round(late, 4), *deltas]) + "\n")
                f.flush()
                before, second_at, late = now, time.monotonic(), 0.0


def read(path: Path, since: float) -> list[list[float]]:
    """The seconds recorded at or after `since` (wall time)."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r[0] >= since]


if __name__ == "__main__":
    watch(Path(sys.argv[1]))
