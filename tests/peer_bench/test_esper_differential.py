"""Differential test: CAESAR (the Cython engine, from the model text the
compiler reads) against Esper on random patterns and streams, translated to
EPL by bench/peers/patterns.py. Same query, same events, same match sets
(query, seq numbers of the positive events, multiplicity).

Esper runs in one JVM for the session (bench/peers/jvm.py fetches its jars
from Maven Central once and compiles the harness). The remaining semantic
differences, and the EPL forms that bridge the others, are in
docs/language.md, "Esper side by side".
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.peers.caesar_side import plans_for, run_caesar  # noqa: E402
from bench.peers.events import Stream, to_batches, write_events  # noqa: E402
from bench.peers.jvm import Harness, java_available, read_matches  # noqa: E402
from bench.peers.patterns import (  # noqa: E402
    ANY,
    NEXT,
    Comp,
    Cond,
    Query,
    caesar_model,
    esper_module,
    seq,
)

from .cases import case  # noqa: E402

# more with CAESAR_ESPER_CASES=N (the default keeps the suite lean: ~1 min)
CASES = int(os.environ.get("CAESAR_ESPER_CASES", "240"))
WHY_NOT = java_available()

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(WHY_NOT is not None, reason=f"Esper needs a JDK and Maven: {WHY_NOT}"),
]


@pytest.fixture(scope="module")
def esper() -> Iterator[Harness]:
    with Harness("esper", jvm_opts=["-Xmx1g", "-XX:TieredStopAtLevel=1"]) as h:
        yield h


@pytest.mark.parametrize("seed", range(CASES))
def test_same_matches_as_esper(seed: int, esper: Harness, tmp_path: Path) -> None:
    c = case(seed)
    plans, index = plans_for([c.query])
    # three batches, advanced to each one's last timestamp, as the service does
    n = len(c.stream)
    cut = sorted({n // 3, 2 * n // 3})
    batches = to_batches(c.stream, batch_size=max(cut[0], 1))
    got = Counter(run_caesar(plans, index, batches, record=True).found or [])

    esper.load(write_events(c.stream, tmp_path / "events.bin"))
    epl = esper_module([c.query], strict_ts=c.ties)
    (tmp_path / "q.epl").write_text(epl)
    esper.run(tmp_path / "q.epl", tmp_path / "matches.txt")
    want = Counter(read_matches(tmp_path / "matches.txt"))

    assert got == want, (
        f"seed {seed}: CAESAR and Esper differ\n"
        f"only CAESAR: {sorted(got - want)[:5]}\nonly Esper: {sorted(want - got)[:5]}\n"
        f"CAESAR: {caesar_model([c.query]).splitlines()[-1]}\nEPL: {epl.splitlines()[-1]}\n"
        f"ties: {c.ties}")


def _both(esper: Harness, tmp_path: Path, query: Query, rows: list[tuple[int, int]],
          strict_ts: bool) -> tuple[set[tuple[int, ...]], set[tuple[int, ...]]]:
    """Matches (seqs) of CAESAR and of Esper on rows (type, ts), attrs all 0."""
    n = len(rows)
    stream = Stream(seq=np.arange(n, dtype=np.int64),
                    ts=np.array([ts for _, ts in rows], dtype=np.int64),
                    type=np.array([t for t, _ in rows], dtype=np.int64),
                    attrs=np.zeros((n, 5), dtype=np.int64))
    plans, index = plans_for([query])
    caesar = {m for _, m in run_caesar(plans, index, to_batches(stream), record=True).found or []}
    esper.load(write_events(stream, tmp_path / "events.bin"))
    (tmp_path / "q.epl").write_text(esper_module([query], strict_ts=strict_ts))
    esper.run(tmp_path / "q.epl", tmp_path / "matches.txt")
    return caesar, {m for _, m in read_matches(tmp_path / "matches.txt")}


def test_difference_negation_at_the_next_events_timestamp(esper: Harness,
                                                         tmp_path: Path) -> None:
    # SEQ(E1 a, NOT E2 n, E3 c): CAESAR forbids E2 strictly between a and c;
    # an E2 of c's timestamp that arrives before c is outside that interval,
    # but Esper's `not` has already seen it (docs/language.md, "Compared with
    # Esper": why the random cases keep timestamps distinct there).
    q = seq([1, 2, 3], 10, negated=(1,), equivalence=())
    caesar, esper_found = _both(esper, tmp_path, q, [(1, 1), (2, 5), (3, 5)], strict_ts=True)
    assert caesar == {(0, 2)}
    assert esper_found == set()


def test_difference_one_event_both_negated_and_next(esper: Harness, tmp_path: Path) -> None:
    # SEQ(E1 a, NOT E2 n, E2 c) WHERE n.attr1 >= 0, skip_till_any_match: the
    # first E2 binds c (CAESAR's negation interval is open) and forbids pairs
    # with later E2s; Esper's `not` turns false on that very event, so it
    # reports nothing. (With a filter on n identical to c's, Esper happened
    # to dispatch `every c` first and agreed; the random cases have filters.)
    def query(strategy: str) -> Query:
        return Query(comps=(Comp("a", 1), Comp("n", 2, negated=True,
                                               conds=(Cond("attr1", ">=", 0),)),
                            Comp("c", 2)), within=10, equivalence=(), strategy=strategy)

    rows = [(1, 1), (2, 2), (2, 3)]
    caesar, esper_found = _both(esper, tmp_path, query(ANY), rows, strict_ts=False)
    assert caesar == {(0, 1)}
    assert esper_found == set()
    # under skip_till_next_match the EPL form excludes c's events from the
    # negation's filter, and both agree
    caesar, esper_found = _both(esper, tmp_path, query(NEXT), rows, strict_ts=False)
    assert caesar == esper_found == {(0, 1)}
