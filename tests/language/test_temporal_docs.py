"""The TPStream examples of docs/language.md compile (the round-trip test
only parses them) once the event type they read is declared."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from caesar.language import compile_model
from caesar.plans.temporal import TemporalPlan

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"
SECTION = DOC.read_text(encoding="utf-8").split("## Situations and temporal patterns")[1]
SECTION = SECTION.split("\n## ")[0]
BLOCKS = re.findall(r"```caesar\n(.*?)```", SECTION, flags=re.S)
HEAD = """MODEL doc
TIME UNIT SECONDS
PARTITION BY car_id
EVENT CarSensor(ts INT, car_id INT, speed FLOAT, accel FLOAT) FROM TOPIC "cs"
"""


def test_the_section_has_examples() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_temporal_doc_example_compiles(index: int) -> None:
    plan = compile_model(HEAD + BLOCKS[index])
    stages = plan.deriver_stages + plan.matcher_stages + tuple(t.stage for t in plan.transitions)
    assert any(isinstance(s.plan, TemporalPlan) for s in stages)
