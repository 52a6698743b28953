"""The demo's produce progress: a live bar on a terminal, lines otherwise."""

from __future__ import annotations

import io
import sys

from caesar.examples.linear_road.produce import ProduceStats, print_progress, produce_progress


def test_lines_when_not_a_terminal(monkeypatch, capsys):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with produce_progress(60) as progress:
        assert progress is print_progress
        progress(ProduceStats(records=900, messages=5400, slices=3, simulated_s=75, wall_s=30.0))
    # the pace reached, beside the rate: --speed 10 on a busy machine may give less
    assert "900 reports sent" in out.getvalue() and "x2.5 real time" in out.getvalue()


def test_a_bar_of_simulated_time_on_a_terminal(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    monkeypatch.setattr(sys, "stdout", out)
    with produce_progress(60) as progress:
        assert progress is not print_progress
        progress(ProduceStats(records=1200, messages=1200, slices=2, simulated_s=30, wall_s=2.0))
        progress(ProduceStats(records=2400, messages=2400, slices=4, simulated_s=75, wall_s=4.0))
    text = out.getvalue()
    assert "60/60" in text and "2,400 reports" in text  # capped at the duration
    assert "x18.8 real time" in text
