"""Golden tests: phase 1 (query set), phase 2 (unoptimized plan), every
optimizer rule (plan before / after that rule) and the execution plan, for
each model in MODELS. Regenerate after an intended change with
`CAESAR_UPDATE_GOLDEN=1 pytest tests/language/test_golden.py` and review the diff."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest

from caesar.examples import NAMES, model_path
from caesar.language import RULES, compile_phases
from caesar.language.algebra import render_plan
from caesar.language.explain import render_execution
from caesar.language.optimizer import optimize
from caesar.language.phase1 import render_query_set

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
MODELS = {
    "figure3": HERE / "data" / "figure3.caesar",
    "overlap": HERE / "data" / "overlap.caesar",
    **{name: model_path(name) for name in NAMES},
}
UPDATE = os.environ.get("CAESAR_UPDATE_GOLDEN") == "1"


def _check(name: str, actual: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}; run with CAESAR_UPDATE_GOLDEN=1"
    assert actual == path.read_text(encoding="utf-8"), f"{path} differs"


@cache
def _compiled(model: str):
    path = MODELS[model]
    return compile_phases(path.read_text(encoding="utf-8"), path.name)


@pytest.mark.parametrize("model", MODELS)
def test_phase1(model: str) -> None:
    _check(f"{model}.phase1", render_query_set(_compiled(model).query_set))


@pytest.mark.parametrize("model", MODELS)
def test_phase2(model: str) -> None:
    _check(f"{model}.phase2", render_plan(_compiled(model).unoptimized))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("rule", range(len(RULES)), ids=[name for name, _ in RULES])
def test_rule(model: str, rule: int) -> None:
    compiled = _compiled(model)
    before = optimize(compiled.unoptimized, RULES[:rule])
    after = optimize(before, RULES[rule:rule + 1])
    text = "-- before\n" + render_plan(before) + "-- after\n" + render_plan(after)
    _check(f"{model}.{RULES[rule][0]}", text)


@pytest.mark.parametrize("model", MODELS)
def test_execution(model: str) -> None:
    _check(f"{model}.execution", render_execution(_compiled(model).execution))
