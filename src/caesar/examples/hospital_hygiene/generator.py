"""Synthetic hospital shifts for the hand hygiene model (model.caesar here):
workers start a shift, visit rooms (most of them patient rooms), touch the
patient zone or the environment, and sanitize at dispensers — usually before
entering and after leaving, sometimes not, so every kind of violation the
model looks for occurs. Time is in seconds; one worker's events have distinct
timestamps (a transaction holds one event per worker).

    python -m caesar.examples.hospital_hygiene.generator --workers 20 --hours 4 --out hh.jsonl
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class HygieneConfig:
    workers: int = 20
    hours: float = 4.0
    rooms: int = 30
    dispensers: int = 12
    seed: int = 1
    sanitize_before: float = 0.8  # chance of sanitizing before entering a room
    sanitize_after: float = 0.75  # ... within a minute after leaving it
    sanitize_between: float = 0.25  # ... between two contacts in the room
    connecting_door: float = 0.15  # chance of going on into the next room without leaving


def _shift(worker: int, cfg: HygieneConfig, rnd: random.Random) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    t = rnd.randrange(0, 600)

    def emit(etype: str, gap: tuple[int, int], **fields: Any) -> None:
        nonlocal t
        t += rnd.randint(*gap)
        events.append({"type": etype, "ts": t, "worker": worker, **fields})

    def sanitize(gap: tuple[int, int]) -> None:
        emit("Sanitize", gap, dispenser=rnd.randrange(cfg.dispensers))

    emit("ShiftStart", (0, 0))
    end = t + int(cfg.hours * 3600)
    through = False  # came straight from the previous room (no LeaveRoom there)
    while t < end:
        room = rnd.randrange(cfg.rooms)
        if not through and rnd.random() < cfg.sanitize_before:
            sanitize((30, 200))
        emit("EnterRoom", (10, 90), room=room, patient=rnd.random() < 0.8)
        for _ in range(rnd.choice((1, 2, 3, 4, 5, 6, 7, 8))):
            if rnd.random() < cfg.sanitize_between:
                sanitize((5, 40))
            emit("Contact", (15, 150), room=room,
                 zone="patient" if rnd.random() < 0.7 else "environment")
        through = rnd.random() < cfg.connecting_door
        if through:
            continue  # into the adjoining room
        emit("LeaveRoom", (10, 60), room=room)
        if rnd.random() < cfg.sanitize_after:
            sanitize((5, 50))
        t += rnd.randint(60, 400)  # walking to the next room
    emit("ShiftEnd", (1, 30))
    return events


def generate(cfg: HygieneConfig = HygieneConfig()) -> Iterator[dict[str, Any]]:
    """Every worker's shift, merged in time order (ties: by worker)."""
    rnd = random.Random(cfg.seed)
    events = [e for w in range(cfg.workers) for e in _shift(w, cfg, rnd)]
    events.sort(key=lambda e: (e["ts"], e["worker"]))
    yield from events


def main(argv: list[str] | None = None) -> None:
    from caesar.examples.event_files import write_events

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=HygieneConfig.workers)
    ap.add_argument("--hours", type=float, default=HygieneConfig.hours)
    ap.add_argument("--seed", type=int, default=HygieneConfig.seed)
    ap.add_argument("--out", required=True, help=".jsonl, .csv or .parquet")
    args = ap.parse_args(argv)
    n = write_events(generate(HygieneConfig(workers=args.workers, hours=args.hours,
                                            seed=args.seed)), args.out)
    print(f"{n} events -> {args.out}")


if __name__ == "__main__":
    main()
