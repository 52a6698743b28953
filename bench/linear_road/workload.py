"""Query workloads: the Linear Road model plus replicated context queries.

The CAESAR paper (section 7.1) simulates low, average and high query
workloads by replicating the benchmark's queries, and its Figure 12 setups
have critical context windows whose queries can be suspended elsewhere.
`model_text(replicas)` appends `replicas` queries to each critical context of
src/caesar/examples/linear_road/model.caesar, written like the paper's Figure 3 queries
(a pattern over the position reports of the partition's own segment, not on
the exit lane): in congestion a toll-candidate notice, in accident a warning
notice. Replica i takes the cars with vid % replicas = i, so the replicas are
distinct queries (sub-plan sharing cannot merge them) and the number of
outputs stays the same as the workload grows: what grows is the number of
queries evaluating every report. They are single-event patterns, so the
context-independent baseline (context = output filter) derives exactly what
the context-aware plan derives.
"""

from __future__ import annotations

from caesar.examples import model_path

MODEL = model_path("linear_road")


def model_text(replicas: int, kind: str = "filter") -> str:
    """kind "filter": single-event replicas (above); "sequence": the paper's
    NewTravelingCar, SEQ(NOT PositionReport p1, PositionReport p2) per car
    within 31 s, whose negation sees the reports before a context window in
    the context-independent baseline (its outputs may differ at window starts;
    the model's own tolls and alerts do not)."""
    if kind not in ("filter", "sequence"):
        raise ValueError(f"unknown replica kind {kind!r}")
    text = MODEL.read_text(encoding="utf-8")
    if replicas <= 0:
        return text
    events, congestion, accident = [], [], []
    for i in range(replicas):
        events.append(f'EVENT CongestionNotice{i}(vid INT, time INT, xway INT, dir INT, seg INT,'
                      f' spd INT)\n  TO TOPIC "lr-bench-congestion-{i}"')
        events.append(f'EVENT AccidentNotice{i}(vid INT, time INT, xway INT, dir INT, seg INT)'
                      f'\n  TO TOPIC "lr-bench-accident-{i}"')
        cond = f"p.seg = p.pseg AND p.lane != 4 AND p.vid % {replicas} = {i}"
        pattern = "PositionReport p"
        if kind == "sequence":
            pattern = "SEQ(NOT PositionReport q, PositionReport p)"
            cond = f"[vid] AND q.seg = p.seg AND {cond}"
        within = "\n    WITHIN 31 SECONDS" if kind == "sequence" else ""
        congestion.append(f"  DERIVE CongestionNotice{i}(p.vid, p.time, p.xway, p.dir, p.seg,"
                          f" p.spd)\n    PATTERN {pattern}\n    WHERE {cond}{within}\n")
        accident.append(f"  DERIVE AccidentNotice{i}(p.vid, p.time, p.xway, p.dir, p.seg)\n"
                        f"    PATTERN {pattern}\n    WHERE {cond}{within}\n")
    marker = "-- ---------------------------------------------------------------------------\n" \
             "DEFAULT CONTEXT clear {"
    if marker not in text:
        raise ValueError("src/caesar/examples/linear_road/model.caesar changed: context section not found")
    text = text.replace(marker, "\n".join(events) + "\n\n" + marker)
    text = text.replace("CONTEXT congestion {\n", "CONTEXT congestion {\n" + "".join(congestion), 1)
    return text.replace("CONTEXT accident {\n", "CONTEXT accident {\n" + "".join(accident), 1)
