"""Spark entry file for the CAESAR jobs: the Spark operator needs a file for
mainApplicationFile, the jobs are Python modules (`python -m caesar.examples.linear_road.x`).

    spark-submit run_module.py caesar.examples.linear_road.produce [job arguments...]
"""

from __future__ import annotations

import runpy
import sys


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: run_module.py MODULE [ARGS...]  (e.g. caesar.examples.linear_road.produce)")
    module = sys.argv[1]
    # The job sees the argv it would have under `python -m MODULE ARGS...`
    # (run_module sets argv[0] to the module's file, as -m does).
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
