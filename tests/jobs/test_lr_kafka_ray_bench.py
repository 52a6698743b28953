"""bench/linear_road/kafka_ray.py's own arithmetic, which decides whether a
level holds: the multiset comparison of the outputs against the oracle's
(one expressway's rows shifted per expressway), the packed records it
produces, and when the tail saw each output."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[2]))  # bench/ is not an installed package

from bench.linear_road import kafka_ray  # noqa: E402
from bench.linear_road.standard import FIELDS, Reports  # noqa: E402

rows = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(0, 2)), max_size=30)


def shifted(one: np.ndarray, xways: int) -> list[tuple[int, ...]]:
    """What the bench compared before: Counter rows of every expressway."""
    out = []
    for i in range(xways):
        r = one.copy()
        r[:, 0] += i * kafka_ray.VID_STRIDE
        r[:, 2] = i
        out += map(tuple, r.tolist())
    return out


@settings(max_examples=200, deadline=None)
@given(rows, rows, st.integers(1, 3), st.integers(0, 2))
def test_differences_count_as_a_counter_of_tuples_does(one, extra, xways, drop):
    """The reference: Counter differences both ways, on the shifted rows
    (the oracle's rows are of expressway 0)."""
    one_a = np.array([(v, t, 0) for v, t, _ in one], dtype=np.int64).reshape(-1, 3)
    want = shifted(one_a, xways)
    got = want[drop:] + [(v + kafka_ray.VID_STRIDE * (x % 4), t, x % 4) for v, t, x in extra]
    got_a = np.array(got, dtype=np.int64).reshape(-1, 3)
    ref = sum((Counter(want) - Counter(got)).values()) + sum((Counter(got) - Counter(want)).values())
    assert kafka_ray.differences(one_a, got_a, xways) == ref


def test_packed_seconds_hold_the_records_of_every_expressway():
    n = 40
    rng = np.random.default_rng(3)
    cols = {f: rng.integers(0, 5, n).astype(np.int64) for f in FIELDS}
    cols["time"] = np.sort(rng.integers(10, 13, n)).astype(np.int64)
    cols["xway"] = np.zeros(n, dtype=np.int64)
    cols["dir"] = rng.integers(0, 2, n).astype(np.int64)
    one = Reports(cols)
    last: dict[tuple[int, int], int] = {}
    seconds = kafka_ray.encode_seconds(one, 3, last)
    from caesar.codecs.flat import FlatCodec
    from caesar.examples.linear_road.avro import POSITION_REPORT, repository

    flat = FlatCodec(repository().get(POSITION_REPORT))
    seen = []
    for t, by_part in seconds:
        for p, (blob, ends) in by_part.items():
            values = [blob[a:b] for a, b in zip([0, *ends.tolist()[:-1]], ends.tolist(),
                                                strict=True)]
            decoded = flat.decode(values)
            assert set(decoded["xway"] * 2 + decoded["dir"]) == {p}
            assert (decoded["time"] == t).all() and (np.diff(decoded["ts"]) >= 0).all()
            assert last[(t, p)] == int(decoded["ts"][-1])
            seen += list(zip(decoded["vid"].tolist(), decoded["xway"].tolist(), strict=True))
    want = [(v + i * kafka_ray.VID_STRIDE, i) for i in range(3) for v in cols["vid"].tolist()]
    assert sorted(seen) == sorted(want)


def test_the_tail_answers_for_many_offsets_as_for_one():
    tail = kafka_ray.VisibleTail.__new__(kafka_ray.VisibleTail)
    tail.batches = {("t", 0): ([4, 9, 15], [100, 200, 300])}
    offsets = np.arange(0, 20)
    many = tail.seen_at_many("t", 0, offsets).tolist()
    one = [tail.seen_at("t", 0, int(o)) for o in offsets]
    assert many == [-1 if v is None else v for v in one]
    assert tail.seen_at_many("other", 0, offsets).tolist() == [-1] * 20


def test_the_defaults_are_the_settings_the_report_rates_with():
    """A bare `python -m bench.linear_road.kafka_ray` runs as report.py does
    (the old 10 s commit interval alone put every output past the bound)."""
    from bench.linear_road import report

    bare = kafka_ray.parser().parse_args([])
    assert kafka_ray._actors(bare.actors) == {"actors": 1, "service_actors": {"matcher": 2}}
    command = report.commands(report.parser().parse_args(["--data", "x"]), "label")["kafka_ray"]
    rated = kafka_ray.parser().parse_args(command)
    assert kafka_ray._actors(rated.actors) == kafka_ray._actors(bare.actors)
    for name in ("commit_interval", "max_commit_share", "checkpoint_interval",
                 "max_checkpoint_share", "history", "warmup", "window", "pace"):
        assert getattr(rated, name) == getattr(bare, name), name
