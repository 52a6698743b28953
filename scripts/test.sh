#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite (unit, property,
# integration on a real Kafka broker, Ray and Spark local mode).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
VENV="${CAESAR_VENV:-$ROOT/.venv}"
export PATH="$VENV/bin:$HOME/.cache/caesar/bin:$PATH"

# The static checks (ruff, mypy, the Cython engine's stub against the built
# module: ~3 min, one core, stubtest alone ~2 min as it checks without a
# cache) run beside pytest instead of before it; their output follows
# pytest's and either failing fails the run.
checks_log="$(mktemp)"
(
  set -e
  echo "==> ruff"; ruff check .
  echo; echo "==> mypy"; mypy
  echo; echo "==> stubtest (the Cython engine, clean_columns, alert_rows, pane_table, key_table, distinct_set, grouping)"
  python -m mypy.stubtest caesar.services.matcher.engine caesar.services.scheduler.clean_columns \
    caesar.services.matcher.alert_rows caesar.services.matcher.pane_table \
    caesar.services.matcher.key_table caesar.services.matcher.distinct_set caesar.events.grouping \
    --ignore-missing-stub
) >"$checks_log" 2>&1 &
checks=$!
trap 'kill "$checks" 2>/dev/null || true' EXIT

# Two or more workers (pytest-xdist), one test file each at a time: most
# integration tests wait on a broker, Ray or a JVM, so two share 2 cores well
# (serial: ~22 min; two workers: 16-22 min as the host's speed varies; three
# were ~15 % faster but loaded the host so that the main job's consumer met a
# 15 s gap in its alerts). Each worker is its own session, with its own
# broker and Ray. CAESAR_TEST_WORKERS=0 runs serially.
cores="$(nproc 2>/dev/null || echo 2)"
workers="${CAESAR_TEST_WORKERS:-$(( cores < 2 ? 2 : (cores > 4 ? 4 : cores) ))}"
echo; echo "==> pytest ($workers workers)"
set +e
pytest -n "$workers" --dist loadfile --durations=15 "$@"
code=$?
wait "$checks"
checks_code=$?
set -e
echo; echo "==> static checks (run beside pytest)"
cat "$checks_log"
rm -f "$checks_log"
if [ "$code" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
if [ "$checks_code" -ne 0 ]; then
  echo "the static checks failed (exit $checks_code): see above" >&2
  [ "$code" -ne 0 ] || code=1
fi
exit "$code"
