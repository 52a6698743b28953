"""Checkpoints every interval instead of every commit (loop.py): the commits in
between carry outputs and offsets only, and a restore replays the inputs from
the state's offsets to the committed ones with their outputs dropped. A
deriver or matcher rebuilt at any point must then neither lose nor repeat an
output, and its replay must stay within one interval's input."""

import random
import time

from hypothesis import given, settings
from hypothesis import strategies as st
from service_plans import pos, two_context_plan

from caesar.bus.errors import BusError
from caesar.bus.memory import InMemoryBus
from caesar.codecs import make_codec
from caesar.services.common.config import ServiceConfig
from caesar.services.embedded.bus_pipeline import BusPipeline, produce_inputs, read_alerts
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.reference import ReferenceEngine
from caesar.services.wiring import make_loop
from caesar.settings import TopicSettings

NEVER = 1e9  # an interval no test reaches: the first commit's state only


def stream(n, seed, segs=3):
    rnd = random.Random(seed)
    return [pos(t // 3, rnd.randrange(40), rnd.randrange(segs), float(rnd.randrange(0, 100)))
            for t in range(n)]


def config(partitions):
    return ServiceConfig(plan=two_context_plan(with_aggregate=True),
                         topics=TopicSettings(partitions=partitions), codec=make_codec(),
                         partitions=tuple(range(partitions)), actor_id="t",
                         engine_factory=ReferenceEngine)


def identities(alerts):
    return sorted(a.identity() for a in alerts)


def expected(events):
    pipe = EmbeddedPipeline(two_context_plan(with_aggregate=True), engine_factory=ReferenceEngine)
    return identities(pipe.run_values(events).alerts)


def crash(pipe, cfg, bus, service, **options):
    """The service's loop dies (its open transaction is never committed) and a
    new one takes its partitions over."""
    old = pipe.loops[service]
    old.consumer.close()
    scfg = ServiceConfig(**{**cfg.__dict__, "actor_id": f"{service}-t"})
    loop = make_loop(service, scfg, bus, **options)
    loop.start()
    pipe.loops[service] = loop
    return loop


def stepped(partitions, events, steps=10):
    """A pipeline whose states go out at the first commit only, fed `events`
    and run `steps` rounds (commits after every batch)."""
    cfg, bus = config(partitions), InMemoryBus()
    options = dict(commit_interval_s=0.0, poll_timeout_s=0.01, batch_size=30,
                   checkpoint_interval_s=NEVER)
    pipe = BusPipeline(cfg, bus, **options)
    produce_inputs(bus, cfg, events)
    for _ in range(steps):
        for loop in pipe.loops.values():
            loop.run_once()
    return cfg, bus, pipe, options


def test_a_restore_replays_to_the_committed_offsets_and_drops_their_outputs():
    events = stream(600, seed=3)
    cfg, bus, pipe, options = stepped(1, events[:300])
    matcher = pipe.loops["matcher"]
    assert matcher.stats.commits > 2 and matcher.stats.checkpoints == 1  # the first commit's
    visible = len(read_alerts(bus, cfg))
    assert visible > 0
    loop = crash(pipe, cfg, bus, "matcher", **options)
    assert loop._replay_to  # the state trails the committed offsets
    (first_target,) = loop._replay_to.values()
    for _ in range(20):
        loop.run_once()
    assert loop.stats.replayed > 0
    assert len(read_alerts(bus, cfg)) == visible  # the replay's outputs are dropped
    produce_inputs(bus, cfg, events[300:], end=True)
    pipe.run_until_quiet(quiet_s=0.3)
    assert identities(read_alerts(bus, cfg)) == expected(events)
    # replayed once, the state goes out at the next commit: a second crash
    # replays none of what the first one did
    assert loop.stats.checkpoints >= 1
    again = crash(pipe, cfg, bus, "matcher", **options)
    (resumed,) = again.stats.restored_from.values()
    assert resumed >= first_target


def test_state_goes_out_once_per_interval_and_with_every_commit_at_zero():
    events = stream(300, seed=5)
    for interval, fewer in ((NEVER, True), (0.0, False)):
        cfg, bus = config(1), InMemoryBus()
        pipe = BusPipeline(cfg, bus, commit_interval_s=0.0, poll_timeout_s=0.01, batch_size=30,
                           checkpoint_interval_s=interval)
        produce_inputs(bus, cfg, events, end=True)
        pipe.run_until_quiet(quiet_s=0.3)
        for service in ("deriver", "matcher"):
            stats = pipe.loops[service].stats
            assert stats.commits > 3
            assert (stats.checkpoints < stats.commits) is fewer, (service, interval)
        # not replayable (batch-dependent sequence numbers): state with every commit
        sched = pipe.loops["scheduler"]
        assert sched.checkpoint_interval_s == 0.0
        assert sched.stats.checkpoints >= sched.stats.commits > 0
        assert identities(read_alerts(bus, cfg)) == expected(events)


def test_a_graceful_stop_writes_every_state_so_the_next_owner_replays_nothing():
    cfg, bus, pipe, options = stepped(2, stream(300, seed=9))
    pipe.loops["deriver"].checkpoint_all()
    loop = crash(pipe, cfg, bus, "deriver", **options)
    assert loop.stats.restored_from and not loop._replay_to


def test_an_idle_loop_writes_the_states_that_trail_its_commits():
    """No input: the states due go out one per idle step, none before they are
    due, so input that resumes meets no backlog of checkpoints and a crash
    then replays nothing."""
    cfg, bus, pipe, options = stepped(2, stream(300, seed=11), steps=20)
    for service in ("deriver", "matcher"):
        loop = pipe.loops[service]
        behind, written = set(loop._behind), loop.stats.checkpoints
        assert behind and not loop._dirty
        loop.run_once()  # idle, nothing due yet
        assert loop.stats.checkpoints == written and loop._behind == behind
        loop.checkpoint_interval_s = 1e-6  # now every trailing state is due
        loop.max_checkpoint_share = 0.0  # (however long the last ones took)
        for _ in behind:
            loop.run_once()
        assert not loop._behind and loop.stats.checkpoints == written + len(behind)
        again = crash(pipe, cfg, bus, service, **options)
        assert again.stats.restored_from and not again._replay_to


def test_checkpoints_stretch_to_their_share_of_the_time():
    """Writing a state stops the loop: the interval grows so that writing
    every partition's once takes at most `max_checkpoint_share` of it, from
    what each partition's last write took (measured, snapshot included)."""
    cfg, bus, pipe, _ = stepped(2, stream(300, seed=13))
    loop = pipe.loops["matcher"]
    snapshot = loop.handler.snapshot_partition

    def slow(j):
        time.sleep(0.05)
        return snapshot(j)

    loop.handler.snapshot_partition = slow
    before = loop.stats.checkpoint_s
    loop.checkpoint_all()  # both partitions trail their commits
    assert sorted(loop._checkpoint_cost) == [0, 1]
    assert all(c >= 0.05 for c in loop._checkpoint_cost.values())
    assert loop.stats.checkpoint_s - before >= 0.1
    loop.checkpoint_interval_s, loop.max_checkpoint_share = 2.0, 0.1
    loop._checkpoint_cost = {0: 0.3, 1: 0.2}
    assert loop.checkpoint_interval() == 5.0  # 0.5 s of writes in 5 s: 10 %
    loop._checkpointed_at[0] = 100.0
    assert not loop._checkpoint_due(0, 104.9) and loop._checkpoint_due(0, 105.0)
    loop._checkpoint_cost = {0: 0.01, 1: 0.01}
    assert loop.checkpoint_interval() == 2.0  # cheap states: the configured interval
    loop._checkpoint_cost, loop.max_checkpoint_share = {0: 0.3, 1: 0.2}, 0.0
    assert loop.checkpoint_interval() == 2.0  # stretching off


def flaky_checkpoints(loop, rnd):
    """The loop's checkpoints after an outputs' commit fail at random (the
    broker gone between the two transactions)."""
    real = loop._checkpoint

    def checkpoint(j, ts):
        if rnd.random() < 0.3:
            raise BusError("injected: the checkpoint's transaction failed")
        real(j, ts)

    loop._checkpoint = checkpoint


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), partitions=st.integers(1, 3),
       crashes=st.lists(st.tuples(st.integers(0, 12), st.sampled_from(["deriver", "matcher"])),
                        max_size=4),
       batch=st.integers(5, 60), interval=st.sampled_from([NEVER, 0.0, 0.001]),
       flaky=st.booleans())
def test_crashes_anywhere_lose_and_repeat_nothing(seed, partitions, crashes, batch, interval,
                                                 flaky):
    """Deriver and matcher crash at random steps, with random batch sizes,
    and (flaky) checkpoints fail after their outputs' commit: the visible
    outputs equal the embedded pipeline's, each exactly once."""
    events = stream(240, seed=seed, segs=4)
    cfg, bus = config(partitions), InMemoryBus()
    options = dict(commit_interval_s=0.0, poll_timeout_s=0.0, batch_size=batch,
                   checkpoint_interval_s=interval)
    pipe = BusPipeline(cfg, bus, **options)
    rnd = random.Random(seed)
    if flaky:
        for service in ("deriver", "matcher"):
            flaky_checkpoints(pipe.loops[service], rnd)
    produce_inputs(bus, cfg, events, end=True)
    at = sorted(crashes)
    for step in range(13):
        for loop in pipe.loops.values():
            loop.run_once()
        for _, service in (c for c in at if c[0] == step):
            loop = crash(pipe, cfg, bus, service, **options)
            if flaky:
                flaky_checkpoints(loop, rnd)
    pipe.run_until_quiet(quiet_s=0.2)
    assert identities(read_alerts(bus, cfg)) == expected(events)
