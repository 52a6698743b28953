#!/usr/bin/env bash
# Sets up everything CAESAR needs on a fresh machine, idempotently:
# a virtualenv with the project (and its Cython engine) installed, plus the
# cached jars/binaries the local runtime, Spark jobs and chart tests use.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${CAESAR_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

if [ ! -x "$PY" ]; then
  step "creating virtualenv $VENV"
  python3 -m venv "$VENV"
fi

# Reinstall only when the dependency spec or a Cython source changed.
stamp="$VENV/.caesar-install-stamp"
want="$(cat pyproject.toml setup.py services/matcher/*.pyx services/matcher/*.pxd 2>/dev/null | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  step "installing CAESAR and its dependencies (first run downloads ~1 GB of wheels)"
  "$PY" -m pip install --disable-pip-version-check -q --upgrade pip setuptools wheel
  "$PY" -m pip install --disable-pip-version-check -q -e ".[dev]"
  step "compiling the Cython matcher"
  "$PY" setup.py -q build_ext --inplace
  echo "$want" > "$stamp"
else
  echo "CAESAR already installed in $VENV (delete $stamp to force a reinstall)"
fi

# Each fetch below caches under ~/.cache/caesar and is a no-op when cached.
for fetch in scripts/fetch_*.sh; do
  [ -e "$fetch" ] || continue
  step "$(basename "$fetch" .sh | tr _ ' ')"
  bash "$fetch"
done
