"""Keyed contexts in the deriver: one instance per KEYED BY key; the context
holds from its first instance until its last is closed (CAESAR paper, 3.3:
"the context window accident holds until all of them are cleared")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from caesar.language import compile_model
from caesar.services.common.messages import Progress, Transaction, partition_id
from caesar.services.deriver.processor import DeriverProcessor
from caesar.services.matcher.reference import ReferenceEngine

MODEL = """MODEL keyed
TIME UNIT SECONDS
PARTITION BY seg
EVENT Crash(ts INT, seg INT, pos INT) FROM TOPIC "crash"
EVENT Cleared(ts INT, seg INT, pos INT) FROM TOPIC "cleared"
INITIATE CONTEXT accident KEYED BY c.pos PATTERN Crash c
DEFAULT CONTEXT clear { }
CONTEXT accident KEYED {
  SWITCH CONTEXT clear KEYED BY d.pos PATTERN Cleared d
}
"""
# The same with TERMINATE closing an instance.
TERMINATING = MODEL.replace("SWITCH CONTEXT clear KEYED BY d.pos",
                            "TERMINATE CONTEXT accident KEYED BY d.pos")
P = partition_id("1")


def crash(ts: int, pos: int) -> dict:
    return {"type": "Crash", "ts": ts, "seg": 1, "pos": pos}


def cleared(ts: int, pos: int) -> dict:
    return {"type": "Cleared", "ts": ts, "seg": 1, "pos": pos}


def txn(ts: int, *events: dict) -> Transaction:
    return Transaction(P, "1", ts, tuple(events))


def changes(d: DeriverProcessor, items) -> list[tuple[int, tuple[str, ...]]]:
    return [(c.ts, c.contexts) for c in d.process(items).changes]


def test_context_holds_until_its_last_instance_closes():
    for model in (MODEL, TERMINATING):
        d = DeriverProcessor(compile_model(model), ReferenceEngine)
        assert changes(d, [txn(1, crash(1, 10))]) == [(1, ("accident",))]
        assert changes(d, [txn(2, crash(2, 20))]) == []  # a second instance
        assert changes(d, [txn(3, cleared(3, 10))]) == []  # 20 is still open
        assert changes(d, [txn(4, cleared(4, 99))]) == []  # not an open instance
        assert changes(d, [txn(5, cleared(5, 20))]) == [(5, ("clear",))]
        assert changes(d, [txn(6, cleared(6, 20))]) == []  # closing query does not run in clear


def test_two_instances_opened_in_one_transaction():
    d = DeriverProcessor(compile_model(MODEL), ReferenceEngine)
    assert changes(d, [txn(1, crash(1, 1), crash(1, 2))]) == [(1, ("accident",))]
    assert changes(d, [txn(2, cleared(2, 1))]) == []
    assert changes(d, [txn(3, cleared(3, 2))]) == [(3, ("clear",))]


SWITCH_ONLY = MODEL.replace("INITIATE CONTEXT accident KEYED BY c.pos PATTERN Crash c\n"
                            "DEFAULT CONTEXT clear { }",
                            "DEFAULT CONTEXT clear {\n"
                            "  SWITCH CONTEXT accident KEYED BY c.pos PATTERN Crash c\n}")


def test_switches_into_one_keyed_context_in_one_transaction_open_both_instances():
    assert SWITCH_ONLY != MODEL
    d = DeriverProcessor(compile_model(SWITCH_ONLY), ReferenceEngine)
    assert changes(d, [txn(1, crash(1, 1), crash(1, 2))]) == [(1, ("accident",))]
    assert changes(d, [txn(2, crash(2, 3))]) == []  # the switch runs in clear only
    assert changes(d, [txn(3, cleared(3, 1))]) == []
    assert changes(d, [txn(4, cleared(4, 3))]) == []  # never opened: 2 is still open
    assert changes(d, [txn(5, cleared(5, 2))]) == [(5, ("clear",))]


def test_instances_survive_snapshot_and_restore():
    plan = compile_model(MODEL)
    d = DeriverProcessor(plan, ReferenceEngine)
    changes(d, [txn(1, crash(1, 10)), txn(2, crash(2, 20)), Progress(3)])
    restored = DeriverProcessor(plan, ReferenceEngine)
    restored.restore(d.snapshot())
    assert changes(restored, [txn(3, cleared(3, 20))]) == []
    assert changes(restored, [txn(4, cleared(4, 10))]) == [(4, ("clear",))]


def _reference(tape: list[tuple[str, int]]) -> list[tuple[int, tuple[str, ...]]]:
    """Set semantics, one event per second: a crash opens its position; a
    clearance (seen only while the context holds) closes it."""
    open_: set[int] = set()
    holds, out = False, []
    for ts, (kind, pos) in enumerate(tape, start=1):
        if kind == "crash":
            open_.add(pos)
        elif holds:
            open_.discard(pos)
        now = bool(open_)
        if now != holds:
            out.append((ts, ("accident",) if now else ("clear",)))
        holds = now
    return out


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(["crash", "cleared"]), st.integers(0, 3)),
                max_size=40))
def test_deriver_equals_set_semantics(tape):
    d = DeriverProcessor(compile_model(MODEL), ReferenceEngine)
    make = {"crash": crash, "cleared": cleared}
    items = [txn(ts, make[kind](ts, pos)) for ts, (kind, pos) in enumerate(tape, start=1)]
    assert changes(d, items) == _reference(tape)
