#!/usr/bin/env bash
# Before/after at once: an earlier commit (at_commit.sh) and this tree run
# the same throughput measurement at the same time, one per core (swapped
# every pair), N pairs; prints each pair and the median after/before.
#     CAESAR_LR_DATA=L1.dat bash bench/linear_road/at_once.sh COMMIT [PAIRS] [throughput.py options]
# Run one after the other, two runs of the same code differ by up to 10 % on
# this shared host; at once, both see the same neighbours, and a null pair
# (COMMIT = this tree) gives ratios within 0.998-1.03 (session 42). Both
# sides' outputs are checked against the oracle (exact=1).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
commit=${1:?usage: at_once.sh COMMIT [PAIRS] [throughput.py options]}
pairs=${2:-6}
shift $(( $# >= 2 ? 2 : 1 ))
opts=("$@")
[ ${#opts[@]} -gt 0 ] || opts=(--window 6600 6660 --history 60 --models model_per_segment)
cd "$ROOT"
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
rate() { grep -m1 "model_per_segment \|^  model " "$1" | awk '{print $2}' | tr -d ,; }
for i in $(seq "$pairs"); do
  cb=$(( i % 2 )); ca=$(( 1 - cb ))
  taskset -c "$cb" bash bench/linear_road/at_commit.sh "$commit" bench.linear_road.throughput \
    "${opts[@]}" --rounds 1 --label before --no-save >"$log/b" 2>&1 &
  pb=$!
  PYTHONPATH="$ROOT:$ROOT/src" taskset -c "$ca" "$ROOT/.venv/bin/python" -m bench.linear_road.throughput \
    "${opts[@]}" --rounds 1 --label after --no-save >"$log/a" 2>&1 &
  pa=$!
  wait "$pb" "$pa"
  b=$(rate "$log/b"); a=$(rate "$log/a")
  echo "$b $a" >>"$log/pairs"
  echo "pair $i (after on core $ca): before $b after $a, exact=$(grep -c 'exact: True' "$log/a")/$(grep -c 'exact: True' "$log/b")"
done
"$ROOT/.venv/bin/python" - "$log/pairs" <<'PY'
import statistics, sys
rows = [tuple(map(float, line.split())) for line in open(sys.argv[1])]
ratios = [a / b for b, a in rows]
print(f"median before {statistics.median(b for b, _ in rows):,.0f}, after "
      f"{statistics.median(a for _, a in rows):,.0f} reports/CPU-s; after/before: median "
      f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}), {len(rows)} pairs")
PY
