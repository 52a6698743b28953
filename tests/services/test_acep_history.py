"""The tables at an older timestamp (`caesar tables --as-of`): the ACEP
processor, fed in batches like a service, answers `tables(ts)` with what the
serial reference executor leaves after the s-transactions up to ts, for
every timestamp it still keeps (the last `history` ones and the one pinned
by a checkpoint),
and says so for older ones instead of answering wrongly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from acep_models import bank_plan, transactions
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_acep_schedulers import streams

from caesar.services.common.messages import Alert
from caesar.services.scheduler.acep.executors import run_serial
from caesar.services.scheduler.acep.processor import AcepProcessor, HistoryError

PLAN = bank_plan()


def _canonical(workload: list[tuple[int, dict[str, list[dict[str, Any]]]]]) -> list[Any]:
    """The processor orders one timestamp's matches of an actor by their
    fields (all else equal here): the serial reference gets that order."""
    return [(ts, {actor: sorted(ms, key=lambda m: json.dumps(m, sort_keys=True))
                  for actor, ms in per.items()}) for ts, per in workload]


def _alerts(proc: AcepProcessor, txn: tuple[int, dict[str, list[dict[str, Any]]]]
            ) -> list[Alert]:
    input_of = {actor: etype for etype, actor in proc.inputs.items()}
    ts, per = txn
    return [Alert(actor, input_of[actor], 0, "k", 0, ts, m) for actor, ms in per.items()
            for m in ms]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams, history=st.integers(1, 6), batch=st.integers(1, 4),
       scheduler=st.sampled_from(["lwm", "sei", "s2pl"]), pin=st.integers(1, 8))
def test_tables_as_of_a_kept_timestamp_equal_the_serial_reference(
        stream: Any, history: int, batch: int, scheduler: str, pin: int) -> None:
    workload = _canonical(transactions(stream))
    proc = AcepProcessor(PLAN, scheduler, history=history)
    proc.executor.gc_every = 1  # collect as eagerly as the scheduler allows
    kept = {ts for ts, _ in workload[-history:]}
    for n, i in enumerate(range(0, len(workload), batch)):
        chunk = workload[i:i + batch]
        if n == pin and proc.done_ts is not None:
            proc.pin(proc.done_ts)  # a checkpoint written here (AcepHandler)
            kept.add(proc.done_ts)
        later = workload[i + batch][0] if i + batch < len(workload) else None
        proc.process([a for txn in chunk for a in _alerts(proc, txn)], later)
    proc.flush()
    assert proc.tables() == run_serial(PLAN, workload).tables
    for k, (ts, _) in enumerate(workload):
        expected = run_serial(PLAN, workload[:k + 1]).tables
        floor = proc.executor.store.floor
        if floor is None or ts >= floor:
            event("exact")
            assert proc.tables(ts) == expected, f"as of {ts} (kept from {floor})"
        else:
            event("collected")
            assert ts not in kept, f"{ts} was to be kept, but versions before {floor} are gone"
            with pytest.raises(HistoryError, match=f"before event time {floor}"):
                proc.tables(ts)
