#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite (unit, property,
# integration on a real Kafka broker, Ray and Spark local mode).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
VENV="${CAESAR_VENV:-$ROOT/.venv}"
export PATH="$VENV/bin:$HOME/.cache/caesar/bin:$PATH"

echo; echo "==> ruff"
ruff check .

echo; echo "==> mypy"
mypy
# The Cython engine's stub (engine.pyi) against the built module.
python -m mypy.stubtest caesar.services.matcher.engine --ignore-missing-stub

echo; echo "==> pytest"
set +e
pytest --durations=15 "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$code"
