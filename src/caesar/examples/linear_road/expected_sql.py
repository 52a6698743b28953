"""The expected Linear Road outputs in plain Spark SQL, per src/caesar/examples/linear_road/SPEC.md.

Independent of the CAESAR engine: window functions over each car's report
sequence (entering, stopped runs), a running count of stopped cars per position
(accidents), per-minute segment statistics joined back to the entering reports.
Section numbers refer to SPEC.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Input view: `reports(time, vid, spd, xway, lane, dir, seg, pos)`.
_VIEWS = {
    # Each report with its car's previous report (sections 1, 3) and next report time (4).
    "lr_seq": """
        SELECT r.*, r.time DIV 60 + 1 AS minute,
               LAG(vid)  OVER w AS p_vid,  LAG(xway) OVER w AS p_xway,
               LAG(dir)  OVER w AS p_dir,  LAG(seg)  OVER w AS p_seg,
               LAG(lane) OVER w AS p_lane, LAG(pos)  OVER w AS p_pos,
               LAG(spd)  OVER w AS p_spd,  LEAD(time) OVER w AS next_time
        FROM reports r
        WINDOW w AS (PARTITION BY vid ORDER BY time)""",
    # Section 3: entering reports.
    "lr_entering": """
        SELECT vid, time, xway, dir, seg, minute FROM lr_seq
        WHERE lane != 4 AND (p_vid IS NULL OR p_xway != xway OR p_dir != dir OR p_seg != seg)""",
    # Section 4: runs of consecutive zero-speed reports of a car at one position.
    "lr_runs_marked": """
        SELECT *, SUM(CASE WHEN spd = 0 AND p_spd = 0 AND p_xway = xway AND p_dir = dir
                                AND p_lane = lane AND p_pos = pos THEN 0 ELSE 1 END)
                  OVER (PARTITION BY vid ORDER BY time ROWS UNBOUNDED PRECEDING) AS run_id
        FROM lr_seq""",
    # A car is stopped at the position from its run's 4th report (t4) until the report
    # after the run (tm; NULL = never moves in the input).
    "lr_stopped": """
        SELECT xway, dir, lane, pos,
               try_element_at(sort_array(collect_list(time)), 4) AS t4,
               max_by(next_time, time) AS tm
        FROM lr_runs_marked WHERE spd = 0
        GROUP BY vid, run_id, xway, dir, lane, pos
        HAVING COUNT(*) >= 4""",
    "lr_stop_count": """
        SELECT xway, dir, lane, pos, t,
               SUM(d) OVER (PARTITION BY xway, dir, lane, pos ORDER BY t
                            ROWS UNBOUNDED PRECEDING) AS cnt
        FROM (SELECT xway, dir, lane, pos, t, SUM(d) AS d FROM (
                SELECT xway, dir, lane, pos, t4 AS t, 1 AS d FROM lr_stopped
                UNION ALL
                SELECT xway, dir, lane, pos, tm AS t, -1 AS d FROM lr_stopped WHERE tm IS NOT NULL)
              GROUP BY xway, dir, lane, pos, t)""",
    "lr_stop_transitions": """
        SELECT *, COALESCE(LAG(cnt) OVER (PARTITION BY xway, dir, lane, pos ORDER BY t), 0)
                  AS prev_cnt
        FROM lr_stop_count""",
    # Accidents: detected when the count reaches 2, cleared at the next drop below 2.
    "lr_accidents": """
        SELECT d.xway, d.dir, d.lane, d.pos, d.pos DIV 5280 AS acc_seg, d.t AS td,
               MIN(c.t) AS tc
        FROM (SELECT * FROM lr_stop_transitions WHERE cnt >= 2 AND prev_cnt < 2) d
        LEFT JOIN (SELECT * FROM lr_stop_transitions WHERE cnt < 2 AND prev_cnt >= 2) c
          ON c.xway = d.xway AND c.dir = d.dir AND c.lane = d.lane AND c.pos = d.pos AND c.t > d.t
        GROUP BY d.xway, d.dir, d.lane, d.pos, d.t""",
    # Section 2: per segment and minute.
    "lr_minute_stats": """
        SELECT xway, dir, seg, minute, COUNT(DISTINCT vid) AS cars,
               SUM(spd) AS total, COUNT(*) AS n
        FROM lr_seq GROUP BY xway, dir, seg, minute""",
    # Section 5: accident alerts (nearest alerting accident).
    "lr_expected_alerts": """
        SELECT vid, time, xway, dir, seg,
               CAST(CASE WHEN dir = 0 THEN seg + dist ELSE seg - dist END AS INT) AS acc_seg
        FROM (SELECT e.vid, e.time, e.xway, e.dir, e.seg, MIN(ABS(a.acc_seg - e.seg)) AS dist
              FROM lr_entering e JOIN lr_accidents a
                ON a.xway = e.xway AND a.dir = e.dir
               AND (CASE WHEN e.dir = 0 THEN a.acc_seg - e.seg ELSE e.seg - a.acc_seg END)
                   BETWEEN 0 AND 4
               AND e.minute > a.td DIV 60 + 1
               AND (a.tc IS NULL OR e.time <= a.tc)
              GROUP BY e.vid, e.time, e.xway, e.dir, e.seg)""",
    # Section 4: entering reports whose toll a near accident zeroes (td < t <= tc).
    "lr_toll_zeroed": """
        SELECT DISTINCT e.vid, e.time
        FROM lr_entering e JOIN lr_accidents a
          ON a.xway = e.xway AND a.dir = e.dir
         AND (CASE WHEN e.dir = 0 THEN a.acc_seg - e.seg ELSE e.seg - a.acc_seg END)
             BETWEEN 0 AND 4
         AND e.time > a.td AND (a.tc IS NULL OR e.time <= a.tc)""",
    "lr_entering_stats": """
        SELECT e.vid, e.time, e.xway, e.dir, e.seg,
               COALESCE(SUM(w.total), 0) AS total, COALESCE(SUM(w.n), 0) AS n
        FROM lr_entering e LEFT JOIN lr_minute_stats w
          ON w.xway = e.xway AND w.dir = e.dir AND w.seg = e.seg
         AND w.minute BETWEEN e.minute - 5 AND e.minute - 1
        GROUP BY e.vid, e.time, e.xway, e.dir, e.seg""",
    # Section 5: toll notifications.
    "lr_expected_tolls": """
        SELECT s.vid, s.time, s.xway, s.dir, s.seg,
               CAST(CASE WHEN s.n > 0 THEN s.total DIV s.n ELSE 0 END AS INT) AS lav,
               CAST(CASE WHEN a.vid IS NULL AND COALESCE(p.cars, 0) > 50 AND s.n > 0
                              AND s.total < 40 * s.n
                         THEN 2 * (p.cars - 50) * (p.cars - 50) ELSE 0 END AS INT) AS toll
        FROM lr_entering_stats s
        JOIN lr_entering e ON e.vid = s.vid AND e.time = s.time
        LEFT JOIN lr_minute_stats p
          ON p.xway = s.xway AND p.dir = s.dir AND p.seg = s.seg AND p.minute = e.minute - 1
        LEFT JOIN lr_toll_zeroed a ON a.vid = s.vid AND a.time = s.time""",
}


# Views several others read: computed once per call.
_REUSED = {"lr_seq", "lr_entering", "lr_accidents", "lr_minute_stats", "lr_expected_alerts",
           "lr_expected_tolls"}


def expected_outputs(spark: SparkSession, reports: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(toll notifications, accident alerts) expected for `reports`.

    Registers temp views named lr_* (and `reports`) on the session."""
    reports.select("time", "vid", "spd", "xway", "lane", "dir", "seg", "pos") \
        .createOrReplaceTempView("reports")
    for name, sql in _VIEWS.items():
        view = spark.sql(sql)
        if name in _REUSED:
            view = view.cache()
        view.createOrReplaceTempView(name)
    return spark.table("lr_expected_tolls"), spark.table("lr_expected_alerts")


def accidents(spark: SparkSession) -> DataFrame:
    """The accidents of the last `expected_outputs` call (for summaries)."""
    return spark.table("lr_accidents")
