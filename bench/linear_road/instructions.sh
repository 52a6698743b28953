#!/usr/bin/env bash
# Instructions of the embedded pipeline over one window of the standard data
# (instructions.py says why): callgrind counts only between the START and END
# lines the harness prints. Needs valgrind (apt-get install valgrind) and
# $CAESAR_LR_DATA (standard.py).
#   bash bench/linear_road/instructions.sh OUT.callgrind [instructions.py options]
set -euo pipefail
out=${1:?usage: instructions.sh OUT.callgrind [--window A B] [--history S]}
shift
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
python=${PYTHON:-.venv/bin/python}
pipe=$(mktemp -u)
mkfifo "$pipe"
trap 'rm -f "$pipe"' EXIT
PYTHONHASHSEED=0 PYTHONPATH=.:src valgrind --tool=callgrind --instr-atstart=no \
  --callgrind-out-file="$out" "$python" -m bench.linear_road.instructions --signal "$@" \
  >"$pipe" 2>"$out.log" &
vg=$!
while read -r line; do
  case "$line" in
    START*) callgrind_control -i on "$vg" >/dev/null 2>&1 ;;
    END*) callgrind_control -i off "$vg" >/dev/null 2>&1 ;;
    *) echo "$line" ;;
  esac
done <"$pipe"
wait "$vg"
echo "Ir: $(grep -m1 '^totals:' "$out" | awk '{print $2}')"
