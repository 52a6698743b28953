"""Per-component layouts: a component's stored rows keep what the plan reads
of its variable and the `[attr]` key, and engine states written when every
component kept every attribute of its types still restore (by name)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.events.batch import StringPool
from caesar.plans.pattern import STRATEGIES
from caesar.services.matcher import compile as compile_module
from caesar.services.matcher.compile import compile_plan
from caesar.services.matcher.engine import CythonEngine
from caesar.services.matcher.reference import ReferenceEngine

from .tapes import attr, cmp, comp, multiset, plan, tape
from .test_equivalence import scenario

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_a_component_keeps_what_the_plan_reads_of_it_and_the_key():
    """StoppedCar's shape: four reports of a car at one place, the output
    from the last; the first three are only counted."""
    stopped = plan("stopped", [comp("a", "A"), comp("b", "A"), comp("c", "A"), comp("d", "A")],
                   equivalence=["x"], within=90, strategy="skip_till_next_match",
                   where=[cmp(">", attr("b", "y"), 0)],
                   fields={"x": attr("d", "x"), "s": attr("d", "s")})
    layouts = [c.layout for c in compile_plan(stopped).comps]
    assert layouts == [("x",), ("x", "y"), ("x",), ("s", "x")]
    assert compile_plan(stopped).comps[0].full_layout == ("f", "s", "x", "y")


def test_a_kleene_component_keeps_every_attribute():
    p = plan("k", [comp("a", "A"), comp("b", "B", kleene=True)],
             fields={"x": attr("a", "x")}, strategy="skip_till_next_match")
    assert [c.layout for c in compile_plan(p).comps] == [("x",), ("f", "s", "x", "y")]


def test_a_prefix_other_plans_may_share_keeps_every_attribute():
    """Under skip_till_any_match the leading components may be shared by
    plans reading different attributes of them (equal layouts only)."""
    p = plan("s", [comp("a", "A"), comp("b", "B"), comp("c", "C")],
             fields={"x": attr("c", "x")})
    assert [c.layout for c in compile_plan(p).comps] == [("f", "s", "x", "y")] * 2 + [("x",)]


@contextlib.contextmanager
def full_layouts() -> Iterator[None]:
    """Plans compiled as before per-component layouts (every attribute)."""
    narrow = compile_module._comp_layout
    compile_module._comp_layout = lambda p, ci, read, shared: compile_module._layout(
        p, p.components[ci].types)
    try:
        yield
    finally:
        compile_module._comp_layout = narrow


def _run(plans, rows, cut, old_state: bool):
    """The tape in two calls, the engine moved through a snapshot between
    them; with `old_state` the first engine keeps every attribute."""
    pool = StringPool()
    with full_layouts() if old_state else contextlib.nullcontext():
        first = CythonEngine(plans)
    out = []
    if rows[:cut]:
        out += first.process(tape(rows[:cut], pool, partition_key="part"), None)
        out += first.advance(max(r[1] for r in rows[:cut]))
    second = CythonEngine(plans)
    for part in (0, 1):
        second.restore(part, first.snapshot(part))
    if rows[cut:]:
        out += second.process(tape(rows[cut:], pool, partition_key="part", first_seq=cut), None)
        out += second.advance(max(r[1] for r in rows[cut:]))
    return out + second.advance(10**9)


@pytest.mark.parametrize("strategy", STRATEGIES)
@SETTINGS
@given(data=st.data())
def test_a_state_with_every_attribute_restores_into_per_component_layouts(strategy, data):
    plans, rows, _, _ = data.draw(scenario(strategy))
    cut = data.draw(st.integers(0, len(rows)))
    expected = ReferenceEngine(plans)
    want = list(expected.process(tape(rows, StringPool(), partition_key="part"), None)) \
        if rows else []
    want += expected.advance(10**9)
    assert multiset(_run(plans, rows, cut, old_state=True)) == multiset(want)
    assert multiset(_run(plans, rows, cut, old_state=False)) == multiset(want)


def test_a_state_of_another_width_is_refused():
    p = plan("p", [comp("a", "A"), comp("b", "B")], fields={"x": attr("b", "x")},
             strategy="skip_till_next_match")
    engine = CythonEngine([p])
    engine.process(tape([("A", 1, {"x": 1, "y": 2, "s": "u", "f": 0.5})], StringPool(),
                        partition_key="part"), None)
    state = engine._snapshot_raw(0)
    (alt, parts), = state["p"]
    key, stacks, *rest = parts[0]
    w, base, ts, seq, vals, kinds = stacks[0]
    assert w == 0  # the plan reads nothing of `a`
    spoiled = {"p": [(alt, [(key, [(2, base, ts, seq, vals * 2, kinds * 2), stacks[1]], *rest)])]}
    from caesar.services.store import tagged

    with pytest.raises(ValueError, match="rows of 2 attributes"):
        CythonEngine([p]).restore(0, {pid: tagged.encode(a) for pid, a in spoiled.items()})


def _stack_widths(engine: CythonEngine, pid: str) -> list[int]:
    """Each component's stored row width in the plan's first part."""
    ((_alt, parts),) = engine._snapshot_raw(0)[pid]
    return [stack[0] for stack in parts[0][1]]


def test_a_prefix_no_plan_shares_keeps_only_what_its_plan_reads():
    """The engine decides prefix sharing on plans compiled shareable, then
    compiles those that share with none without: LR's LeftSegment stored
    every attribute of each report for the other plans that never came."""
    left = plan("left", [comp("p", "A"), comp("r", "A")], equivalence=["y"],
                where=[cmp("!=", attr("r", "x"), attr("p", "x"))], fields={"x": attr("r", "x")})
    assert [c.layout for c in compile_plan(left).comps][0] == ("f", "s", "x", "y")
    rows = [("A", t, {"x": t, "y": 0, "s": "p", "f": 0.5}) for t in range(2)]
    alone = CythonEngine([left])
    alone.process(tape(rows, StringPool()), None)
    assert _stack_widths(alone, "left")[0] == 2  # (x, y)
    # a second plan sharing the prefix (its next component routed by a
    # constant): the shared component keeps every attribute
    other = plan("other", [comp("p", "A"), comp("t", "A")], equivalence=["y"],
                 where=[cmp("=", attr("t", "s"), "q")], fields={"x": attr("p", "f")})
    both = CythonEngine([left, other])
    assert both.shared_prefixes() == {"other": ("left", 1)}
    both.process(tape(rows, StringPool()), None)
    assert _stack_widths(both, "left")[0] == 4
