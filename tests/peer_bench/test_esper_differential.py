"""Differential test: CAESAR (the Cython engine, from the model text the
compiler reads) against Esper on random patterns and streams, translated to
EPL by bench/peers/patterns.py. Same query, same events, same match sets
(query, seq numbers of the positive events, multiplicity).

Esper runs in one JVM for the session (bench/peers/jvm.py fetches its jars
from Maven Central once and compiles the harness). The remaining semantic
differences, and the EPL forms that bridge the others, are in
docs/language.md, "Compared with Esper".
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.peers.caesar_side import plans_for, run_caesar  # noqa: E402
from bench.peers.events import to_batches, write_events  # noqa: E402
from bench.peers.jvm import Harness, java_available, read_matches  # noqa: E402
from bench.peers.patterns import caesar_model, esper_module  # noqa: E402

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
