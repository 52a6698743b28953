"""The peer benchmark's TPStream and ACEP rows (bench/peers/workloads.py):
CAESAR's side against a plain Python reference of each query (what the row
measures must be right before it is fast), and, where Java is present,
Esper's EPL forms against CAESAR on the same streams."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.peers.caesar_side import run_pipeline, run_temporal, stream_values  # noqa: E402
from bench.peers.events import (  # noqa: E402
    Stream,
    sase_stream,
    situation_stream,
    to_batches,
    write_events,
)
from bench.peers.jvm import Harness, java_available, read_matches  # noqa: E402
from bench.peers.workloads import (  # noqa: E402
    ACEP_EPL,
    ACEP_MODEL,
    TP_WITHIN,
    TPSTREAM_2PHASE,
    TPSTREAM_LOWLAT,
    TPSTREAM_MODEL,
)


def situations(stream: Stream, col: int) -> dict[int, list[tuple[int, int]]]:
    """Per key, the maximal runs of events with attr{col+1} > 50 as [ts, te):
    te = the key's first event after the run (TPStream's half-open end)."""
    out: dict[int, list[tuple[int, int]]] = {}
    start: dict[int, int] = {}
    for ts, row in zip(stream.ts.tolist(), stream.attrs.tolist(), strict=True):
        k, holds = row[0], row[col] > 50
        if holds and k not in start:
            start[k] = ts
        elif not holds and k in start:
            out.setdefault(k, []).append((start.pop(k), ts))
    assert not start, "the stream leaves a situation open"
    return out


def overlaps(stream: Stream) -> Counter:
    """A OVERLAPS B per key: A.ts < B.ts < A.te < B.te."""
    a_runs, b_runs = situations(stream, 1), situations(stream, 2)
    return Counter((0, (a0, b0)) for k, runs in a_runs.items() for a0, a1 in runs
                   for b0, b1 in b_runs.get(k, ()) if a0 < b0 < a1 < b1)


@given(st.integers(0, 10_000), st.integers(2, 30), st.integers(1, 20))
@settings(max_examples=40, deadline=None)
def test_tpstream_row_matches_the_definition(seed: int, keys: int, run_max: int) -> None:
    stream = situation_stream(60 * keys, keys=keys, run_max=run_max, seed=seed)
    expected = overlaps(stream)
    # the window never binds: every A lasts less than it
    assert all(te - ts < TP_WITHIN for runs in situations(stream, 1).values()
               for ts, te in runs)
    got = run_temporal(TPSTREAM_MODEL, to_batches(stream, batch_size=97,
                                                  partition_by="attr1", with_ts=True),
                       record=True)
    assert Counter(got.found) == expected
    assert sum(expected.values()) == got.matches


def acep_reference(stream: Stream) -> Counter:
    """The ACEP row's model, serially, one event at a time."""
    t0: dict[int, int] = {}
    t1: dict[int, int] = {}
    out: Counter = Counter()
    for ts, typ, row in zip(stream.ts.tolist(), stream.type.tolist(), stream.attrs.tolist(),
                            strict=True):
        k, v = row[0], row[1]
        if typ == 0:
            t0[k] = v
        elif typ == 1:
            t1[k] = v
        elif typ == 2 and k in t0 and k in t1 and t0[k] > t1[k]:
            out[(0, (ts,))] += 1
        elif typ == 3 and k in t0 and t0[k] < v:
            t1[k] = v
            out[(1, (ts,))] += 1
    return out


@given(st.integers(0, 10_000), st.integers(1, 30))
@settings(max_examples=25, deadline=None)
def test_acep_row_matches_serial_execution(seed: int, keys: int) -> None:
    stream = sase_stream(600, domains=(keys, 100, 100, 100, 10), seed=seed, num_types=4)
    got = run_pipeline(ACEP_MODEL, stream_values(stream), record=True, batch_size=128)
    assert Counter(got.found) == acep_reference(stream)


@pytest.mark.integration
@pytest.mark.skipif(java_available() is not None, reason=f"Esper needs a JDK and Maven: "
                                                          f"{java_available()}")
def test_esper_forms_give_the_rows_matches(tmp_path: Path) -> None:
    with Harness("esper", jvm_opts=["-Xmx1g", "-XX:TieredStopAtLevel=1"]) as esper:
        for seed in (1, 2, 3):
            tp = situation_stream(20_000, seed=seed)
            esper.load(write_events(tp, tmp_path / "tp.bin"))
            expected = overlaps(tp)
            for name, epl in (("2phase", TPSTREAM_2PHASE), ("lowlat", TPSTREAM_LOWLAT)):
                (tmp_path / f"{name}.epl").write_text(epl)
                esper.run(tmp_path / f"{name}.epl", tmp_path / "m.out")
                assert Counter(read_matches(tmp_path / "m.out")) == expected, (name, seed)
            acep = sase_stream(5_000, domains=(100, 1_000, 100, 100, 10), seed=seed, num_types=4)
            esper.load(write_events(acep, tmp_path / "acep.bin"))
            (tmp_path / "acep.epl").write_text(ACEP_EPL)
            esper.run(tmp_path / "acep.epl", tmp_path / "a.out")
            assert Counter(read_matches(tmp_path / "a.out")) == acep_reference(acep), seed
