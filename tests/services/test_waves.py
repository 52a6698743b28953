"""Waves: the deriver and the matcher step over runs of timestamps in which
no stream partition has two transactions (TxnBatch.waves, StageGraph.step),
instead of once per timestamp. A stream whose events each carry their own
millisecond timestamp made one step per event (bench/peers, contexts row).

The reference is the same pipeline stepping once per timestamp (`waves`
off): same alerts in the same order, same context changes, same dead
letters, for random models, streams and batch sizes."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.events.batch import EventBatch, StringPool, TypeColumns
from caesar.language import compile_model
from caesar.services.common.messages import TxnBatch
from caesar.services.embedded.pipeline import EmbeddedPipeline
from caesar.services.matcher.reference import ReferenceEngine
from caesar.services.matcher.stage_graph import default_engine_factory

ENGINES = {"cython": default_engine_factory, "reference": ReferenceEngine}

# ------------------------------------------------------------ TxnBatch.waves


def batch_of(rows: list[tuple[int, int]]) -> TxnBatch:
    """One type, rows (ts, partition), in ts order."""
    rows = sorted(rows, key=lambda r: r[0])
    n = len(rows)
    cols = TypeColumns.from_lists(
        {"v": list(range(n))}, {"v": "int"}, StringPool(),
        ts=np.array([r[0] for r in rows], dtype=np.int64),
        seq=np.arange(n, dtype=np.int64),
        partition=np.array([r[1] for r in rows], dtype=np.int64))
    return TxnBatch(EventBatch({"E": cols}, StringPool()))


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5)), max_size=60))
@settings(max_examples=200, deadline=None)
def test_waves_cover_every_row_once_and_are_maximal(rows) -> None:
    waves = batch_of(rows).waves()
    seen = []
    prev_last = None
    prev_parts: set[int] = set()
    for first, last, stamps, txns in waves:
        c = txns.events.by_type.get("E")
        ts = c.ts.tolist() if c is not None else []
        parts = c.partition.tolist() if c is not None else []
        assert ts and first == min(ts) and last == max(ts)
        assert prev_last is None or first > prev_last
        # one transaction per partition, at the ts the wave names
        assert stamps == dict(zip(parts, ts, strict=True))
        assert all(len({t for t, q in zip(ts, parts, strict=True) if q == p}) == 1
                   for p in parts)
        # maximal: the first timestamp of this wave clashes with the last wave
        if prev_last is not None:
            at_first = {p for t, p in zip(ts, parts, strict=True) if t == first}
            assert at_first & prev_parts
        seen += c.columns["v"].tolist()
        prev_last, prev_parts = last, set(parts)
    assert sorted(seen) == list(range(len(rows)))


def test_waves_of_a_millisecond_stream() -> None:
    # partitions 1, 2, 1, 3, 3: waves [1, 2], [1, 3], [3]
    waves = batch_of([(0, 1), (1, 2), (2, 1), (3, 3), (4, 3)]).waves()
    assert [(f, la, s) for f, la, s, _ in waves] == [
        (0, 1, {1: 0, 2: 1}), (2, 3, {1: 2, 3: 3}), (4, 4, {3: 4})]


# ------------------------------------------------- pipeline, waves vs per ts

HEAD = """MODEL waves
TIME UNIT MILLISECONDS
PARTITION BY k
STRATEGY {strategy}
EVENT A(ts INT, k INT, v INT) FROM TOPIC "in"
EVENT B(ts INT, k INT, v INT) FROM TOPIC "in"
EVENT C(ts INT, k INT, v INT) FROM TOPIC "in"
EVENT M(s INT, e INT, v INT)
EVENT N(s INT, v INT)
"""
PATTERNS = [
    "SEQ(A a, B b, C c) WITHIN {w} MILLISECONDS",
    "SEQ(A a, B b, C c) WHERE [v] WITHIN {w} MILLISECONDS",
    "SEQ(A a, NOT C x, B b, C c) WITHIN {w} MILLISECONDS",
    "SEQ(NOT C x, A a, B b, C c) WITHIN {w} MILLISECONDS",
    "SEQ(A a, B+ b, C c) WITHIN {w} MILLISECONDS",
    # held until the window closes: the stage graph runs these per timestamp
    "SEQ(A a, B b, C c, NOT A x) WITHIN {w} MILLISECONDS",
]
BODIES = {
    # SWITCH in and out on a field, the sequence inside (bench/peers' contexts row)
    "switch": """DEFAULT CONTEXT idle {{
  SWITCH CONTEXT active PATTERN A s WHERE s.v < {lo}
}}
CONTEXT active {{
  SWITCH CONTEXT idle PATTERN A e WHERE e.v >= {hi}
  DERIVE M(a.ts AS s, c.ts AS e, a.v) PATTERN {pattern}
}}
""",
    # INITIATE / TERMINATE, and a derived event that ends the context
    "initiate": """DEFAULT CONTEXT idle {{
  INITIATE CONTEXT busy PATTERN B s WHERE s.v < {lo}
}}
CONTEXT busy {{
  DERIVE N(a.ts AS s, a.v) PATTERN SEQ(A a, B b) WITHIN {w} MILLISECONDS
  TERMINATE CONTEXT busy PATTERN N n WHERE n.v >= {hi}
  DERIVE M(a.ts AS s, c.ts AS e, a.v) PATTERN {pattern}
}}
""",
    # keyed instances (one per value of v)
    "keyed": """INITIATE CONTEXT alarm KEYED BY s.v PATTERN A s WHERE s.v < {lo}
DEFAULT CONTEXT idle {{ }}
CONTEXT alarm KEYED {{
  TERMINATE CONTEXT alarm KEYED BY e.v PATTERN C e
  DERIVE M(a.ts AS s, c.ts AS e, a.v) PATTERN {pattern}
}}
""",
}

models = st.builds(
    lambda body, pattern, strategy, w, lo, hi: HEAD.format(strategy=strategy) + BODIES[body].format(
        pattern=pattern.format(w=w), w=w, lo=lo, hi=hi),
    st.sampled_from(sorted(BODIES)), st.sampled_from(PATTERNS),
    st.sampled_from(["skip_till_any_match", "skip_till_next_match"]),
    st.integers(3, 40), st.integers(1, 5), st.integers(3, 8))

# (type, partition key, v, ts step): ms timestamps, mostly one event each
streams = st.lists(st.tuples(st.sampled_from("ABC"), st.integers(0, 4), st.integers(0, 9),
                             st.sampled_from([0, 1, 1, 1, 2])), max_size=80)


def run(text: str, raw, batch_size: int, waves: bool, context_aware: bool = True,
        engine: str = "cython"):
    plan = compile_model(text, context_aware=context_aware)
    pipe = EmbeddedPipeline(plan, batch_size=batch_size, engine_factory=ENGINES[engine])
    pipe.deriver.waves = waves and pipe.deriver.graph.waves
    pipe.matcher.waves = waves and pipe.matcher.graph.waves
    ts, values = 0, []
    for t, k, v, step in raw:
        ts += step
        values.append({"type": t, "ts": ts, "k": k, "v": v})
    result = pipe.run_values(values, topic="in")
    alerts = [(a.event_type, a.partition, a.start_ts, a.end_ts, sorted(a.fields.items()))
              for a in result.alerts]
    changes = [(c.partition, c.ts, c.contexts) for c in result.context_changes]
    return alerts, changes, [d.reason for d in result.dead_letters], \
        (pipe.deriver.graph.waves, pipe.matcher.graph.waves)


@given(models, streams, st.sampled_from([3, 7, 500]), st.booleans(), st.sampled_from(sorted(ENGINES)))
@settings(max_examples=150, deadline=None)
def test_waves_equal_one_step_per_timestamp(text, raw, batch_size, context_aware,
                                            engine) -> None:
    stepped = run(text, raw, batch_size, False, context_aware, engine)
    waved = run(text, raw, batch_size, True, context_aware, engine)
    assert waved == stepped


def test_the_cases_above_run_waves_where_they_may() -> None:
    """The property test is not vacuous: waves are on for plans that allow
    them and off for the ones that hold results (end negation)."""
    raw = [("A", k % 5, k % 10, 1) for k in range(40)]
    on = Counter()
    for body in BODIES:
        for pattern in PATTERNS:
            text = HEAD.format(strategy="skip_till_any_match") + BODIES[body].format(
                pattern=pattern.format(w=20), w=20, lo=3, hi=6)
            on[run(text, raw, 500, True)[3]] += 1
    assert on[(True, True)] == 3 * 5
    assert on[(True, False)] + on[(False, False)] == 3


def test_a_millisecond_context_stream_takes_a_step_per_wave_not_per_event() -> None:
    text = HEAD.format(strategy="skip_till_any_match") + BODIES["switch"].format(
        pattern=PATTERNS[0].format(w=20), w=20, lo=3, hi=6)
    plan = compile_model(text)
    pipe = EmbeddedPipeline(plan, batch_size=1000)
    steps = 0
    step = pipe.deriver.graph.step

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal steps
        steps += 1
        return step(*args, **kwargs)

    pipe.deriver.graph.step = counting  # type: ignore[method-assign]
    values = [{"type": "ABC"[i % 3], "ts": i, "k": i % 50, "v": i % 10} for i in range(1000)]
    pipe.run_values(values, topic="in")
    # 50 partitions in turn: a wave per round; the scheduler holds the last
    # timestamp of a batch back until the next one, which splits one wave
    assert 1000 // 50 <= steps <= 1000 // 50 + 1


def test_a_window_that_ends_drops_the_runs_of_the_rows_before_it() -> None:
    """The partition's A at 0 starts a run and ends the context; the next
    transaction (1, skipped: nothing runs in idle) carries the discard of
    that run. A wave must not apply the discard before the row at 0 ran:
    else the run would survive into the next window (A 0, B 2, C 3)."""
    text = HEAD.format(strategy="skip_till_any_match") + BODIES["switch"].format(
        pattern=PATTERNS[0].format(w=20), w=20, lo=3, hi=6)
    raw = [("A", 1, 0, 0), ("A", 1, 9, 1), ("A", 1, 0, 1), ("B", 1, 5, 1), ("C", 1, 5, 1)]
    # ts 0: A v=0 opens; 1: A v=9 starts a run, closes; 2: A v=0 (idle,
    # skipped) opens again and discards; 3: B; 4: C: no A inside this window
    for waves in (False, True):
        alerts, changes, _, on = run(text, raw, 500, waves)
        assert on == (True, True)
        assert [c[1:] for c in changes] == [(0, ("active",)), (1, ("idle",)), (2, ("active",))]
        assert alerts == []
