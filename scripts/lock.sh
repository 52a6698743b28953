#!/usr/bin/env bash
# Regenerates the lock files from pyproject.toml's ranges (run after changing a
# dependency; commit the result). uv resolves for Linux x86_64, Python 3.11:
#   requirements/lock.txt      everything (dev): what scripts/setup.sh installs
#   requirements/services.txt  core + [ray]: the services image
#   requirements/spark.txt     core + [spark]: the Spark jobs image
# Each image lock is resolved with the dev lock as constraints, so a package has
# one version everywhere (tests/deploy checks it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
UV_VERSION="${CAESAR_UV_VERSION:-0.13.9}"
UV=(uvx --from "uv==$UV_VERSION" uv)
command -v uvx >/dev/null || UV=(python3 -m uv)
compile() {
  "${UV[@]}" pip compile pyproject.toml --quiet --python-version 3.11 \
    --python-platform x86_64-manylinux_2_28 --no-header --annotation-style line "$@"
}
compile --extra dev -o requirements/lock.txt
compile --extra ray -c requirements/lock.txt -o requirements/services.txt
compile --extra spark -c requirements/lock.txt -o requirements/spark.txt
wc -l requirements/*.txt
