"""A loop hands its handler at most `max_batch_bytes` of a poll at once and
keeps the rest for its next step (loop.py `_take`), so a loop behind its
input commits between bounded batches. The outputs must not depend on where
batches are cut, a rewind must read what was kept again (neither lost nor
repeated), and lag() must count what was polled but not handled."""

from hypothesis import given, settings
from hypothesis import strategies as st
from test_checkpoint_replay import config, expected, identities, stream

from caesar.bus.memory import InMemoryBus
from caesar.services.embedded.bus_pipeline import BusPipeline, produce_inputs, read_alerts


def pipeline(partitions, batch_bytes, batch_size=200):
    cfg, bus = config(partitions), InMemoryBus()
    pipe = BusPipeline(cfg, bus, commit_interval_s=0.0, poll_timeout_s=0.01,
                       batch_size=batch_size, batch_bytes=batch_bytes)
    return cfg, bus, pipe


@settings(max_examples=25, deadline=None)
@given(n=st.integers(50, 400), seed=st.integers(0, 10_000), partitions=st.integers(1, 3),
       batch_bytes=st.sampled_from([1, 40, 300, 2_000, 262_144]))
def test_outputs_do_not_depend_on_where_batches_are_cut(n, seed, partitions, batch_bytes):
    events = stream(n, seed)
    cfg, bus, pipe = pipeline(partitions, batch_bytes)
    produce_inputs(bus, cfg, events, end=True)
    pipe.run_until_quiet(quiet_s=0.2)
    assert identities(read_alerts(bus, cfg)) == expected(events)
    assert not any(loop._held for loop in pipe.loops.values())


def test_a_loop_behind_commits_between_bounded_batches():
    events = stream(300, seed=4)
    cfg, bus, pipe = pipeline(1, batch_bytes=1)  # one record per batch
    produce_inputs(bus, cfg, events, end=True)
    sched = pipe.loops["scheduler"]
    sched.run_once()  # polls up to 200 reports, handles the first
    assert sched.stats.records_in == 1 and len(sched._held) > 100
    assert sched.stats.commits == 1  # what it handled is committed before the rest
    held = len(sched._held)
    assert sched.lag() >= held  # polled but not handled is still to do
    sched.run_once()  # from what it kept, without losing any
    assert sched.stats.records_in == 2 and len(sched._held) == held - 1
    pipe.run_until_quiet(quiet_s=0.2)
    assert identities(read_alerts(bus, cfg)) == expected(events)


def test_a_rewind_reads_what_was_kept_again():
    events = stream(300, seed=8)
    cfg, bus, pipe = pipeline(2, batch_bytes=1)  # one record per batch
    produce_inputs(bus, cfg, events, end=True)
    for _ in range(60):  # the scheduler commits what each report closes
        pipe.loops["scheduler"].run_once()
    deriver = pipe.loops["deriver"]
    deriver.run_once()
    assert deriver._held  # polled and kept
    deriver._failed(fatal=False)  # e.g. a commit that failed: back to the last commit
    assert not deriver._held
    pipe.run_until_quiet(quiet_s=0.2)
    assert identities(read_alerts(bus, cfg)) == expected(events)
