#!/usr/bin/env bash
# Sets everything up, then runs the main job: Linear Road end to end on the
# embedded default (a local Kafka broker, a local Ray, Spark in local mode):
# Spark produces position reports -> CAESAR services (Ray actors on Kafka)
# derive contexts, tolls and accident alerts -> Spark consumes the alerts to
# Parquet -> a plain Spark SQL job recomputes them and prints the comparison.
# Extra arguments go to `caesar demo` (see `caesar demo --help`).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
VENV="${CAESAR_VENV:-$ROOT/.venv}"
exec "$VENV/bin/caesar" demo --out "$ROOT/out/linear-road" "$@"
