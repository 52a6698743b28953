"""docs/spark.md: every `caesar spark ...` command it shows parses with the real
CLI and names a model that exists, and every option it mentions is one."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import typer

from caesar.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "spark.md"


def commands() -> list[list[str]]:
    text = DOC.read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    out = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip().replace("$M", str(ROOT / "src" / "caesar" / "examples"))
            if line.startswith("caesar spark"):
                out.append(shlex.split(line)[2:])
            elif "caesar.cli.main" in line and " spark " in line:
                words = shlex.split(line)
                out.append(words[words.index("spark") + 1:])
    return out


def test_the_commands_in_the_doc_parse():
    cli._register_all()
    root = typer.main.get_command(cli.app)
    spark = root.get_command(click.Context(root), "spark")
    found = commands()
    assert {c[0] for c in found} == {"produce", "consume", "replay"}
    for name, *args in found:
        sub = spark.get_command(click.Context(spark), name)
        params = sub.make_context(name, args).params
        model = Path(params["model"])
        assert model.is_file() or str(model) == "/model/model.caesar", model
