"""The runner loop every service shares: poll a batch from the bus, hand it
to the service's handler (decode -> processors -> encode), produce the
outputs, and commit exactly once.

Each Kafka partition j a runner owns has its own transactional producer
(id = service + j, whichever actor owns j: a new owner fences the old one
and aborts its open transaction, so regrouping partitions across actors is
safe), and each commit is one Kafka transaction per partition that changed:

    0. a transaction is open from the first output after the last commit
    1. outputs produced (queued in the transaction as they are made)
    2. changelog: partition j's state, naming the input offsets it covers
    3. input offsets: send_offsets_to_transaction (the consumer group's)
    4. commit_transaction: 1-3 become visible together, or none of them

Consumers read committed data only, so a crash anywhere before step 4 leaves
nothing behind: the next owner of j restores j's last committed state and
resumes its inputs at the offsets that state covers. A failed commit does
the same in-process (abort, rewind, go on) instead of restarting the actor.

A handler whose state is shared by all its partitions (`one_transaction`:
the acep service's tables) cannot commit them one after another: a crash
between two of those commits would replay the later partitions' input into
state that already saw it. Its loop commits the whole group in ONE
transaction instead (one producer, id = service + "g" + the lowest
partition): steps 1-4 with every changed partition's checkpoint and every
input partition's offsets. Each checkpoint still goes to its partition's
changelog and names the group it was written by; a restore by a different
grouping is refused (StoreError), since the shared state covers the old
group's inputs.

Checkpoints every `checkpoint_interval_s` instead of every commit: a handler
whose outputs and state are a function of its input records, in offset order
per input partition, whatever the batches (`replayable = True`: the deriver
and the matcher, docs/operations.md "Determinism"), commits outputs and
offsets only, and writes partition j's state once per interval, in a
transaction of its own right after an outputs' commit (its first state goes
with its first commit: there is nothing older to replay from). The state's
offsets thus trail the group's committed ones. A restore loads the state and
replays the inputs from the offsets it covers up to the committed ones with
their outputs dropped (they are committed already), which brings the state to
the committed offsets, and goes on from there. A partition is checkpointed at
its first commit after a restore that replayed it, so a replay never grows
beyond about one interval's input.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from caesar.bus.errors import BusError, ProducerFencedError
from caesar.bus.protocol import Bus, BusConsumer, BusProducer
from caesar.bus.records import OutRecord, Record, TopicPartition
from caesar.bus.retire import retire
from caesar.services.common.collector import Sweeper, collector_paused, settle
from caesar.services.common.config import DEFAULT_CHECKPOINT_SHARE
from caesar.services.common.latency import LatencyHistogram
from caesar.services.store.checkpoint import StateStore, StoreError

log = logging.getLogger(__name__)


class Handler(Protocol):
    """State is kept per Kafka partition j of the service's inputs (a keyed
    store: key = service + j), so an actor owning other partitions after a
    regrouping restores exactly the state of the partitions it got.

    A handler may set `one_transaction = True`: its partitions share state
    (kept in the lowest one's checkpoint), so the loop commits all of them
    in one Kafka transaction and refuses to restore them in another
    grouping."""

    def inputs(self) -> list[TopicPartition]: ...

    def handle(self, records: Sequence[Record]) -> Mapping[int, list[OutRecord]]:
        """Outputs by the partition j whose transaction they go out in. Every
        partition named (even with no outputs) has changed state and commits,
        whether or not it read anything in `records`: a handler whose state
        for all partitions lives with one of them (the acep service's tables)
        names that one too."""
        ...

    def partition_inputs(self, j: int) -> list[TopicPartition]: ...

    def snapshot_partition(self, j: int) -> Any: ...

    def restore_partition(self, j: int, state: Any) -> None: ...

    def event_time(self) -> int: ...

    # replayable: bool  (optional) outputs and state are a function of the
    # input records per partition in offset order, not of the batches: the
    # loop may checkpoint every `checkpoint_interval_s` and replay the rest


@dataclass
class LoopStats:
    records_in: int = 0
    records_out: int = 0
    batches: int = 0
    commits: int = 0
    commit_s: float = 0.0  # wall seconds spent in commits (snapshot, changelog, commit)
    aborts: int = 0
    recoveries: int = 0
    # The newest checkpoint of each partition this loop owns, summed (compressed
    # bytes as written to the changelog): the state it would restore now.
    state_bytes: int = 0
    restore_s: float = 0.0  # how long the last restore took
    restore_records: int = 0  # changelog records (and bytes) the last restore read
    restore_bytes: int = 0
    restored_from: dict[str, int] = field(default_factory=dict)
    checkpoints: int = 0  # partition states written
    checkpoint_s: float = 0.0  # wall seconds spent writing them (snapshot, encoding, commit)
    # input records handled again after a restore, their outputs dropped
    # (the state's offsets trailed the committed ones: checkpoint_interval_s)
    replayed: int = 0
    # How long the oldest record of each batch waited between the previous hop
    # producing it (its Kafka timestamp) and this loop handling it.
    hop_ms: LatencyHistogram = field(default_factory=LatencyHistogram)


# Bytes of record values a loop hands its handler at once (loop._take).
DEFAULT_BATCH_BYTES = 262_144


class ServiceLoop:
    def __init__(self, *, bus: Bus, group_id: str, transactional_prefix: str,
                 handler_factory: Callable[[], Handler], partitions: Sequence[int],
                 store: StateStore | None = None, batch_size: int = 2000,
                 poll_timeout_s: float = 0.2, commit_interval_s: float = 1.0,
                 max_failed_commits: int = 20, max_commit_share: float = 0.25,
                 max_open_s: float | None = None, checkpoint_interval_s: float = 0.0,
                 max_checkpoint_share: float = DEFAULT_CHECKPOINT_SHARE,
                 max_batch_bytes: int = DEFAULT_BATCH_BYTES) -> None:
        self.bus = bus
        self.group_id = group_id
        self.transactional_prefix = transactional_prefix
        self.handler_factory = handler_factory
        self.partitions = tuple(partitions)
        self.store = store
        self.batch_size = batch_size
        # A batch handed to the handler holds at most this many bytes of values
        # (at least one record); the rest of a poll waits for the next step.
        # An internal record carries up to 20,000 rows, so a loop behind its
        # input polled minutes of work at once (a matcher at 4 expressways:
        # 4 commits in 2 minutes), and nothing became visible until it was done.
        self.max_batch_bytes = max_batch_bytes
        self._held: list[Record] = []  # polled, not handled yet (replaced, never mutated)
        self.poll_timeout_s = poll_timeout_s
        self.commit_interval_s = commit_interval_s
        # A commit snapshots every changed partition's whole state: when that
        # takes long (big state), commits are spaced so that they use at most
        # this share of the loop's time, else a loop behind its input would
        # commit after every batch and spend most of its CPU on snapshots.
        self.max_commit_share = max_commit_share
        self._commit_cost = 0.0  # seconds the last commit took
        # The spacing never keeps a transaction open past this: the broker
        # aborts one open longer than its transaction.timeout.ms, and a commit
        # that took long once (a broker restart: 12 s) spaced the next ones
        # past a 10 s timeout, each aborted in turn, for good.
        self.max_open_s = max_open_s
        self._opened_at = 0.0  # when the oldest open transaction began
        self.max_failed_commits = max_failed_commits
        self.handler: Handler = handler_factory()
        self.plan_book: Any = None  # the actor's PlanBook (model upgrades), set by make_loop
        self.inputs = list(self.handler.inputs())
        self.one_transaction = bool(getattr(self.handler, "one_transaction", False))
        # Partition states go out at most once per interval (0: with every
        # commit); only a replayable handler can catch up from an older state.
        # (One input per partition: the order of records across two inputs is
        # not the same on a replay, and a function of it is not replayable.)
        replayable = (bool(getattr(self.handler, "replayable", False))
                      and not self.one_transaction
                      and all(len(self.handler.partition_inputs(j)) == 1 for j in partitions))
        self.checkpoint_interval_s = checkpoint_interval_s if replayable else 0.0
        self._checkpointed_at: dict[int, float] = {}  # partition -> its last state write
        # A partition's state goes out once per interval, and each write stops
        # the loop while the state is copied out of the engine (a Linear Road
        # matcher partition: ~0.1 s per 10 MB). The interval stretches so that
        # writing them all takes at most this share of the loop's time (like
        # Flink's minimum pause between checkpoints); a restore then replays
        # correspondingly more input.
        self.max_checkpoint_share = max_checkpoint_share
        self._checkpoint_cost: dict[int, float] = {}  # partition -> its last write's seconds
        self._replay_to: dict[TopicPartition, int] = {}  # input -> the committed offset
        self._behind: set[int] = set()  # committed since their last state write
        self.sweeper = Sweeper()
        self._input_at = time.monotonic()  # when the last input was handled
        self._restored: set[int] = set()  # partitions the last restore found a state for
        self._stated: set[int] = set()  # partitions with a state (restored or written)
        # Producers (and open transactions) by transaction key: the partition
        # j, or with one_transaction the group's lowest partition for all.
        self.producers: dict[int, BusProducer] = {}
        self.consumer: BusConsumer | None = None
        self.positions: dict[TopicPartition, int] = {}
        self.stats = LoopStats()
        self._last_commit = time.monotonic()
        self._open: set[int] = set()  # transaction keys with an open transaction
        self._dirty: set[int] = set()  # partitions whose state changed since the commit
        self._owner = {tp: j for j in self.partitions
                       for tp in self.handler.partition_inputs(j)}
        self._failed_commits = 0
        self._positions_seen: dict[TopicPartition, int | None] = {}
        self._positions_at = 0.0
        self._state_sizes: dict[int, int] = {}  # partition -> its newest checkpoint
        self.beat = time.monotonic()  # when the current step began (watchdog.py)

    def _key(self, j: int) -> int:
        """The transaction partition j's outputs, state and offsets go in."""
        return min(self.partitions) if self.one_transaction else j

    def transactional_id(self, key: int) -> str:
        if self.one_transaction:
            return f"{self.transactional_prefix}-g{key}"
        return f"{self.transactional_prefix}-{key}"

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        # A transactional producer per partition fences any older owner of it
        # (a zombie of a restarted actor, or the actor that had it before a
        # regrouping) and aborts that owner's open transaction.
        if self.one_transaction:
            # One producer for the group; the per-partition ids are still
            # opened once, to fence an owner from a per-partition layout.
            for j in self.partitions:
                self.bus.producer(transactional_id=f"{self.transactional_prefix}-{j}").close()
        for key in sorted({self._key(j) for j in self.partitions}):
            self.producers[key] = self.bus.producer(transactional_id=self.transactional_id(key))
            self.beat = time.monotonic()  # each is bounded: the watchdog times each
        self.consumer = self.bus.consumer(self.group_id)
        self._restore()

    def _restore(self) -> None:
        """Fresh handler, each partition's last committed state, inputs from
        the offsets it covers (else the group's committed offsets, else 0)."""
        assert self.consumer is not None
        started = time.monotonic()
        self.handler = self.handler_factory()
        self.stats.restored_from = {}
        offsets = self._load_states()
        self._replay_to = {}
        if len(offsets) < len(self.inputs) or self.checkpoint_interval_s > 0:
            committed = self._committed()
            for tp in self.inputs:
                done = committed.get(tp)
                if tp not in offsets:
                    offsets[tp] = done or 0
                elif done is not None and done > offsets[tp]:
                    # the state is older than the outputs already committed
                    self._replay_to[tp] = done
        # A partition without an entry writes its state at its next commit:
        # one never checkpointed, or replayed (so the next replay is short).
        now = time.monotonic()
        replaying = {self._owner[tp] for tp in self._replay_to}
        self._checkpointed_at = {j: now for j in self.partitions
                                 if j in self._restored and j not in replaying}
        self._behind = set()
        self._stated = set(self._restored)
        if self._replay_to:
            log.info("%s replays %d records to the committed offsets (outputs dropped)",
                     self.transactional_prefix,
                     sum(self._replay_to[tp] - offsets[tp] for tp in self._replay_to))
        self.positions = dict(offsets)
        self.consumer.assign(self.inputs, offsets)
        self._held = []  # polled before the rewind: read again
        self._dirty = set()
        self._open = set()
        self._last_commit = time.monotonic()
        self.stats.restore_s = time.monotonic() - started
        if self.stats.restored_from:
            log.info("%s restored in %.2f s; resuming at %s", self.transactional_prefix,
                     self.stats.restore_s, self.stats.restored_from)

    def _check_group(self, j: int) -> None:
        """State shared by a group of partitions restores only into that group."""
        assert self.store is not None
        group = self.store.groups.get(j)
        if group is None or tuple(group) == self.partitions:
            return  # the same group (None: written before groups were recorded)
        raise StoreError(
            f"{self.transactional_prefix}: the checkpoint of partition {j} was written by an "
            f"actor owning partitions {list(group)}, this one owns {list(self.partitions)}; "
            "its state is shared by all of that actor's partitions and cannot be split or "
            "merged. Deploy with the partition count (and grouping) it was written with, or "
            f"start from empty state: delete the topic {self.store.changelog_topic} and reset "
            f"the consumer group {self.group_id!r}")

    def _load_states(self) -> dict[TopicPartition, int]:
        """Each partition's last committed state into the handler; the input
        offsets those states cover."""
        offsets: dict[TopicPartition, int] = {}
        self._restored = set()
        if self.store is None:
            return offsets
        self.store.reset_read_counts()
        for j in self.partitions:
            self.beat = time.monotonic()  # a big restore moves on partition by partition
            with collector_paused():
                loaded = self.store.load(j)
            if loaded is None:
                continue
            state, covers = loaded
            if self.one_transaction:
                self._check_group(j)
            with collector_paused():
                self.handler.restore_partition(j, state)
            self._restored.add(j)
            for tp in self.handler.partition_inputs(j):
                if tp in covers:
                    offsets[tp] = covers[tp]
                    self.stats.restored_from[f"{tp.topic}[{tp.partition}]"] = covers[tp]
        self.stats.restore_records = self.store.read_records
        self.stats.restore_bytes = self.store.read_bytes
        return offsets

    def lag(self) -> int:
        """Records in the inputs not handled yet (end offsets - positions; the
        consumer's position counts transaction markers it has skipped)."""
        end = self.bus.end_offsets(self.inputs)
        seen = self._positions_seen  # (the consumer is not to be called from other threads)
        held: dict[TopicPartition, int] = {}  # polled, not handled: the consumer is past them
        for r in self._held:
            held.setdefault(r.topic_partition, r.offset)
        return sum(max(0, end[tp] - (held[tp] if tp in held
                                     else max(self.positions.get(tp, 0), seen.get(tp) or 0)))
                   for tp in self.inputs)

    def _committed(self, timeout_s: float = 60.0) -> dict[TopicPartition, int | None]:
        """Committed offsets; a group coordinator still loading is waited out.
        A consumer whose request timed out is replaced: after a broker pause
        librdkafka's consumer can keep a dead coordinator connection, and its
        committed() then times out again and again (60 s here, until the actor
        restarted), while a new consumer gets the answer at once."""
        assert self.consumer is not None
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.consumer.committed(self.inputs, timeout_s=5.0)
            except BusError as exc:
                if time.monotonic() > deadline:
                    raise
                log.warning("%s: %s; starting a new consumer", self.transactional_prefix, exc)
                self._replace_consumer()
                time.sleep(0.5)

    def _replace_consumer(self) -> None:
        """A new consumer in the group (assigned by the caller); the old one is
        retired aside, since closing can block on the coordinator it lost."""
        if self.consumer is not None:
            retire(self.consumer, self.group_id)
        self.consumer = self.bus.consumer(self.group_id)

    # ------------------------------------------------------------ running
    def run_once(self, wait: bool = True) -> int:
        """One step; `wait=False` polls without waiting (a driver of several
        loops in one thread, where another loop may have work)."""
        assert self.consumer is not None
        self.beat = time.monotonic()  # for the watchdog: a step began
        settle()  # the last step's survivors, unwalked (collector.settle)
        produced = self._control()
        if produced < 0:
            return 0
        records = self._take(self.poll_timeout_s if wait else 0.0)
        if time.monotonic() - self._positions_at > 1.0:  # for lag(), read by other threads
            self._positions_seen = self.consumer.position(self.inputs)
            self._positions_at = time.monotonic()
        if records and self._replay_to:
            records = self._replay(records)
        if records:
            self.stats.hop_ms.observe(time.time() * 1000 - min(r.timestamp_ms for r in records))
            outputs = self.handler.handle(records)
            for r in records:
                tp = r.topic_partition
                self.positions[tp] = r.offset + 1
                self._dirty.add(self._owner.get(tp, r.partition))
            self.stats.records_in += len(records)
            self.stats.batches += 1
            self._input_at = time.monotonic()
            # A partition named may have read nothing (its state or transaction
            # took another's work): it commits all the same, else its open
            # transaction, and what went out in it, would stay invisible.
            self._dirty.update(outputs)
            for j, out in outputs.items():
                if out and not self._produce(j, out):
                    return len(records)  # rewound to the last commit: the rest is void
                produced += len(out)
        if self._dirty and self.commit_due(time.monotonic()):
            self.commit()
        elif not records and not self._dirty:
            self._checkpoint_idle()
            self._sweep_idle()
        return len(records) + produced  # anything moved

    def _sweep_idle(self) -> None:
        """Now and then, in a lull of the input, a full collection (collector.Sweeper)."""
        started = time.monotonic()
        found = self.sweeper.maybe(started - self._input_at)
        if found is not None:
            log.debug("%s: full collection found %d unreachable objects in %.2f s",
                      self.transactional_prefix, found, time.monotonic() - started)

    def _take(self, timeout_s: float) -> list[Record]:
        """The next batch: what the last poll left, else a new poll; cut at
        `max_batch_bytes` of values."""
        assert self.consumer is not None
        records = self._held or list(self.consumer.poll(self.batch_size, timeout_s))
        self._held = []
        size = 0
        for i, r in enumerate(records):
            size += len(r.value or b"")
            if size > self.max_batch_bytes and i > 0:
                records, self._held = records[:i], records[i:]
                break
        return records

    def _control(self) -> int:
        """The handler's own outputs (e.g. the scheduler starting a model
        upgrade): how many, or -1 when producing failed."""
        produced = 0
        control = getattr(self.handler, "control", None)
        if control is not None:
            for j, out in control().items():
                self._dirty.add(j)
                if out and not self._produce(j, out):
                    return -1
                produced += len(out)
        return produced

    def _replay(self, records: Sequence[Record]) -> list[Record]:
        """Hand the records below the committed offsets to the handler and drop
        their outputs (committed before the restore); the rest, live."""
        replay: list[Record] = []
        live: list[Record] = []
        for r in records:
            target = self._replay_to.get(r.topic_partition)
            (replay if target is not None and r.offset < target else live).append(r)
        for r in live:  # past the committed offset (transaction markers lie between)
            self._replay_to.pop(r.topic_partition, None)
        if replay:
            self.handler.handle(replay)
            for r in replay:
                self.positions[r.topic_partition] = r.offset + 1
            self.stats.replayed += len(replay)
        return live

    def commit_due(self, now: float) -> bool:
        """The interval has passed, and the time since the last commit is at
        least what keeps commits within `max_commit_share` of the time; or an
        open transaction is `max_open_s` old. An interval of 0 asks for a
        commit after every batch, whatever it costs."""
        if self.commit_interval_s <= 0:
            return True
        if (self._open and self.max_open_s is not None
                and now - self._opened_at >= self.max_open_s):
            return True
        spacing = self._commit_cost * (1.0 / self.max_commit_share - 1.0)
        return now - self._last_commit >= max(self.commit_interval_s, spacing)

    def _begin(self, j: int) -> BusProducer:
        key = self._key(j)
        if key not in self._open:
            if self.producers[key].connection_lost():
                # A producer that lived through a broker restart or pause
                # blocked 20 s (the bound) in its next send_offsets, one hop
                # after the other; a new one (fencing it) does not.
                log.info("%s lost its broker connection; starting a new producer",
                         self.transactional_id(key))
                self._replace_producer(key)
            self.producers[key].begin_transaction()  # step 0
            if not self._open:
                self._opened_at = time.monotonic()
            self._open.add(key)
        return self.producers[key]

    def _produce(self, j: int, outputs: list[OutRecord]) -> bool:
        """False when producing failed and the loop rewound to the last commit."""
        try:
            self._begin(j).produce(outputs)  # step 1
        except BusError as exc:
            log.warning("%s: producing failed (%s): rewinding to the last commit",
                        self.transactional_id(self._key(j)), exc)
            self._failed(fatal=isinstance(exc, ProducerFencedError))
            return False
        self.stats.records_out += len(outputs)
        return True

    def pending(self) -> bool:
        """Has anything been processed since the last commit?"""
        return bool(self._dirty)

    def commit(self) -> None:
        """Steps 2-4 for every partition that changed (all in one transaction
        with one_transaction, else one per partition); on failure abort and
        rewind to the last commit. With a checkpoint interval, a state that is
        due goes out after the outputs' commit, in a transaction of its own
        (one partition per commit), so no output waits for a snapshot."""
        if not self._dirty:
            return
        assert self.consumer is not None
        group = self.partitions if self.one_transaction else None
        started = time.monotonic()
        written: list[int] = []
        committed: list[int] = []
        after: list[int] = []  # states due, written once the outputs are committed
        try:
            ts = self.handler.event_time()
            for key in sorted({self._key(j) for j in self._dirty}):
                producer = self._begin(key)
                members = [j for j in sorted(self._dirty) if self._key(j) == key]
                offsets: dict[TopicPartition, int] = {}
                for j in members:
                    covers = self._covers(j)
                    offsets.update(covers)
                    if self.store is None or not self._checkpoint_due(j, started):
                        continue
                    if self.checkpoint_interval_s > 0 and j in self._stated:
                        after.append(j)  # an older state and a replay cover j meanwhile
                        continue
                    # 2. changelog: partition j's state, with the offsets it covers
                    self._write_state(producer, j, covers, ts, group)
                    written.append(j)
                # 3. their input offsets, in the same transaction
                producer.send_offsets_to_transaction(offsets, self.consumer, timeout_s=10.0)
                # 4. all of it visible at once
                producer.commit_transaction()
                self._open.discard(key)
                self._dirty.difference_update(members)
                committed += members
            outputs_s = time.monotonic() - started
            if after:  # the most overdue; the others at the next commits
                j = min(after, key=lambda j: self._checkpointed_at.get(j, -1.0))
                self._checkpoint(j, ts)
                written.append(j)
            self.stats.state_bytes = sum(self._state_sizes.values())
        except ProducerFencedError as exc:
            log.warning("%s: %s", self.transactional_prefix, exc)
            self._failed(fatal=True)
            return
        except BusError as exc:  # TransactionAbortedError and the rest
            log.warning("%s: commit failed (%s): aborting, rewinding to the last commit",
                        self.transactional_prefix, exc)
            self._failed(fatal=False)
            return
        self._failed_commits = 0
        self._behind.update(committed)
        self._wrote(written, started)
        self._last_commit = time.monotonic()
        # The spacing follows what the outputs waited for; a checkpoint after
        # them is bounded by the checkpoint interval instead.
        self._commit_cost = outputs_s
        self.stats.commits += 1
        self.stats.commit_s += self._last_commit - started

    def _covers(self, j: int) -> dict[TopicPartition, int]:
        """The input offsets partition j's state covers now."""
        return {tp: self.positions[tp] for tp in self.handler.partition_inputs(j)
                if tp in self.positions}

    def _write_state(self, producer: BusProducer, j: int, covers: dict[TopicPartition, int],
                     ts: int, group: tuple[int, ...] | None) -> None:
        assert self.store is not None
        started = time.perf_counter()
        with collector_paused():
            state = self.handler.snapshot_partition(j)
            self._state_sizes[j] = self.store.write(producer, j, state, covers, ts, group=group)
            del state
        self._checkpoint_cost[j] = 0.0  # this write's cost, not the sum of all so far
        self._spent(j, time.perf_counter() - started)

    def _spent(self, j: int, seconds: float) -> None:
        self._checkpoint_cost[j] += seconds
        self.stats.checkpoint_s += seconds

    def _checkpoint(self, j: int, ts: int) -> None:
        """Partition j's state alone in a transaction, covering the offsets
        just committed (nothing was handled in between)."""
        key = self._key(j)
        producer = self._begin(key)
        self._write_state(producer, j, self._covers(j), ts, None)
        started = time.perf_counter()
        producer.commit_transaction()
        self._spent(j, time.perf_counter() - started)
        self._open.discard(key)

    def _checkpoint_idle(self) -> None:
        """With no input, write the most overdue state that trails its commits
        (one per idle step). Otherwise every state falls due in the idle time
        and the first commits after it each carry one, just as input resumes."""
        if self.store is None or self.checkpoint_interval_s <= 0 or self._open or self._replay_to:
            return
        now = time.monotonic()
        due = [j for j in self._behind if self._checkpoint_due(j, now)]
        if not due:
            return
        j = min(due, key=lambda j: self._checkpointed_at.get(j, -1.0))
        try:
            self._checkpoint(j, self.handler.event_time())
        except ProducerFencedError as exc:
            log.warning("%s: %s", self.transactional_prefix, exc)
            self._failed(fatal=True)
            return
        except BusError as exc:
            log.warning("%s: idle checkpoint failed (%s): rewinding to the last commit",
                        self.transactional_prefix, exc)
            self._failed(fatal=False)
            return
        self._wrote([j], now)

    def _wrote(self, written: list[int], at: float) -> None:
        for j in written:
            self._checkpointed_at[j] = at
        self._stated.update(written)
        self._behind.difference_update(written)
        self.stats.checkpoints += len(written)

    def _checkpoint_due(self, j: int, now: float) -> bool:
        """Does partition j's state go out with this commit? Every commit
        without an interval; else its first, its first after a replay, and
        then one per `checkpoint_interval`."""
        if self.checkpoint_interval_s <= 0:
            return True
        last = self._checkpointed_at.get(j)
        return last is None or now - last >= self.checkpoint_interval()

    def checkpoint_interval(self) -> float:
        """Seconds between two writes of a partition's state: the configured
        interval, or longer if writing every partition's state once (as long
        as each last took) would exceed `max_checkpoint_share` of it."""
        if self.max_checkpoint_share <= 0:
            return self.checkpoint_interval_s
        return max(self.checkpoint_interval_s,
                   sum(self._checkpoint_cost.values()) / self.max_checkpoint_share)

    def _failed(self, fatal: bool) -> None:
        """Give up every open transaction and restore the last committed
        state. An open transaction is aborted by a new producer with its id
        (init_transactions fences the old one and aborts what it had open),
        not by abort_transaction: after a broker pause or restart the old
        producer's coordinator state is stale, an abort can wait out its whole
        timeout, and the next commit's send_offsets blocked 20 s (seen with
        kill -9 of the broker). A fenced producer (fatal) takes every producer
        with it; from the second failure in a row on, the consumer is new too."""
        self._failed_commits += 1
        self.stats.aborts += 1
        self._commit_cost = 0.0  # what a commit before the failure cost says nothing now
        self.beat = time.monotonic()  # recovering is a step of its own (bounded calls)
        if self._failed_commits > self.max_failed_commits:
            raise BusError(f"{self.transactional_prefix}: {self._failed_commits} commits in a "
                           "row failed; giving up (the actor restarts)")
        time.sleep(min(0.05 * 2 ** self._failed_commits, 5.0))
        if self._failed_commits >= 2:
            log.warning("%s: %d commits in a row failed; starting a new consumer",
                        self.transactional_prefix, self._failed_commits)
            self._replace_consumer()
        for key in list(self.producers if fatal else self._open):
            self._replace_producer(key)
        self.stats.recoveries += 1
        self._restore()

    def _replace_producer(self, key: int) -> None:
        """A new producer with the same id (fencing the old one and aborting
        its open transaction); the old one is retired aside: destroying a
        producer that lost its coordinator can block."""
        retire(self.producers.pop(key), self.transactional_id(key))
        self.producers[key] = self.bus.producer(transactional_id=self.transactional_id(key))

    def run(self, should_stop: Callable[[], bool], max_idle_s: float | None = None) -> None:
        self.beat = time.monotonic()
        self.start()
        idle_since = time.monotonic()
        while not should_stop():
            if self.run_once():
                idle_since = time.monotonic()
            elif max_idle_s is not None and time.monotonic() - idle_since > max_idle_s:
                break
        self.checkpoint_all()

    def checkpoint_all(self) -> None:
        """Commit, then write every state that trails its commits (a graceful
        stop: the next owner restores without replaying)."""
        self.commit()
        if self._dirty or self._replay_to or self.store is None:
            return  # the commit failed, or a replay is not finished
        started = time.monotonic()
        try:
            ts = self.handler.event_time()
            for j in sorted(self._behind):
                self._checkpoint(j, ts)
                self._wrote([j], started)
        except BusError as exc:
            log.warning("%s: final checkpoint failed (%s): the next owner replays",
                        self.transactional_prefix, exc)

    def close(self) -> None:
        try:
            for key in list(self._open):
                with contextlib.suppress(BusError):
                    self.producers[key].abort_transaction()
        finally:
            if self.consumer is not None:
                self.consumer.close()
            for producer in self.producers.values():
                producer.close()
