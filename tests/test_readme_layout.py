"""The README's "Where things are" table matches the tree: every path it
names exists, and every room of the package is named."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _table_paths() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Where things are", 1)[1].split("\n## ", 1)[0]
    paths: list[str] = []
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        first_cell = row.split("|")[1]
        for name in re.findall(r"`([^`]+)`", first_cell):
            braces = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", name)
            if braces:
                head, alternatives, tail = braces.groups()
                paths += [head + alt + tail for alt in alternatives.split(",")]
            else:
                paths.append(name)
    return paths


def test_every_path_in_the_table_exists() -> None:
    paths = _table_paths()
    assert len(paths) > 20
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert missing == []


def test_every_room_of_the_package_is_in_the_table() -> None:
    named = {p.rstrip("/") for p in _table_paths()}
    package = ROOT / "src" / "caesar"
    rooms = [d for d in (*package.iterdir(), *(package / "services").iterdir())
             if d.is_dir() and (d / "__init__.py").exists() and d.name != "services"]
    unnamed = sorted(str(d.relative_to(ROOT)) for d in rooms
                     if str(d.relative_to(ROOT)) not in named)
    assert unnamed == []
