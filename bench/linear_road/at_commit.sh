#!/usr/bin/env bash
# Run a bench module against the CAESAR sources of an earlier commit, for
# before/after figures measured side by side on this machine:
#     bash bench/linear_road/at_commit.sh COMMIT bench.linear_road.throughput --label before ...
# The commit's src/ is checked out under /tmp (its Cython engine built there);
# the bench code is this tree's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
commit="$1"; shift
dir="/tmp/caesar-at-$(git -C "$ROOT" rev-parse --short "$commit")"
if [ ! -d "$dir/src" ]; then
  mkdir -p "$dir"
  git -C "$ROOT" archive "$commit" src setup.py pyproject.toml | tar -x -C "$dir"
  (cd "$dir" && "$ROOT/.venv/bin/python" setup.py -q build_ext --inplace >/dev/null 2>&1)
fi
cd "$ROOT"
PYTHONPATH="$dir/src:$ROOT" exec "$ROOT/.venv/bin/python" -m "$@"
