"""The read-too-late and write-too-late anomalies of the ACEP paper (section
2, Examples 2 and 3; the dashed lines crossing in Figure 2, which Figure 3's
lock compatibilities prevent): they happen with push-based execution (no
scheduler) under the paper's schedules, and not under SEI, S2PL or LWM with
the very same preference of actors."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from acep_models import FIGURE3, FIGURE3_STREAM, FIGURE3_TRIGGERS, transactions

from caesar.language import compile_phases
from caesar.services.scheduler.acep.executors import Chooser, Simulator, run_serial

PLAN = compile_phases(FIGURE3).acep
assert PLAN is not None
WORKLOAD = transactions(FIGURE3_STREAM, FIGURE3_TRIGGERS, ("h", "e", "x"))


def prefer(*order: str) -> Chooser:
    """Always move the first enabled of `order` (then anything else)."""
    def choose(labels: Sequence[str]) -> int:
        for name in order:
            if name in labels:
                return labels.index(name)
        return 0
    return choose


def q2_reads(result: object) -> list[tuple[int, str]]:
    return [(o.ts, o.fields["st"]) for o in result.outputs]  # type: ignore[attr-defined]


def test_serial_execution_is_example_1() -> None:
    assert q2_reads(run_serial(PLAN, WORKLOAD)) == [(2, "safe"), (15, "warning")]


def test_read_too_late_without_a_scheduler() -> None:
    """Example 2: Q1/R1 evaluate enter^10 first; Q2 then reads at time 2 the
    status R1 wrote at time 10."""
    chooser = prefer("dispatch", "hire", "r1", "Q2")
    assert q2_reads(Simulator(PLAN, "none").run(WORKLOAD, chooser)) == \
        [(2, "warning"), (15, "warning")]


def test_write_too_late_without_a_scheduler() -> None:
    """Example 3: Q2 evaluates exit^15 before R1 writes at time 10."""
    chooser = prefer("dispatch", "hire", "Q2", "r1")
    assert q2_reads(Simulator(PLAN, "none").run(WORKLOAD, chooser)) == \
        [(2, "safe"), (15, "safe")]


@pytest.mark.parametrize("scheduler", ["sei", "s2pl", "lwm"])
@pytest.mark.parametrize("order", [("dispatch", "hire", "r1", "Q2"),
                                   ("dispatch", "hire", "Q2", "r1")])
def test_no_anomaly_with_a_scheduler(scheduler: str, order: tuple[str, ...]) -> None:
    assert q2_reads(Simulator(PLAN, scheduler).run(WORKLOAD, prefer(*order))) == \
        [(2, "safe"), (15, "warning")]
