"""The acep service's runner on the exactly-once loop without Kafka (the
in-memory bus has Kafka's transactions): its tables and outputs live with its
lowest partition, so that partition must commit whenever any partition's
input moved them, also when it read nothing itself, and all its partitions
commit in one transaction (a crash injected between or inside commits loses
and repeats nothing). The Kafka + Ray version of these is
test_acep_ray_kafka.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from acep_models import COUNTER

import caesar
from caesar.bus.memory import InMemoryBus
from caesar.bus.reading import read_all
from caesar.bus.records import OutRecord, Record, TopicPartition, TopicSpec
from caesar.codecs import make_codec
from caesar.examples.hospital_hygiene.generator import HygieneConfig, generate
from caesar.language import compile_model
from caesar.services.common.config import ServiceConfig
from caesar.services.common.loop import ServiceLoop
from caesar.services.embedded.bus_pipeline import (
    BusPipeline,
    produce_end,
    produce_inputs,
    read_alerts,
)
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.store.checkpoint import StateStore, StoreError
from caesar.services.wiring import make_loop
from caesar.settings import TopicSettings

MODEL = Path(caesar.__file__).parent / "examples" / "hospital_hygiene" / "hyreminder.caesar"
IN = "in"
OUT = "out"


class SharedCount:
    """The acep handler's shape in small: one count over both partitions'
    input, kept in partition 0's checkpoint, each new value going out in
    partition 0's transaction."""

    def __init__(self) -> None:
        self.count = 0

    def inputs(self) -> list[TopicPartition]:
        return [TopicPartition(IN, 0), TopicPartition(IN, 1)]

    def partition_inputs(self, j: int) -> list[TopicPartition]:
        return [TopicPartition(IN, j)]

    def handle(self, records: Sequence[Record]) -> dict[int, list[OutRecord]]:
        self.count += len(records)
        result: dict[int, list[OutRecord]] = {r.partition: [] for r in records}
        result[0] = [OutRecord(OUT, str(self.count).encode(), None, partition=0)]
        return result

    def snapshot_partition(self, j: int) -> Any:
        return {"count": self.count} if j == 0 else {}

    def restore_partition(self, j: int, state: Any) -> None:
        self.count = state.get("count", self.count)

    def event_time(self) -> int:
        return 0


class SharedCountOne(SharedCount):
    one_transaction = True


def shared_count_loop(bus: Any, handler: type[SharedCount] = SharedCountOne,
                      partitions: tuple[int, ...] = (0, 1)) -> ServiceLoop:
    store = StateStore(bus, make_codec(), changelog_topic="changelog",
                       checkpoints_topic="checkpoints", service="shared")
    loop = ServiceLoop(bus=bus, group_id="shared", transactional_prefix="shared",
                       handler_factory=handler, partitions=partitions, store=store,
                       poll_timeout_s=0.0, commit_interval_s=0.0)
    loop.start()
    return loop


class Crash(Exception):
    """The process dies here (not a BusError: the loop does not handle it)."""


class CrashingBus:
    """An in-memory bus whose transactional producers die at the `at`-th
    call of `method` (counted over all of them), before or after that call
    took effect: a kill -9 at that point of a commit."""

    def __init__(self, bus: InMemoryBus, method: str, at: int, after: bool) -> None:
        self.bus, self.method, self.at, self.after = bus, method, at, after
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.bus, name)

    def producer(self, transactional_id: str | None = None) -> Any:
        return _CrashingProducer(self.bus.producer(transactional_id), self)


class _CrashingProducer:
    def __init__(self, inner: Any, bus: CrashingBus) -> None:
        self.inner, self.bus = inner, bus

    def __getattr__(self, name: str) -> Any:
        call = getattr(self.inner, name)
        if name != self.bus.method:
            return call

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.bus.calls += 1
            if self.bus.calls == self.bus.at and not self.bus.after:
                raise Crash(f"before {name} #{self.bus.at}")
            result = call(*args, **kwargs)
            if self.bus.calls == self.bus.at:
                raise Crash(f"after {name} #{self.bus.at}")
            return result
        return counted


def _crash_and_restart(handler: type[SharedCount], method: str, at: int, after: bool
                       ) -> tuple[int, list[bytes]]:
    """Two records on each partition per batch, four batches, a crash at the
    given point, a restarted loop to the end: (its count, outputs seen)."""
    bus = InMemoryBus()
    bus.create_topics([TopicSpec(IN, 2), TopicSpec(OUT, 1), TopicSpec("changelog", 2),
                       TopicSpec("checkpoints", 1)])
    crashing = CrashingBus(bus, method, at, after)
    loop = shared_count_loop(crashing, handler)
    producer = bus.producer()
    crashed = False
    for _ in range(4):  # batches spanning both partitions
        producer.produce([OutRecord(IN, b"x", None, partition=j) for j in (0, 1, 0, 1)])
        if not crashed:
            try:
                loop.run_once()
                loop.commit()
            except Crash:
                crashed = True
    assert crashed, "no crash injected"
    assert loop.consumer is not None
    loop.consumer.close()
    again = shared_count_loop(bus, handler)  # the restarted actor: fences, restores
    while again.run_once():
        pass
    again.commit()
    count = again.handler.count  # type: ignore[attr-defined]
    again.close()
    return count, committed_outputs(bus)


CRASH_POINTS = [(method, at, after) for method in ("begin_transaction", "produce",
                                                   "send_offsets_to_transaction",
                                                   "commit_transaction")
                for at in (1, 2, 3) for after in (False, True)]


@pytest.mark.parametrize(("method", "at", "after"), CRASH_POINTS)
def test_one_transaction_a_crash_anywhere_in_a_commit_loses_and_repeats_nothing(
        method, at, after):
    count, outputs = _crash_and_restart(SharedCountOne, method, at, after)
    assert count == 16
    # each committed output is a count after a committed batch: none repeats
    values = [int(v) for v in outputs]
    assert values == sorted(set(values)) and values[-1] == 16, values


def test_per_partition_commits_replay_the_later_partition_into_shared_state():
    """Why the acep service needs one transaction: with one transaction per
    partition, a crash after partition 0's commit (tables and outputs in
    it) and before partition 1's replays partition 1's input into state that
    already counted it."""
    count, outputs = _crash_and_restart(SharedCount, "commit_transaction", 1, True)
    assert count > 16


def test_a_group_checkpoint_is_not_restored_into_another_grouping():
    bus = InMemoryBus()
    bus.create_topics([TopicSpec(IN, 2), TopicSpec(OUT, 1), TopicSpec("changelog", 2),
                       TopicSpec("checkpoints", 1)])
    loop = shared_count_loop(bus)
    bus.producer().produce([OutRecord(IN, b"x", None, partition=j) for j in (0, 1)])
    while loop.run_once():
        pass
    loop.commit()
    loop.close()
    with pytest.raises(StoreError, match=r"owning partitions \[0, 1\], this one owns \[0\]"):
        shared_count_loop(bus, partitions=(0,))
    # the same grouping restores (and so does the per-partition handler: no group)
    assert shared_count_loop(bus).handler.count == 2  # type: ignore[attr-defined]


def committed_outputs(bus: InMemoryBus) -> list[bytes]:
    return [r.value for r in read_all(bus, [TopicPartition(OUT, 0)], timeout_s=5.0)
            if r.value is not None]


@pytest.mark.parametrize("handler", [SharedCount, SharedCountOne])
def test_a_partition_named_without_input_commits_its_outputs_and_state(handler):
    bus = InMemoryBus()
    bus.create_topics([TopicSpec(IN, 2), TopicSpec(OUT, 1), TopicSpec("changelog", 2),
                       TopicSpec("checkpoints", 1)])
    loop = shared_count_loop(bus, handler)
    bus.producer().produce([OutRecord(IN, b"x", None, partition=1) for _ in range(3)])
    while loop.run_once():
        pass
    loop.commit()
    # partition 0 read nothing, yet its transaction holds the output: committed
    assert committed_outputs(bus) == [b"3"]
    assert not loop.pending()
    loop.close()
    # ... and so does its checkpoint: a new owner goes on from 3 without replay
    again = shared_count_loop(bus, handler)
    assert again.handler.count == 3  # type: ignore[attr-defined]
    bus.producer().produce([OutRecord(IN, b"x", None, partition=1)])
    while again.run_once():
        pass
    again.commit()
    assert committed_outputs(bus) == [b"3", b"4"]
    again.close()


@pytest.fixture(scope="module")
def hyreminder() -> tuple[ServiceConfig, list[dict[str, Any]], list[tuple]]:
    plan = compile_model(MODEL.read_text(encoding="utf-8"))
    events = list(generate(HygieneConfig(workers=12, hours=3, seed=3, sanitize_before=0.6,
                                         sanitize_after=0.6)))
    want = sorted(a.identity() for a in EmbeddedPipeline(plan).run_values(events).alerts)
    assert len(want) > 10
    cfg = ServiceConfig(plan, TopicSettings(partitions=2), make_codec(), (0, 1), "t")
    return cfg, events, want


def test_hyreminder_over_two_partitions_in_small_batches_equals_embedded(hyreminder):
    """Small batches: the last watermarks reach the acep service in a batch of
    partition 1 alone, and what they release must still go out."""
    cfg, events, want = hyreminder
    bus = InMemoryBus()
    pipe = BusPipeline(cfg, bus, poll_timeout_s=0.0, commit_interval_s=0.0, batch_size=50)
    produce_inputs(bus, cfg, events, end=True)
    pipe.run_until_quiet(quiet_s=0.3)
    assert sorted(a.identity() for a in read_alerts(bus, cfg)) == want
    pipe.close()


def test_a_restarted_acep_loop_restores_tables_moved_by_either_partition(hyreminder):
    cfg, events, want = hyreminder
    bus = InMemoryBus()
    options = {"poll_timeout_s": 0.0, "commit_interval_s": 0.0, "batch_size": 50}
    pipe = BusPipeline(cfg, bus, **options)
    half = len(events) // 2
    produce_inputs(bus, cfg, events[:half])
    # ShiftEnd has not spoken yet and holds the release back: a watermark at
    # the cut releases the first half (the input is in time order)
    produce_end(bus, cfg, events[half]["ts"])
    pipe.run_until_quiet(quiet_s=0.3)
    assert read_alerts(bus, cfg)
    # the acep service "crashes" after its last commit; a new loop restores it
    old = pipe.loops["acep"]
    assert old.consumer is not None
    old.consumer.close()
    scfg = ServiceConfig(**{**cfg.__dict__, "actor_id": "acep-t"})
    pipe.loops["acep"] = make_loop("acep", scfg, bus, **options)
    pipe.loops["acep"].start()
    assert set(pipe.loops["acep"].stats.restored_from) == {
        f"{cfg.routed_topic}[0]", f"{cfg.routed_topic}[1]"}
    produce_inputs(bus, cfg, events[half:], end=True)
    pipe.run_until_quiet(quiet_s=0.3)
    # exactly once: every commit was complete, so nothing repeats or is lost
    assert sorted(a.identity() for a in read_alerts(bus, cfg)) == want
    pipe.close()


def test_the_acep_handler_shows_the_tables_of_its_last_checkpoint(hyreminder):
    """`caesar tables` asks AcepHandler.tables(): the rows of the newest
    checkpoint written, not those of batches run since (they may still be
    rolled back), the same rows again after a restore, and at the end the
    embedded pipeline's final tables."""
    from caesar.cli.tables_view import rows_in_key_order

    cfg, events, _ = hyreminder
    embedded = EmbeddedPipeline(cfg.plan)
    embedded.run_values(events)
    assert embedded.acep is not None
    final = rows_in_key_order(embedded.acep.tables())
    bus = InMemoryBus()
    options = {"poll_timeout_s": 0.0, "commit_interval_s": 0.0, "batch_size": 50}
    pipe = BusPipeline(cfg, bus, **options)
    acep = pipe.loops["acep"]
    fresh = acep.handler.tables()  # type: ignore[attr-defined]
    assert fresh["ts"] is None and fresh["tables"] == {"hygiene": [], "violations": []}
    half = len(events) // 2
    produce_inputs(bus, cfg, events[:half])
    produce_end(bus, cfg, events[half]["ts"])
    pipe.run_until_quiet(quiet_s=0.3)
    handler: Any = acep.handler
    first = handler.tables()
    assert first["ts"] == handler.acep.done_ts is not None
    assert first["tables"] == rows_in_key_order(handler.acep.tables()) != fresh["tables"]
    # The rest runs through the acep service without a commit: not shown yet.
    acep.commit_interval_s = 3600.0
    produce_inputs(bus, cfg, events[half:], end=True)
    others = [loop for name, loop in pipe.loops.items() if name != "acep"]
    for _ in range(1000):
        moved = sum(loop.run_once() for loop in others) + acep.run_once()
        for loop in others:
            if loop.pending():
                loop.commit()
                moved += 1
        if not moved:
            break
    assert acep.pending() and rows_in_key_order(handler.acep.tables()) == final
    assert handler.tables() == first
    acep.commit()
    assert handler.tables()["tables"] == final and handler.tables()["ts"] > first["ts"]
    # A restarted acep service shows what its checkpoint holds.
    assert acep.consumer is not None
    acep.consumer.close()
    scfg = ServiceConfig(**{**cfg.__dict__, "actor_id": "acep-t"})
    again = make_loop("acep", scfg, bus, **options)
    again.start()
    assert again.handler.tables() == handler.tables()  # type: ignore[attr-defined]
    again.close()
    pipe.close()


@pytest.fixture(scope="module")
def counter() -> tuple[ServiceConfig, list[dict[str, Any]], list[tuple], dict[str, list]]:
    import random

    from caesar.cli.tables_view import rows_in_key_order

    plan = compile_model(COUNTER)
    rng = random.Random(1)
    events = [{"type": "Ping", "ts": t, "unit": rng.randrange(16), "v": rng.randrange(100)}
              for t in range(1, 601)]
    embedded = EmbeddedPipeline(plan)
    want = sorted(a.identity() for a in embedded.run_values(events).alerts)
    assert len(want) == 600 and embedded.acep is not None
    cfg = ServiceConfig(plan, TopicSettings(partitions=2), make_codec(), (0, 1), "t")
    return cfg, events, want, rows_in_key_order(embedded.acep.tables())


@pytest.mark.parametrize(("method", "at", "after"), [
    ("commit_transaction", 1, True), ("commit_transaction", 3, True),
    ("commit_transaction", 5, True), ("commit_transaction", 9, True),
    ("commit_transaction", 4, False), ("send_offsets_to_transaction", 5, True),
    ("produce", 6, False)])
def test_a_crash_inside_an_acep_commit_loses_and_repeats_nothing(counter, method, at, after):
    """The acep service dies at a point of a commit mid-stream (batches over
    both partitions), its restarted loop goes on: the derived events and the
    final tables equal the embedded run's (serial execution). With a
    transaction per partition, a crash after partition 0's commit (tables
    and outputs in it) and before partition 1's failed this (e.g. the fifth
    commit: 650 outputs of 600, wrong counts): partition 1's input was
    replayed into tables that had seen it."""
    from caesar.cli.tables_view import rows_in_key_order

    cfg, events, want, final = counter
    bus = InMemoryBus()
    options = {"poll_timeout_s": 0.0, "commit_interval_s": 0.0, "batch_size": 50}
    pipe = BusPipeline(cfg, bus, **options)
    scfg = ServiceConfig(**{**cfg.__dict__, "actor_id": "acep-t"})
    pipe.loops["acep"].close()
    pipe.loops["acep"] = make_loop("acep", scfg, CrashingBus(bus, method, at, after), **options)
    pipe.loops["acep"].start()
    produce_inputs(bus, cfg, events, end=True)
    with pytest.raises(Crash):
        pipe.run_until_quiet(quiet_s=0.3)
    crashed = pipe.loops["acep"]
    assert crashed.consumer is not None
    crashed.consumer.close()
    pipe.loops["acep"] = make_loop("acep", scfg, bus, **options)
    pipe.loops["acep"].start()
    pipe.run_until_quiet(quiet_s=0.3)
    have = sorted(a.identity() for a in read_alerts(bus, cfg))
    assert len(have) == len(want) and have == want
    handler: Any = pipe.loops["acep"].handler
    assert rows_in_key_order(handler.acep.tables()) == final
    pipe.close()


def test_one_transaction_fences_the_owners_of_each_partition_and_of_the_group():
    """The group's producer fences an earlier instance of the group (a zombie
    of the restarted actor) and, opening the per-partition ids once, an
    owner of a partition from a per-partition layout: their open
    transactions are aborted and nothing of them becomes visible."""
    from caesar.bus.errors import ProducerFencedError

    bus = InMemoryBus()
    bus.create_topics([TopicSpec(IN, 2), TopicSpec(OUT, 1), TopicSpec("changelog", 2),
                       TopicSpec("checkpoints", 1)])
    zombies = [bus.producer(transactional_id=tid) for tid in ("shared-1", "shared-g0")]
    for z in zombies:
        z.begin_transaction()
        z.produce([OutRecord(OUT, b"zombie", None, partition=0)])
    loop = shared_count_loop(bus)
    assert set(loop.producers) == {0}
    assert loop.transactional_id(0) == "shared-g0"
    for z in zombies:
        with pytest.raises(ProducerFencedError):
            z.commit_transaction()
    bus.producer().produce([OutRecord(IN, b"x", None, partition=j) for j in (0, 1)])
    while loop.run_once():
        pass
    loop.commit()
    assert committed_outputs(bus) == [b"2"]
    loop.close()
