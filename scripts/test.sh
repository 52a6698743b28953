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

# Two or more workers (pytest-xdist), one test file each at a time: most
# integration tests wait on a broker, Ray or a JVM, so two share 2 cores well
# (serial: ~22 min; two workers: ~15). Each worker is its own session, with
# its own broker and Ray. CAESAR_TEST_WORKERS=0 runs serially.
cores="$(nproc 2>/dev/null || echo 2)"
workers="${CAESAR_TEST_WORKERS:-$(( cores < 2 ? 2 : (cores > 4 ? 4 : cores) ))}"
echo; echo "==> pytest ($workers workers)"
set +e
pytest -n "$workers" --dist loadfile --durations=15 "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$code"
