"""Every `caesar` code block of docs/language.md parses, and printing it back
with the formatter and parsing again gives the same AST."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from caesar.examples import model_path
from caesar.language import parse
from caesar.language.formatter import format_model

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "language.md"
BLOCKS = re.findall(r"```caesar\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
MODELS = [model_path(name)
          for name in ("linear_road", "hospital_hygiene", "aggressive_driving")] + [
          Path(__file__).parent / "data" / "figure3.caesar"]


def test_the_doc_has_examples() -> None:
    assert len(BLOCKS) >= 12


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_doc_example_round_trips(index: int) -> None:
    text = BLOCKS[index]
    model = parse(text, f"docs/language.md#{index}")
    printed = format_model(model)
    again = parse(printed)
    assert again == model
    assert format_model(again) == printed


@pytest.mark.parametrize("path", MODELS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_model_files_round_trip(path: Path) -> None:
    model = parse(path.read_text(encoding="utf-8"), str(path))
    assert parse(format_model(model)) == model


def test_positions_are_kept() -> None:
    model = parse("MODEL m\n\nDERIVE A(x.v)\n  PATTERN B x\n  WHERE x.v > 1\n")
    query = model.queries[0]
    assert (query.pos.line, query.pos.column) == (3, 1)
    assert (query.where.pos.line, query.where.pos.column) == (5, 13)
    comp = query.pattern.components[0]
    assert (comp.pos.line, comp.pos.column) == (4, 11)
