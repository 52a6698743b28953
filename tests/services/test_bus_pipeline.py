"""The service runners (codecs, commit order, checkpoints) over the in-memory
bus give the same alerts as the direct embedded pipeline; a runner rebuilt
from its checkpoint resumes without losing or repeating transactions."""

import random

from service_plans import pos, two_context_plan

from caesar.bus.memory import InMemoryBus
from caesar.bus.records import OutRecord
from caesar.codecs import make_codec
from caesar.services.common.config import ServiceConfig
from caesar.services.embedded.bus_pipeline import (
    BusPipeline,
    produce_end,
    produce_inputs,
    read_alerts,
    read_dead_letters,
)
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.reference import ReferenceEngine
from caesar.services.wiring import make_loop
from caesar.settings import TopicSettings


def stream(n=300, segs=3, seed=7):
    rnd = random.Random(seed)
    return [pos(t // 3, rnd.randrange(50), rnd.randrange(segs), float(rnd.randrange(0, 100)))
            for t in range(n)]


def config(partitions=2):
    return ServiceConfig(plan=two_context_plan(), topics=TopicSettings(partitions=partitions),
                         codec=make_codec(), partitions=tuple(range(partitions)), actor_id="t",
                         engine_factory=ReferenceEngine)


def identities(alerts):
    return sorted(a.identity() for a in alerts)


def test_runners_on_memory_bus_equal_embedded():
    events = stream()
    expected = EmbeddedPipeline(two_context_plan(), engine_factory=ReferenceEngine).run_values(events)
    cfg = config()
    bus = InMemoryBus()
    pipe = BusPipeline(cfg, bus, commit_interval_s=0.05, poll_timeout_s=0.01)
    produce_inputs(bus, cfg, events)
    bus.producer().produce([OutRecord(cfg.input_topics()[0], b"\x00\x01junk", b"1")])
    produce_end(bus, cfg)
    pipe.run_until_quiet(quiet_s=0.5)
    got = read_alerts(bus, cfg)
    assert len(got) > 20
    assert identities(got) == identities(expected.alerts)
    dead = read_dead_letters(bus, cfg)
    assert [d["reason"] for d in dead] == ["UNDECODABLE"]
    pipe.close()


def test_restart_from_checkpoint_resumes_without_loss_or_duplicates():
    events = stream(400, seed=11)
    expected = EmbeddedPipeline(two_context_plan(), engine_factory=ReferenceEngine).run_values(events)
    cfg = config(1)
    bus = InMemoryBus()
    pipe = BusPipeline(cfg, bus, commit_interval_s=0.0, poll_timeout_s=0.01, batch_size=50)
    # cut at a ts boundary: an idle flush in between makes later events of a
    # released ts late (dead letters), which is right but not what is tested here
    produce_inputs(bus, cfg, events[:201])
    for _ in range(6):
        for loop in pipe.loops.values():
            loop.run_once()
    # the matcher "crashes": a new loop restores its checkpoint and resumes
    old = pipe.loops["matcher"]
    old.consumer.close()
    scfg = ServiceConfig(**{**cfg.__dict__, "actor_id": "matcher-t"})
    pipe.loops["matcher"] = make_loop("matcher", scfg, bus, commit_interval_s=0.0,
                                      poll_timeout_s=0.01, batch_size=50)
    pipe.loops["matcher"].start()
    assert pipe.loops["matcher"].stats.restored_from
    produce_inputs(bus, cfg, events[201:], end=True)
    pipe.run_until_quiet(quiet_s=0.5)
    got = read_alerts(bus, cfg)
    # exactly once: the crashed matcher's uncommitted outputs were never visible
    assert identities(got) == identities(expected.alerts)


def test_state_is_keyed_by_partition_so_actors_can_be_regrouped():
    """One matcher owned partitions 0 and 1; after a restart two matchers own
    one each and restore exactly their partition's state."""
    events = stream(400, segs=6, seed=13)
    expected = EmbeddedPipeline(two_context_plan(), engine_factory=ReferenceEngine).run_values(events)
    cfg = config(2)
    bus = InMemoryBus()
    pipe = BusPipeline(cfg, bus, commit_interval_s=0.0, poll_timeout_s=0.01, batch_size=40)
    produce_inputs(bus, cfg, events[:201])
    for _ in range(8):
        for loop in pipe.loops.values():
            loop.run_once()
    pipe.loops.pop("matcher").consumer.close()
    for j in (0, 1):
        scfg = ServiceConfig(**{**cfg.__dict__, "partitions": (j,), "actor_id": f"matcher-{j}"})
        loop = make_loop("matcher", scfg, bus, commit_interval_s=0.0, poll_timeout_s=0.01,
                         batch_size=40)
        loop.start()
        assert list(loop.stats.restored_from) == [f"caesar.transactions.routed[{j}]"]
        pipe.loops[f"matcher{j}"] = loop
    produce_inputs(bus, cfg, events[201:], end=True)
    pipe.run_until_quiet(quiet_s=0.5)
    got = read_alerts(bus, cfg)
    assert identities(got) == identities(expected.alerts)


def test_state_bytes_is_the_newest_checkpoint_of_every_partition():
    """stats.state_bytes: what a restore would read now, summed over the
    loop's partitions (not just those its last commit wrote)."""
    from caesar.bus.reading import read_all
    from caesar.bus.records import TopicPartition
    from caesar.services.store.checkpoint import CHANGELOG
    from caesar.services.store.state_format import unpack

    events = stream(400, segs=6, seed=13)
    cfg = config(2)
    bus = InMemoryBus()
    pipe = BusPipeline(cfg, bus, commit_interval_s=0.0, poll_timeout_s=0.01, batch_size=40)
    produce_inputs(bus, cfg, events)
    for _ in range(8):
        for loop in pipe.loops.values():
            loop.run_once()
    for service, loop in pipe.loops.items():
        newest = {}
        topic = cfg.topics.changelog_topic(service)
        for rec in read_all(bus, [TopicPartition(topic, j) for j in (0, 1)]):
            if rec.key in (b"0", b"1") and rec.value is not None:
                meta = unpack(cfg.codec.decode_as(CHANGELOG, rec.value)["state"])
                newest[rec.key] = meta["bytes"]
        assert len(newest) == 2, service
        assert loop.stats.state_bytes == sum(newest.values()) > 0, service
    pipe.close()


def test_commits_are_spaced_to_a_share_of_the_time_when_snapshots_are_slow():
    """A loop behind its input commits after the interval, or later when its
    last commit took long: commits take at most `max_commit_share` of the
    time (the snapshot of a big state would otherwise run after every batch)."""
    cfg = config()
    loop = make_loop("matcher", cfg, InMemoryBus(), commit_interval_s=1.0, max_commit_share=0.25)
    loop._last_commit = 100.0
    assert not loop.commit_due(100.9) and loop.commit_due(101.0)  # cheap commits: the interval
    loop._commit_cost = 2.0  # a slow snapshot: wait 3x its cost (2 s of 8 s commit)
    assert not loop.commit_due(105.9) and loop.commit_due(106.0)
    loop.commit_interval_s = 0.0  # 0: after every batch, whatever it costs
    assert loop.commit_due(100.0)


def test_a_transaction_is_committed_within_a_third_of_the_transaction_timeout():
    """The spacing of slow commits never keeps a transaction open past a
    third of the broker's timeout (it aborts one open longer)."""
    loop = make_loop("matcher", config(), InMemoryBus(), commit_interval_s=1.0,
                     max_commit_share=0.25, transaction_timeout_s=9.0)
    assert loop.max_open_s == 3.0
    loop._last_commit, loop._commit_cost = 100.0, 2.0  # spacing 6 s
    loop._open, loop._opened_at = {0}, 100.5
    assert not loop.commit_due(103.4) and loop.commit_due(103.5)


def test_topics_created_earlier_with_too_few_partitions_are_refused_by_name():
    """A deployment at 8 partitions on topics a default setup made with 4
    (seen: `caesar runtime up` then a bench at 4 expressways) used to retry
    producing to partition 4 forever; now it stops at once, naming each."""
    from caesar.bus.errors import BusError
    from caesar.bus.records import TopicSpec
    from caesar.services.wiring import create_service_topics

    cfg = config(partitions=4)
    txn, (inp,) = cfg.topics.transactions, cfg.input_topics()
    for fewer, more_input in ((True, False), (False, True)):
        bus = InMemoryBus()
        bus.create_topics([TopicSpec(txn, 2 if fewer else 8),
                           TopicSpec(inp, 6 if more_input else 4)])
        try:
            create_service_topics(bus, cfg)
        except BusError as exc:
            named = txn if fewer else inp
            assert f"{named} has {2 if fewer else 6} partitions" in str(exc)
            assert "needs 4" in str(exc)
        else:
            raise AssertionError("mismatched partition counts went through")
    # more partitions than needed on a topic it only writes to: usable, accepted
    bus = InMemoryBus()
    bus.create_topics([TopicSpec(txn, 8)])
    assert inp in create_service_topics(bus, cfg)
    BusPipeline(cfg, bus)  # and a pipeline starts on them
