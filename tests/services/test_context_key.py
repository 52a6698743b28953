"""CONTEXTS PER: contexts hold per key inside a stream partition.

A model with `PARTITION BY road` + `CONTEXTS PER seg` must derive exactly
what the same queries derive with `PARTITION BY road, seg` as long as no
query relates events of different segments; and a query of every context
sees the whole road (events of all segments) once.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.errors import ModelError
from caesar.language import compile_model, errors
from caesar.language.formatter import format_model
from caesar.language.parser import parse as parse_model
from caesar.services.common.messages import InputRecord
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.reference import ReferenceEngine

BODY = """
EVENT R(ts INT, vid INT, road INT, seg INT, spd INT) FROM TOPIC "r"
EVENT Slow(vid INT, seg INT, spd INT) TO TOPIC "slow"
EVENT Stuck(vid INT, seg INT) TO TOPIC "stuck"
EVENT Fast(vid INT, seg INT) TO TOPIC "fast"
EVENT Avg(seg INT, lav FLOAT)
DERIVE Avg(seg, avg(spd) AS lav) FROM R GROUP BY seg WINDOW TUMBLING 10 SECONDS
DEFAULT CONTEXT clear {
  SWITCH CONTEXT jam PATTERN Avg a WHERE a.lav < 30
  DERIVE Fast(r.vid, r.seg) PATTERN R r WHERE r.spd > 80
}
CONTEXT jam {
  DERIVE Slow(r.vid, r.seg, r.spd) PATTERN R r WHERE r.spd < 10
  -- a sequence whose partial matches end with the window
  DERIVE Stuck(b.vid, b.seg) PATTERN SEQ(R a, NOT R m, R b)
    WHERE [vid] AND a.spd = 0 AND b.spd = 0 AND m.spd > 0 WITHIN 20
  SWITCH CONTEXT clear PATTERN Avg a WHERE a.lav >= 30
}
"""
PER_SEG = "MODEL m\nTIME UNIT SECONDS\nPARTITION BY road\nCONTEXTS PER seg\n" + BODY
SPLIT = "MODEL m\nTIME UNIT SECONDS\nPARTITION BY road, seg\n" + BODY
CROSS = PER_SEG + """
EVENT Moved(vid INT, seg INT, from_seg INT) TO TOPIC "moved"
DERIVE Moved(b.vid, b.seg, a.seg AS from_seg) PATTERN SEQ(R a, R b)
  WHERE [vid] AND a.seg != b.seg WITHIN 5
"""


def run(model: str, events: list[dict]) -> Counter:
    pipe = EmbeddedPipeline(compile_model(model), engine_factory=ReferenceEngine)
    records = [InputRecord("r", 0, i, {"type": "R", **e}) for i, e in enumerate(events)]
    for i in range(0, len(records), 7):  # several batches
        pipe.feed(records[i:i + 7])
    pipe.finish()
    assert pipe.result.dead_letters == []
    return Counter((a.event_type, tuple(sorted(a.fields.items()))) for a in pipe.result.alerts)


events = st.lists(st.fixed_dictionaries({
    "dt": st.integers(0, 3), "vid": st.integers(0, 4), "road": st.integers(0, 1),
    "seg": st.integers(0, 3), "spd": st.sampled_from([0, 0, 5, 20, 40, 90])}),
    max_size=70)


def timed(raw: list[dict]) -> list[dict]:
    ts, out = 0, []
    for e in raw:
        ts += e["dt"]
        out.append({"ts": ts, **{k: v for k, v in e.items() if k != "dt"}})
    return out


@given(events)
@settings(max_examples=60, deadline=None)
def test_contexts_per_key_equal_partitions_per_key(raw) -> None:
    stream = timed(raw)
    assert run(PER_SEG, stream) == run(SPLIT, stream)


def test_a_query_of_every_context_sees_the_whole_partition() -> None:
    stream = [{"ts": 1, "vid": 1, "road": 0, "seg": 2, "spd": 50},
              {"ts": 3, "vid": 1, "road": 0, "seg": 3, "spd": 50},
              {"ts": 4, "vid": 2, "road": 1, "seg": 3, "spd": 50}]
    got = run(CROSS, stream)
    assert got[("Moved", (("from_seg", 2), ("seg", 3), ("vid", 1)))] == 1
    assert sum(n for (t, _), n in got.items() if t == "Moved") == 1


def test_contexts_switch_per_key() -> None:
    # segment 1 jams (average 0 over [0, 10)), segment 2 does not
    stream = [{"ts": t, "vid": 1, "road": 0, "seg": 1, "spd": 0} for t in range(0, 10, 3)]
    stream += [{"ts": t, "vid": 2, "road": 0, "seg": 2, "spd": 90} for t in range(0, 10, 3)]
    stream += [{"ts": 12, "vid": 1, "road": 0, "seg": 1, "spd": 5},
               {"ts": 12, "vid": 2, "road": 0, "seg": 2, "spd": 95}]
    got = run(PER_SEG, stream)
    assert got[("Slow", (("seg", 1), ("spd", 5), ("vid", 1)))] == 1  # jam holds for seg 1
    assert got[("Fast", (("seg", 2), ("vid", 2)))] == 5  # clear holds for seg 2 throughout
    assert not any(t == "Slow" and dict(f)["seg"] == 2 for t, f in got)


def test_round_trip_and_plan() -> None:
    model = parse_model(PER_SEG)
    assert model.context_key == ("seg",)
    assert parse_model(format_model(model)) == model
    plan = compile_model(PER_SEG)
    assert plan.partition_by == ("road",) and plan.transaction_key == ("road", "seg")
    # transitions carry the key of their last event
    assert all("seg" in {f.name for f in t.stage.plan.output.fields} for t in plan.transitions)


HEAD = "MODEL m\nPARTITION BY road\n"


@pytest.mark.parametrize("text, cls, words", [
    (HEAD + "CONTEXTS PER road\nEVENT R(ts INT, road INT) FROM TOPIC \"r\"\n",
     errors.ModelStructureError, ["road is in PARTITION BY already"]),
    (HEAD + "CONTEXTS PER seg\nEVENT R(ts INT, road INT) FROM TOPIC \"r\"\n",
     errors.UnknownNameError, ["CONTEXTS PER attribute seg is missing from input event type R"]),
    (HEAD + "CONTEXTS PER x\nEVENT R(ts INT, road INT, x FLOAT) FROM TOPIC \"r\"\n",
     errors.ModelTypeError, ["must be INT, STRING or BOOL"]),
    ("MODEL m\nCONTEXTS PER x\nEVENT R(ts INT, x INT) FROM TOPIC \"r\"\n",
     errors.ModelStructureError, ["needs a PARTITION BY"]),
    (HEAD + "CONTEXTS PER seg\nEVENT R(ts INT, road INT, seg INT) FROM TOPIC \"r\"\n"
     "EVENT K(road INT) \nDERIVE K(r.road) PATTERN R r\n"
     "DEFAULT CONTEXT clear { SWITCH CONTEXT jam PATTERN K k }\nCONTEXT jam { }\n",
     errors.ModelStructureError, ["ends with K k, which has no attribute seg"]),
    (HEAD + "CONTEXTS PER seg\nEVENT R(ts INT, road INT, seg INT) FROM TOPIC \"r\"\n"
     "EVENT K(road INT) \nEVENT Out(road INT) TO TOPIC \"o\"\nDERIVE K(r.road) PATTERN R r\n"
     "DEFAULT CONTEXT clear { SWITCH CONTEXT jam PATTERN R r WHERE r.seg = 0 }\n"
     "CONTEXT jam { DERIVE Out(k.road) PATTERN K k }\n",
     errors.ModelStructureError, ["runs in jam only and reads K, which has no attribute seg"]),
])
def test_errors(text: str, cls: type, words: list[str]) -> None:
    with pytest.raises(cls) as info:
        compile_model(text, "m.caesar")
    assert isinstance(info.value, ModelError)
    for w in words:
        assert w in str(info.value)
