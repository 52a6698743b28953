"""Model upgrades without stopping the input (issue 11): queries are matched
by identity, unchanged ones keep their state, removed ones drop it, new ones
start empty at the switch, a changed stateful query is refused by name.
The four services' runners run over the in-memory bus; the switch crosses
them in the data (PlanSwitch records) while input keeps coming."""

from __future__ import annotations

import random

import pytest

from caesar.bus.memory import InMemoryBus
from caesar.codecs import make_codec
from caesar.language import compile_model
from caesar.services.common.config import ServiceConfig
from caesar.services.common.plans import PlanBook, UpgradeError, check_upgrade
from caesar.services.embedded.bus_pipeline import (
    BusPipeline,
    produce_end,
    produce_inputs,
    read_alerts,
)
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.reference import ReferenceEngine
from caesar.services.scheduler.runner import watermark_record
from caesar.settings import TopicSettings

HEAD = """MODEL upgrade
TIME UNIT SECONDS
PARTITION BY seg
EVENT Pos(ts INT, vid INT, seg INT, spd INT) FROM TOPIC "pos"
"""
PAIRS = """@name("{name}")
DERIVE Pair(a.vid, b.spd AS later) PATTERN SEQ(Pos a, Pos b) WHERE [vid] AND b.spd > a.spd
  WITHIN 8 SECONDS
"""
AVERAGE = "DERIVE Avg(seg, avg(spd) AS s) FROM Pos GROUP BY seg WINDOW TUMBLING 5 SECONDS\n"
FAST = "DERIVE Fast(p.vid) PATTERN Pos p WHERE p.spd > 90\n"
SLOW = "DERIVE Slow(p.vid) PATTERN Pos p WHERE p.spd < 10\n"
JAM = """DEFAULT CONTEXT clear {{
  SWITCH CONTEXT jam PATTERN Pos p WHERE p.spd < 20
{clear}}}
CONTEXT jam {{
  SWITCH CONTEXT clear PATTERN Pos p WHERE p.spd > 60
  DERIVE Toll(p.vid) PATTERN Pos p
}}
"""

V1 = HEAD + PAIRS.format(name="pairs") + AVERAGE + JAM.format(clear="  " + FAST)
# reordered, `pairs` renamed (unchanged), Fast removed, Slow added
V2 = HEAD + JAM.format(clear="  " + SLOW) + AVERAGE + PAIRS.format(name="pairs2")


def stream(n: int = 600, seed: int = 4) -> list[dict]:
    rnd = random.Random(seed)
    return [{"type": "Pos", "ts": i // 6, "vid": rnd.randrange(12), "seg": rnd.randrange(3),
             "spd": rnd.randrange(0, 100)} for i in range(n)]


def outputs(alerts) -> dict[str, list[tuple]]:
    """Alerts by type, each (key, start, end, fields), sorted."""
    out: dict[str, list[tuple]] = {}
    for a in alerts:
        out.setdefault(a.event_type, []).append(
            (a.key, a.start_ts, a.end_ts, tuple(sorted(a.fields.items()))))
    return {k: sorted(v) for k, v in out.items()}


def test_upgrade_keeps_renames_adds_and_removes_queries_by_identity():
    v1, v2 = compile_model(V1), compile_model(V2)
    change = check_upgrade(v1, v2)
    assert change.renamed == {"pairs": "pairs2"}
    assert [i.split("-")[0] for i in change.added] == ["Slow"]
    assert [i.split("-")[0] for i in change.removed] == ["Fast"]
    assert len(change.kept) == 4  # Avg, Toll and the two switches, moved but unchanged

    events = stream()
    cut = 300  # events[:cut] have ts < 50; the switch comes at watermark 50
    switch_at = events[cut]["ts"]
    assert events[cut - 1]["ts"] < switch_at
    book = PlanBook(v1)
    cfg = ServiceConfig(plan=v1, topics=TopicSettings(partitions=2), codec=make_codec(),
                        partitions=(0, 1), actor_id="up", engine_factory=ReferenceEngine,
                        plan_book=book)
    bus = InMemoryBus()
    pipe = BusPipeline(cfg, bus, commit_interval_s=0.0, poll_timeout_s=0.0, batch_size=37)
    produce_inputs(bus, cfg, events[:cut])
    producer = bus.producer()
    producer.produce([watermark_record("pos", j, switch_at) for j in (0, 1)])
    pipe.run_until_quiet(quiet_s=0.2)
    # caesar deploy --update: stage everywhere, then ask the scheduler; input keeps coming
    book.add(v2)
    book.requested = check_upgrade(v1, v2).new
    produce_inputs(bus, cfg, events[cut:cut + 100])
    pipe.run_until_quiet(quiet_s=0.2)
    assert all(set(loop.handler.plan_versions().values()) == {book.requested}  # type: ignore[attr-defined]
               for loop in pipe.loops.values())
    produce_inputs(bus, cfg, events[cut + 100:])
    produce_end(bus, cfg)
    pipe.run_until_quiet(quiet_s=0.2)
    got = outputs(read_alerts(bus, cfg))
    pipe.close()

    only_v1 = outputs(EmbeddedPipeline(v1, engine_factory=ReferenceEngine).run_values(events).alerts)
    only_v2 = outputs(EmbeddedPipeline(v2, engine_factory=ReferenceEngine).run_values(events).alerts)
    # kept and renamed queries: as if the model had never changed (state carried over,
    # pairs spanning the switch found, nothing twice)
    for kind in ("Pair", "Avg", "Toll"):
        assert got[kind] == only_v1[kind] == only_v2[kind], kind
    assert any(start < switch_at <= end for _, start, end, _ in got["Pair"])
    # the removed query: its outputs stop at the switch
    assert got["Fast"] == [a for a in only_v1["Fast"] if a[2] < switch_at]
    # the added one starts empty at the switch
    assert got["Slow"] == [a for a in only_v2["Slow"] if a[1] >= switch_at]
    assert got["Slow"] and got["Fast"]


def test_a_named_query_that_changed_is_refused_by_name():
    v1 = compile_model(V1)
    changed = compile_model(V1.replace("b.spd > a.spd", "b.spd >= a.spd"))
    with pytest.raises(UpgradeError, match="query 'pairs' changed"):
        check_upgrade(v1, changed)
    # the same change without a name is another query: the old one's state is dropped
    unnamed = compile_model(V1.replace('@name("pairs")\n', "").replace(
        "b.spd > a.spd", "b.spd >= a.spd"))
    change = check_upgrade(v1, unnamed)
    assert "pairs" in change.removed and any(i.startswith("Pair-") for i in change.added)


def test_changing_the_partition_key_is_refused():
    with pytest.raises(UpgradeError, match="PARTITION BY changed"):
        check_upgrade(compile_model(V1), compile_model(V1.replace("PARTITION BY seg",
                                                                  "PARTITION BY vid")))


def test_restoring_old_state_under_a_changed_query_names_it():
    """The safety net behind the check: a redeploy of a changed model on the
    same topics (no --update) must not misread the state either."""
    from caesar.services.matcher.processor import MatcherProcessor
    from caesar.services.store.state_format import StateCompatibilityError

    v1 = compile_model(V1)
    changed = compile_model(V1.replace("b.spd > a.spd", "b.spd >= a.spd"))
    from caesar.services.common.messages import InputRecord

    pipe = EmbeddedPipeline(v1, engine_factory=ReferenceEngine)
    pipe.feed([InputRecord("pos", 0, i, e) for i, e in enumerate(stream(150))])
    state = pipe.matcher.snapshot()
    assert state["graph"]["queries"]["pairs"]["state"], "pairs holds partial matches"
    with pytest.raises(StateCompatibilityError, match="query pairs"):
        MatcherProcessor(changed, ReferenceEngine).restore(state)
    MatcherProcessor(compile_model(V2), ReferenceEngine).restore(state)  # compatible
