"""The expected Linear Road outputs in plain Spark SQL, per src/caesar/examples/linear_road/SPEC.md.

Independent of the CAESAR engine and of the Python oracle: window functions
over each car's reports per road (trips, entering, runs at one position), an
interval self-join for accidents, per-minute segment statistics joined back to
the entering reports, a running view of each trip's tolls for the charges.
Section numbers refer to SPEC.md.

Input views: `reports(time, vid, spd, xway, lane, dir, seg, pos, ord)` where
`ord` orders the reports of one second as the input does (SPEC 1);
`balance_queries(time, vid, qid)`, `expenditure_queries(time, vid, qid, xway,
day)` and `historical(vid, day, xway, toll)` (may be empty).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_VIEWS = {
    # SPEC 2: each report with the car's previous report on its road; trips.
    "lr_prev": """
        SELECT r.*, r.time DIV 60 + 1 AS minute,
               LAG(time) OVER w AS p_time, LAG(lane) OVER w AS p_lane,
               LAG(seg)  OVER w AS p_seg,  LAG(pos)  OVER w AS p_pos
        FROM reports r
        WINDOW w AS (PARTITION BY vid, xway, dir ORDER BY time, ord)""",
    "lr_seq": """
        SELECT *, SUM(CAST(trip_start AS INT)) OVER w AS trip,
               LEAD(time) OVER w AS n_time, LEAD(ord) OVER w AS n_ord,
               LEAD(trip_start) OVER w AS n_trip_start
        FROM (SELECT *, p_time IS NULL OR (lane = 0 AND time > p_time + 60) AS trip_start
              FROM lr_prev)
        WINDOW w AS (PARTITION BY vid, xway, dir ORDER BY time, ord)""",
    # SPEC 2: entering reports (any lane; notifications only for lane != 4).
    "lr_entering": """
        SELECT vid, time, ord, xway, dir, seg, lane, minute, trip, trip_start FROM lr_seq
        WHERE trip_start OR ((lane != p_lane OR pos != p_pos) AND seg != p_seg)""",
    # SPEC 4: runs of consecutive reports of a trip at one (lane, pos).
    "lr_runs": """
        SELECT *, SUM(CASE WHEN NOT trip_start AND lane = p_lane AND pos = p_pos THEN 0 ELSE 1 END)
                  OVER (PARTITION BY vid, xway, dir ORDER BY time, ord
                        ROWS UNBOUNDED PRECEDING) AS run
        FROM lr_seq""",
    # A car is stopped from its run's 4th report (t4, o4) until the next report of
    # its trip (tm, om), which is at another position; NULL: never in the input.
    "lr_stops": """
        SELECT vid, xway, dir, lane, pos,
               try_element_at(sort_array(collect_list(named_struct('time', time, 'ord', ord))), 4)
                   AS s,
               max_by(CASE WHEN n_trip_start OR n_time IS NULL THEN NULL
                           ELSE named_struct('time', n_time, 'ord', n_ord) END,
                      named_struct('time', time, 'ord', ord)) AS e
        FROM lr_runs GROUP BY vid, xway, dir, trip, run, lane, pos
        HAVING COUNT(*) >= 4""",
    # SPEC 4: two cars stopped at one position at once, B becoming stopped while
    # A is; the segment's first such pair is its accident.
    "lr_pairs": """
        SELECT a.xway, a.dir, a.lane, a.pos, a.pos DIV 5280 AS acc_seg,
               b.s AS d, a.vid AS car1, b.vid AS car2,
               CASE WHEN a.e IS NULL THEN b.e WHEN b.e IS NULL THEN a.e
                    ELSE least(a.e, b.e) END AS c
        FROM lr_stops a JOIN lr_stops b
          ON a.xway = b.xway AND a.dir = b.dir AND a.lane = b.lane AND a.pos = b.pos
         AND a.vid != b.vid AND a.s < b.s AND (a.e IS NULL OR b.s < a.e)""",
    "lr_accidents": """
        SELECT xway, dir, lane, pos, acc_seg, d.time AS td, c.time AS tc, car1, car2
        FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY xway, dir, acc_seg ORDER BY d, car1)
                        AS k
              FROM lr_pairs)
        WHERE k = 1""",
    # SPEC 3: per segment and minute.
    "lr_minute_stats": """
        SELECT xway, dir, seg, minute, COUNT(DISTINCT vid) AS cars,
               SUM(spd) AS total, COUNT(*) AS n
        FROM lr_seq GROUP BY xway, dir, seg, minute""",
    # SPEC 5: the nearest accident whose zone holds, per entering report.
    "lr_zone": """
        SELECT e.vid, e.time, MIN(ABS(a.acc_seg - e.seg)) AS dist
        FROM lr_entering e JOIN lr_accidents a
          ON a.xway = e.xway AND a.dir = e.dir
         AND (CASE WHEN e.dir = 0 THEN a.acc_seg - e.seg ELSE e.seg - a.acc_seg END)
             BETWEEN 0 AND 4
         AND e.minute >= a.td DIV 60 + 2
         AND (a.tc IS NULL OR e.minute <= a.tc DIV 60 + 1)
        WHERE e.lane != 4
        GROUP BY e.vid, e.time""",
    "lr_expected_alerts": """
        SELECT e.vid, e.time, e.xway, e.dir, e.seg,
               CAST(CASE WHEN e.dir = 0 THEN e.seg + z.dist ELSE e.seg - z.dist END AS INT)
                   AS acc_seg
        FROM lr_entering e JOIN lr_zone z ON z.vid = e.vid AND z.time = e.time""",
    "lr_entering_stats": """
        SELECT e.vid, e.time, COALESCE(SUM(w.total), 0) AS total, COALESCE(SUM(w.n), 0) AS n
        FROM lr_entering e LEFT JOIN lr_minute_stats w
          ON w.xway = e.xway AND w.dir = e.dir AND w.seg = e.seg
         AND w.minute BETWEEN e.minute - 5 AND e.minute - 1
        WHERE e.lane != 4
        GROUP BY e.vid, e.time""",
    # SPEC 6: toll notifications (lav rounded half up).
    "lr_expected_tolls": """
        SELECT e.vid, e.time, e.xway, e.dir, e.seg,
               CAST(CASE WHEN s.n > 0 THEN (2 * s.total + s.n) DIV (2 * s.n) ELSE 0 END AS INT)
                   AS lav,
               CAST(CASE WHEN z.vid IS NULL AND COALESCE(p.cars, 0) > 50 AND s.n > 0
                              AND 2 * s.total + s.n < 80 * s.n
                         THEN 2 * (p.cars - 50) * (p.cars - 50) ELSE 0 END AS INT) AS toll
        FROM lr_entering e
        JOIN lr_entering_stats s ON s.vid = e.vid AND s.time = e.time
        LEFT JOIN lr_minute_stats p
          ON p.xway = e.xway AND p.dir = e.dir AND p.seg = e.seg AND p.minute = e.minute - 1
        LEFT JOIN lr_zone z ON z.vid = e.vid AND z.time = e.time
        WHERE e.lane != 4""",
    # SPEC 6: each entering report continuing a trip charges the toll of the
    # trip's previous entering report (0 for an exit-lane entry).
    "lr_expected_charges": """
        SELECT vid, time, prev_toll AS toll FROM (
            SELECT e.vid, e.time, e.trip_start,
                   LAG(COALESCE(t.toll, 0)) OVER (PARTITION BY e.vid, e.xway, e.dir, e.trip
                                                  ORDER BY e.time, e.ord) AS prev_toll
            FROM lr_entering e
            LEFT JOIN lr_expected_tolls t ON t.vid = e.vid AND t.time = e.time)
        WHERE NOT trip_start AND prev_toll > 0""",
    # SPEC 7: queries.
    "lr_expected_balances": """
        SELECT q.vid, q.time, q.qid, CAST(COALESCE(SUM(c.toll), 0) AS INT) AS balance
        FROM balance_queries q LEFT JOIN lr_expected_charges c
          ON c.vid = q.vid AND c.time <= q.time
        GROUP BY q.vid, q.time, q.qid""",
    "lr_expected_expenditures": """
        SELECT q.vid, q.time, q.qid, h.toll
        FROM expenditure_queries q JOIN historical h
          ON h.vid = q.vid AND h.day = q.day AND h.xway = q.xway
        WHERE q.day != 0""",
}

# Views several others read: computed once per call.
_REUSED = {"lr_seq", "lr_entering", "lr_accidents", "lr_minute_stats", "lr_zone",
           "lr_expected_tolls", "lr_expected_charges"}
OUTPUT_VIEWS = {"TollNotification": "lr_expected_tolls", "AccidentAlert": "lr_expected_alerts",
                "TollCharge": "lr_expected_charges", "AccountBalance": "lr_expected_balances",
                "DailyExpenditure": "lr_expected_expenditures"}
QUERY_DDL = {"balance_queries": "time INT, vid INT, qid INT",
             "expenditure_queries": "time INT, vid INT, qid INT, xway INT, day INT",
             "historical": "vid INT, day INT, xway INT, toll INT"}


def expected_outputs(spark: SparkSession, reports: DataFrame,
                     queries: dict[str, DataFrame] | None = None) -> dict[str, DataFrame]:
    """The expected outputs per type (keys of OUTPUT_VIEWS) for `reports` (with
    `ord`) and the query views of QUERY_DDL (missing ones are empty).

    Registers temp views named lr_* (and the input views) on the session."""
    reports.select("time", "vid", "spd", "xway", "lane", "dir", "seg", "pos", "ord") \
        .createOrReplaceTempView("reports")
    for name, ddl in QUERY_DDL.items():
        frame = (queries or {}).get(name)
        if frame is None:
            frame = spark.createDataFrame([], ddl)
        frame.createOrReplaceTempView(name)
    for name, sql in _VIEWS.items():
        view = spark.sql(sql)
        if name in _REUSED:
            view = view.cache()
        view.createOrReplaceTempView(name)
    return {kind: spark.table(view) for kind, view in OUTPUT_VIEWS.items()}


def accidents(spark: SparkSession) -> DataFrame:
    """The accidents of the last `expected_outputs` call (for summaries)."""
    return spark.table("lr_accidents")
