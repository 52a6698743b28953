"""bench/linear_road/report.py: the L-rating it reports is the highest level
that holds with every level below it holding, a level holds only with exact
outputs, and it reads only the rows of its own run."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2]))  # bench/ is not an installed package

from bench.linear_road import figures, kafka_ray, report, throughput  # noqa: E402


def _level(xways: int, max_s: float, label: str = "r", diff: int = 0) -> dict[str, object]:
    return {"label": label, "xways": xways, "window": "6000-7800", "visible_p50_s": 0.7,
            "visible_p99_s": 3.0, "visible_max_s": max_s, "topic_max_s": 2.0,
            "outputs": 100, "expected": 100, "differences_tolls": diff,
            "differences_alerts": 0, "dead_letters": 0, "visible_unseen": 0}


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_the_rating_stops_at_the_first_level_that_does_not_hold(tmp_path):
    _write(tmp_path / "kafka_ray.csv", [
        _level(1, 4.2), _level(2, 5.5), _level(4, 4.0),  # 4 held, but 2 did not
        _level(8, 1.0, label="an older run")])
    got = report.summarize("r", False, {"kafka_ray": 0}, tmp_path)["kafka_ray"]
    assert got["l_rating"] == 1
    assert [lv["xways"] for lv in got["levels"]] == [1, 2, 4]
    assert "**L-rating 1**" in report.markdown(
        report.summarize("r", False, {"kafka_ray": 0}, tmp_path))


def test_the_cpu_per_report_by_service_is_shown_per_level(tmp_path):
    costs = {"actors_per_service": "1", "actors": "matcher=2", "scheduler_us_per_report": 13.6,
             "deriver_us_per_report": 18.0, "router_us_per_report": 9.2,
             "matcher_us_per_report": 54.5, "cpu_broker_s": 383.0}
    _write(tmp_path / "kafka_ray.csv", [{**_level(4, 4.6), **costs}])
    got = report.summarize("r", False, {"kafka_ray": 0}, tmp_path)["kafka_ray"]["levels"][0]
    assert got["us_per_report"] == {"scheduler": 13.6, "deriver": 18.0, "router": 9.2,
                                    "matcher": 54.5}
    assert "| 4 | 1 matcher=2 | 13.6 | 18.0 | 9.2 | 54.5 | 383.0 |" in report.markdown(
        report.summarize("r", False, {"kafka_ray": 0}, tmp_path))


def test_a_level_with_a_wrong_output_does_not_hold(tmp_path):
    _write(tmp_path / "kafka_ray.csv", [_level(1, 1.0, diff=3)])
    assert report.summarize("r", False, {}, tmp_path)["kafka_ray"]["l_rating"] == 0


def test_embedded_ratio_and_exactness_come_from_this_runs_rows(tmp_path):
    """The ratio is the window's (pipeline and plain loop each timed on the
    window after the history); the whole input's is shown beside it."""
    rows: list[dict[str, object]] = []
    head = {"label": "r", "window": "6000-7800", "history_s": 600}
    for rate, plain, diff in ((30_000, 380_000, 0), (28_000, 360_000, 0)):
        rows.append({**head, "config": "model_per_segment", "reports_per_cpu_s": rate,
                     "all_reports_per_cpu_s": rate + 10_000, "differences_tolls": diff,
                     "differences_alerts": 0})
        rows.append({**head, "config": "plain loop", "reports_per_cpu_s": plain,
                     "all_reports_per_cpu_s": plain + 20_000, "differences_tolls": "",
                     "differences_alerts": ""})
    rows.append({"label": "old", "window": "6600-6660", "history_s": 60,
                 "config": "model_per_segment", "reports_per_cpu_s": 1,
                 "all_reports_per_cpu_s": 1, "differences_tolls": 5, "differences_alerts": 0})
    _write(tmp_path / "throughput_vs_plain.csv", rows)
    emb = report.summarize("r", False, {}, tmp_path)["embedded"]
    # the medians of the two rounds, as throughput.py prints them
    assert emb["reports_per_cpu_s"] == 29_000 and emb["plain_loop_reports_per_cpu_s"] == 370_000
    assert emb["ratio_to_plain"] == round(29_000 / 370_000, 3)
    assert emb["ratio_to_plain_whole_input"] == round(39_000 / 390_000, 3)
    assert emb["exact"]
    assert "in the window 6000-7800 after 600 s of history" in report.markdown(
        report.summarize("r", False, {}, tmp_path))


def test_the_plain_loop_times_its_window_after_its_history():
    """plain_loop's window rate covers the window's reports only, and its
    outputs are the whole input's, as expected_outputs gives them."""
    from caesar.examples.linear_road.oracle import expected_outputs
    from caesar.examples.linear_road.records import PositionReport

    prs = [PositionReport(t, vid, 50, 0, 1, 0, 10 + t // 30, (10 + t // 30) * 5280)
           for t in range(0, 240, 30) for vid in range(5)]

    class Few:
        def position_reports(self) -> list[PositionReport]:
            return prs

    row = throughput.plain_loop(Few(), 120)  # type: ignore[arg-type]
    assert row["reports"] == sum(1 for r in prs if r.time >= 120) == 20
    assert row["all_reports"] == 40
    assert row["cpu_s"] <= row["all_cpu_s"]
    want = expected_outputs(prs)
    assert (row["tolls"], row["alerts"]) == (len(want.tolls), len(want.alerts))
    assert row["tolls"] > 0


def test_each_part_accepts_the_command_it_is_given(tmp_path):
    """What report runs parses with each part's own parser (a quick run once
    lost its Kafka + Ray part to "--tag -report-quick" read as an option),
    and the quick Kafka + Ray rows go where summarize reads them."""
    parts = {"throughput": throughput, "kafka_ray": kafka_ray, "figures": figures}
    for argv in ([], ["--quick"], ["--xways", "1", "2", "4"]):
        args = report.parser().parse_args([*argv, "--out", str(tmp_path)])
        for part, extra in report.commands(args, "a label").items():
            got = parts[part].parser().parse_args(extra)
            assert got.out == tmp_path
            assert got.label == "a label"  # figures name their summaries' run by it
            if part == "kafka_ray":
                assert got.xways == ([1] if args.quick else args.xways)
                assert got.tag == ("-report-quick" if args.quick else "")
                # the deployment that held level 4: one actor each, two matchers
                assert kafka_ray._actors(got.actors) == {"actors": 1,
                                                         "service_actors": {"matcher": 2}}


def test_figures_a_run_skipped_are_shown_as_an_earlier_runs(tmp_path):
    _write(tmp_path / "figure12-summary.csv", [{"figure": "a", "label": "5 queries",
                                                "ci_over_ca": 2.3, "agree": True, "run": "r"}])
    ran = report.markdown(report.summarize("r", False, {"figures": 0}, tmp_path))
    skipped = report.markdown(report.summarize("s", False, {"kafka_ray": 0}, tmp_path))
    assert "| a 5 queries | 2.3 | True |" in ran and "| a 5 queries | 2.3 | True |" in skipped
    assert "Not from this run" not in ran
    assert "Not from this run (figures exit skipped): from the run 'r'." in skipped


def test_a_summary_of_another_run_is_shown_as_that_runs(tmp_path):
    """A figures part that failed half way (Figure 12 written, 14 not), and a
    summary from before summaries named their run. The run's name, not the
    file's time, tells them apart: a clone gives every file the same time."""
    for fig, run in (("figure12", "report now"), ("figure14", "figures earlier")):
        _write(tmp_path / f"{fig}-summary.csv", [{"figure": "a", "label": "p", "ci_over_ca": 2,
                                                  "non_shared_over_shared": 3, "agree": True,
                                                  "run": run}])
    text = report.markdown(report.summarize("report now", False, {"figures": -9}, tmp_path))
    assert text.count("Not from this run (figures exit -9): from the run 'figures earlier'.") == 1
    assert text.index("Not from this run") > text.index("## Figure 14")
    _write(tmp_path / "figure14-summary.csv", [{"figure": "a", "label": "p",
                                                "non_shared_over_shared": 3, "agree": True}])
    text = report.markdown(report.summarize("report now", False, {"figures": -9}, tmp_path))
    assert "Not from this run (figures exit -9): from an earlier, unnamed run." in text


def test_the_figures_summary_names_its_run(tmp_path):
    import numpy as np

    reports = figures.Reports({f: np.array([0], dtype=np.int64) for f in figures.FIELDS})
    point = figures.Point14("a", 1, 60, 60, 1)
    assert figures.figure14(reports, 1, 1, 1, tmp_path, "", [point], None, "report x")
    (row,) = report.csv_rows(tmp_path / "figure14-summary.csv")
    assert row["run"] == "report x"


def test_render_writes_the_last_runs_report_again_from_its_rows(tmp_path):
    _write(tmp_path / "kafka_ray.csv", [_level(4, 4.6, label="report then"),
                                        _level(5, 6.0, label="report then"),
                                        _level(8, 1.0, label="another run")])
    (tmp_path / "report.json").write_text('{"label": "report then", "exit_codes": {"kafka_ray": 0}}')
    assert report.main(["--render", "--out", str(tmp_path)]) == 0
    got = (tmp_path / "report.md").read_text()
    assert "# Linear Road report: report then" in got and "**L-rating 4**" in got
    assert "| 8 |" not in got


def test_state_age_takes_the_medians_per_history_and_draws_them(tmp_path):
    from bench.linear_road import state_age

    rows = [{"history_s": h, "pipeline": p, "plain": 400_000, "ratio": p / 400_000}
            for h, p in ((60, 240_000), (2100, 140_000), (60, 220_000), (2100, 150_000))]
    med = state_age.medians(rows)
    assert list(med) == [60, 2100]
    assert med[60]["pipeline"] == 230_000 and med[2100]["ratio"] == 145_000 / 400_000
    state_age.plot(rows, tmp_path / "s.png", "t")
    assert (tmp_path / "s.png").stat().st_size > 0
    try:
        state_age.main(["--histories", "0", "--out", str(tmp_path)])
    except SystemExit as e:
        assert "positive" in str(e)
    else:
        raise AssertionError("a history of 0 s was accepted")
