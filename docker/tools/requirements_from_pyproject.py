"""Print the pinned runtime requirements of pyproject.toml, one per line,
leaving out the distributions an image gets elsewhere or does not need.

Used by the image builds so each image installs exactly the versions the
project pins (no second list to keep in step), e.g.:

    python requirements_from_pyproject.py pyproject.toml --exclude pyspark matplotlib
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

# The distribution name at the start of a PEP 508 requirement ("ray[default]==2.60.0" -> "ray").
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return canonical(match.group(1))


def runtime_requirements(pyproject: Path, exclude: set[str]) -> list[str]:
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    try:
        deps = data["project"]["dependencies"]
    except KeyError as exc:
        raise ValueError(f"{pyproject}: no [project] dependencies") from exc
    wanted = {canonical(name) for name in exclude}
    return [dep for dep in deps if requirement_name(dep) not in wanted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pyproject", type=Path)
    parser.add_argument("--exclude", nargs="*", default=[], metavar="NAME")
    args = parser.parse_args(argv)
    try:
        lines = runtime_requirements(args.pyproject, set(args.exclude))
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
        print(f"requirements_from_pyproject: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
