"""The embedded pipeline over one window of the standard data, for counting
its instructions (callgrind): what sessions 35-36 gave per change, because
this host's speed moves up to 2x within an hour and an instruction count
does not.

    bash bench/linear_road/instructions.sh OUT.callgrind [--window 6600 6620] [--history 40]

runs this under `valgrind --tool=callgrind --instr-atstart=no` and switches
the count on at the window's first second and off after its last (the lines
START and END this prints with --signal), then prints the total ("Ir").
Alone (`python -m bench.linear_road.instructions`) it times the window.

The history must cover a car's report interval (30 s): with less, a third
of the window's cars are new to the engine and the count includes a Part
per car and plan that the peak does not make (session 36's correction).
Input records are built, and each second's watermark computed, before the
window starts, as throughput.py does.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from bench.linear_road import throughput as T
from bench.linear_road.standard import data_path, load


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--window", nargs=2, type=int, default=[6600, 6620])
    ap.add_argument("--history", type=int, default=40, help="seconds before the window")
    ap.add_argument("--model", default="model_per_segment")
    ap.add_argument("--data", default=None, help="LR data file (default: $CAESAR_LR_DATA)")
    ap.add_argument("--signal", action="store_true",
                    help="print START/END around the window (instructions.sh)")
    a = ap.parse_args(argv)

    from caesar.examples import model_path
    from caesar.language import compile_model
    from caesar.services.common.collector import tune_collector

    reports = load(data_path(a.data)).window(a.window[0] - a.history, a.window[1])
    plan = compile_model(str(model_path("linear_road").with_name(a.model + ".caesar")))
    seconds = T.input_seconds(reports, plan)
    tune_collector()
    timed = T.TimedPipeline(plan)
    n = outputs = 0
    started = False
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    for t, k, recs, wm in seconds:
        if t >= a.window[0] and not started:
            started = True
            if a.signal:
                print("START", os.getpid(), flush=True)
                time.sleep(2)  # callgrind_control needs a moment
            r0 = resource.getrusage(resource.RUSAGE_SELF)
        if started:
            n += k
        outputs += len(timed.second(recs, wm))
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    if a.signal:
        print("END", flush=True)
        time.sleep(1)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    print(f"window {a.window[0]}-{a.window[1]} after {a.history} s: {n:,} reports, "
          f"{outputs:,} outputs in all, {cpu:.2f} CPU-s -> {n / max(cpu, 1e-9):,.0f} "
          "reports/CPU-s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
