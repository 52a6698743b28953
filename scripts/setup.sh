#!/usr/bin/env bash
# Sets up everything CAESAR needs on a fresh machine, idempotently:
# a virtualenv with exactly the tested dependency set (requirements/lock.txt)
# and the project (its Cython engine compiled), plus the cached jars/binaries
# the local runtime, Spark jobs and chart tests use.
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

# Reinstall only when the lock, the build spec or a Cython source changed.
stamp="$VENV/.caesar-install-stamp"
want="$(cat requirements/lock.txt pyproject.toml setup.py $(find src/caesar -name "*.pyx" | sort) \
        src/caesar/services/matcher/*.pxd 2>/dev/null | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  step "installing the locked dependencies (first run downloads ~1 GB of wheels)"
  "$PY" -m pip install --disable-pip-version-check -q --upgrade pip setuptools wheel
  "$PY" -m pip install --disable-pip-version-check -q -r requirements/lock.txt
  step "installing CAESAR (editable) and compiling the Cython matcher"
  # Compiled once, in place (build/ keeps the objects the wheel build reuses);
  # the editable install then only links src/ and the console scripts.
  "$PY" setup.py -q build_ext --inplace
  CAESAR_BUILT_IN_PLACE=1 "$PY" -m pip install --disable-pip-version-check -q --no-deps \
    --no-build-isolation -e .
  echo "$want" > "$stamp"
else
  echo "CAESAR already installed in $VENV (delete $stamp to force a reinstall)"
fi

# Each fetch below caches under ~/.cache/caesar and is a no-op when cached.
step "fetch kafka"
bash src/caesar/runtime/fetch_kafka.sh
step "fetch spark jars"
CAESAR_PYTHON="$PY" bash src/caesar/jobs/fetch_spark_jars.sh
step "fetch helm"
bash scripts/fetch_helm.sh

# Headless Chromium for the live context view's browser test: Debian's package
# (browsers fetched by test tools cannot be downloaded here).
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing Debian's chromium (headless browser tests)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "note: chromium is not installed and this is not root: the live view's browser test will skip"
  fi
fi
