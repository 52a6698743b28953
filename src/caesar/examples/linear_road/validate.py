"""Spark batch validator: expected Linear Road outputs (plain Spark SQL over the
input, see expected_sql.py) against what the pipeline wrote (Parquet from
consume_alerts.py): missing, extra, duplicate and different records per type.

    python -m caesar.examples.linear_road.validate --alerts out/ --lr-file data.lr [--historical data.lr.tolls.dat]
    python -m caesar.examples.linear_road.validate --alerts out/ --generate duration_s=600,segments=40:59
    python -m caesar.examples.linear_road.validate --alerts out/ --bootstrap 127.0.0.1:9092 --topic lr-position-reports
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caesar.examples.linear_road import expected_sql
from caesar.examples.linear_road.avro import (
    ACCIDENT_ALERT,
    ACCOUNT_BALANCE,
    DAILY_EXPENDITURE,
    POSITION_REPORT,
    SPARK_DDL,
    TOLL_CHARGE,
    TOLL_NOTIFICATION,
)
from caesar.examples.linear_road.generator import (
    GeneratorConfig,
    generate_with_history,
    parse_spec,
)
from caesar.examples.linear_road.records import (
    EXIT_LANE,
    LR_FIELDS,
    ROAD_FEET,
    SEGMENT_FEET,
    BalanceQuery,
    ExpenditureQuery,
    LrRecord,
    PositionReport,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SHORT_NAMES = {TOLL_NOTIFICATION: "TollNotification", ACCIDENT_ALERT: "AccidentAlert",
               TOLL_CHARGE: "TollCharge", ACCOUNT_BALANCE: "AccountBalance",
               DAILY_EXPENDITURE: "DailyExpenditure"}
# Identity and compared fields per output type (SPEC.md section 8).
KEYS = {TOLL_NOTIFICATION: ("vid", "time"), ACCIDENT_ALERT: ("vid", "time"),
        TOLL_CHARGE: ("vid", "time"), ACCOUNT_BALANCE: ("qid", "time"),
        DAILY_EXPENDITURE: ("qid", "time")}
COMPARED = {
    TOLL_NOTIFICATION: ("vid", "time", "xway", "dir", "seg", "lav", "toll"),
    ACCIDENT_ALERT: ("vid", "time", "xway", "dir", "seg", "acc_seg"),
    TOLL_CHARGE: ("vid", "time", "toll"),
    ACCOUNT_BALANCE: ("vid", "time", "qid", "balance"),
    DAILY_EXPENDITURE: ("vid", "time", "qid", "toll"),
}
CORE = (TOLL_NOTIFICATION, ACCIDENT_ALERT)
MODEL = (*CORE, TOLL_CHARGE)  # every output of model.caesar (the demo's)
ALL = tuple(COMPARED)
EXAMPLES = 5


@dataclass
class TypeComparison:
    name: str
    expected: int
    actual: int
    missing: int
    extra: int
    duplicates: int
    different: int
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.duplicates or self.different)


@dataclass
class Validation:
    types: list[TypeComparison]
    positive_tolls: int
    accidents: int
    dead_letters: int = 0

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.types)

    def summary(self) -> str:
        lines = ["Linear Road validation (expected = Spark SQL over the input, per SPEC.md)",
                 f"  {'output':<18}{'expected':>10}{'actual':>10}{'missing':>9}{'extra':>7}"
                 f"{'dup':>6}{'different':>11}"]
        lines.extend(f"  {t.name:<18}{t.expected:>10}{t.actual:>10}{t.missing:>9}"
                     f"{t.extra:>7}{t.duplicates:>6}{t.different:>11}" for t in self.types)
        lines.append(f"  expected positive tolls: {self.positive_tolls}, "
                     f"accidents: {self.accidents}, unusable input lines: {self.dead_letters}")
        for t in self.types:
            for kind, rows in t.examples.items():
                lines.append(f"  {t.name} {kind}, e.g.:")
                lines.extend(f"    {row}" for row in rows)
        lines.append("RESULT: " + ("zero differences" if self.ok else "DIFFERENCES FOUND"))
        return "\n".join(lines)


@dataclass
class Inputs:
    """What the SQL reads: reports (with `ord`), the query views, unusable lines."""

    reports: DataFrame
    queries: dict[str, DataFrame] = field(default_factory=dict)
    dead_letters: int = 0


def compare(expected: DataFrame, actual: DataFrame, name: str, fields: tuple[str, ...],
            key: tuple[str, ...]) -> TypeComparison:
    """Match on `key`; one Spark pass for the counts, more only for examples."""
    from pyspark.sql import functions as F

    # Several actual records for one key count as one duplicate; the first is compared.
    actual_one = actual.groupBy(*key).agg(
        F.count(F.lit(1)).alias("_n"), *[F.first(c).alias(c) for c in fields if c not in key])
    e, a = expected.select(*fields).alias("e"), actual_one.alias("a")
    joined = e.join(a, [e[k] == a[k] for k in key], "full_outer")
    differs = F.lit(False)
    for c in fields:
        differs = differs | ~F.col(f"e.{c}").eqNullSafe(F.col(f"a.{c}"))
    in_e, in_a = F.col(f"e.{key[0]}").isNotNull(), F.col(f"a.{key[0]}").isNotNull()
    kinds = {"missing": in_e & ~in_a, "extra": in_a & ~in_e, "different": in_e & in_a & differs,
             "duplicated": F.coalesce(F.col("a._n"), F.lit(0)) > 1}
    flagged = joined.select("*", *[cond.alias(f"_{k}") for k, cond in kinds.items()]).cache()
    row = flagged.select(
        F.sum(in_e.cast("long")).alias("expected"),
        F.coalesce(F.sum("a._n"), F.lit(0)).alias("actual"),
        *[F.sum(F.col(f"_{k}").cast("long")).alias(k) for k in kinds]).first()
    assert row is not None  # a global aggregation has one row
    counts = {k: int(row[k] or 0) for k in ("expected", "actual", *kinds)}
    result = TypeComparison(name, counts["expected"], counts["actual"], counts["missing"],
                            counts["extra"], counts["duplicated"], counts["different"])
    for kind in kinds:
        if not counts[kind]:
            continue
        side = "a" if kind in ("extra", "duplicated") else "e"
        picked = flagged.filter(F.col(f"_{kind}")) \
            .orderBy(F.col(f"{side}.time"), F.col(f"{side}.{key[0]}")).limit(EXAMPLES) \
            .select(*[F.col(f"e.{c}").alias(f"e_{c}") for c in fields],
                    *[F.col(f"a.{c}").alias(f"a_{c}") for c in fields]).collect()
        if kind == "different":
            result.examples["different (expected, actual)"] = [
                {c: (r[f"e_{c}"], r[f"a_{c}"]) for c in fields
                 if c in key or r[f"e_{c}"] != r[f"a_{c}"]} for r in picked]
        else:
            result.examples[kind] = [{c: r[f"{side}_{c}"] for c in fields} for r in picked]
    flagged.unpersist()
    return result


def validate(spark: SparkSession, inputs: Inputs, alerts_dir: str | Path,
             types: Iterable[str] = CORE) -> Validation:
    """Expected (Spark SQL) against actual (Parquet under `alerts_dir`) for `types`."""
    expected = expected_sql.expected_outputs(spark, inputs.reports, inputs.queries)
    comparisons = []
    for schema in types:
        name = SHORT_NAMES[schema]
        actual = read_actual(spark, alerts_dir, schema)
        comparisons.append(compare(expected[name], actual, name, COMPARED[schema], KEYS[schema]))
    positive = expected["TollNotification"].filter("toll > 0").count()
    return Validation(comparisons, positive, expected_sql.accidents(spark).count(),
                      inputs.dead_letters)


def read_actual(spark: SparkSession, alerts_dir: str | Path, schema: str) -> DataFrame:
    path = Path(alerts_dir) / SHORT_NAMES[schema]
    if path.is_dir() and any(path.rglob("*.parquet")):  # batch_id=N/ from --writer spark
        return spark.read.parquet(str(path))
    return spark.createDataFrame([], SPARK_DDL[schema])


# -- inputs -------------------------------------------------------------------------------

def inputs_from_records(spark: SparkSession, records: Iterable[LrRecord],
                        historical: Mapping[tuple[int, int, int], int] | None = None) -> Inputs:
    """Reports and queries in input order (`ord` = position in `records`)."""
    reports, balances, expenditures = [], [], []
    for i, r in enumerate(records):
        if isinstance(r, PositionReport):
            reports.append((*r, i))
        elif isinstance(r, BalanceQuery):
            balances.append((r.time, r.vid, r.qid))
        elif isinstance(r, ExpenditureQuery):
            expenditures.append((r.time, r.vid, r.qid, r.xway, r.day))
    ddl = expected_sql.QUERY_DDL
    queries = {"balance_queries": spark.createDataFrame(balances, ddl["balance_queries"]),
               "expenditure_queries": spark.createDataFrame(expenditures,
                                                            ddl["expenditure_queries"]),
               "historical": spark.createDataFrame(
                   [(v, d, x, t) for (v, d, x), t in (historical or {}).items()],
                   ddl["historical"])}
    return Inputs(spark.createDataFrame(reports, SPARK_DDL[POSITION_REPORT] + ", ord BIGINT"),
                  queries)


def inputs_from_generator(spark: SparkSession, config: GeneratorConfig) -> Inputs:
    records, historical = generate_with_history(config)
    return inputs_from_records(spark, records, historical)


def inputs_from_lr_file(spark: SparkSession, path: str | Path,
                        historical: str | Path | None = None) -> Inputs:
    """A standard LR file (15 integer fields, no header), read by Spark. Lines that
    are not usable records (records.read_lr's rules) are counted, not used."""
    from pyspark.sql import functions as F

    ddl = ", ".join(f"{name} INT" for name in LR_FIELDS) + ", _corrupt STRING"
    raw = (spark.read.csv(str(path), schema=ddl, mode="PERMISSIVE",
                          columnNameOfCorruptRecord="_corrupt")
           .withColumn("ord", F.monotonically_increasing_id()))  # increases in file order
    usable = (F.col("_corrupt").isNull() & F.col("Time").isNotNull() & (F.col("Time") >= 0)
              & (F.col("VID") >= 0)
              & (F.col("Type").isin(2, 3) | ((F.col("Type") == 0) & _report_ok())))
    raw = raw.withColumn("_usable", usable).cache()
    dead = raw.filter(~F.col("_usable")).count()
    good = raw.filter("_usable")
    reports = good.filter("Type = 0").selectExpr(
        "Time AS time", "VID AS vid", "Spd AS spd", "XWay AS xway", "Lane AS lane",
        "Dir AS dir", "Seg AS seg", "Pos AS pos", "ord")
    queries = {
        "balance_queries": good.filter("Type = 2").selectExpr("Time AS time", "VID AS vid",
                                                              "QID AS qid"),
        "expenditure_queries": good.filter("Type = 3").selectExpr(
            "Time AS time", "VID AS vid", "QID AS qid", "XWay AS xway", "Day AS day")}
    if historical is not None:
        queries["historical"] = spark.read.csv(str(historical),
                                               schema=expected_sql.QUERY_DDL["historical"])
    return Inputs(reports, queries, dead)


def _report_ok() -> Any:
    from pyspark.sql import functions as F

    return ((F.col("XWay") >= 0) & F.col("Lane").between(0, EXIT_LANE) & F.col("Dir").isin(0, 1)
            & F.col("Pos").between(0, ROAD_FEET - 1)
            & (F.col("Seg") == F.floor(F.col("Pos") / SEGMENT_FEET)))


def inputs_from_topic(spark: SparkSession, bootstrap: str, topic: str,
                      kafka_options: dict[str, str] | None = None) -> Inputs:
    """Every PositionReport on the input topic (batch read with Spark's Kafka source),
    once: of fanned-out reports only the segment's own copy (pseg = seg); `ts`
    orders the reports of one second at one place (SPEC 1)."""
    from caesar.examples.linear_road.avro import decode_column

    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .options(**(kafka_options or {})).option("subscribe", topic)
           .option("kafka.isolation.level", "read_committed").option("startingOffsets", "earliest")
           .option("endingOffsets", "latest").load())
    decoded = raw.select(decode_column(POSITION_REPORT, raw.value).alias("r")).select("r.*")
    reports = decoded.filter("_error IS NULL AND (pseg = -1 OR pseg = seg)") \
        .withColumnRenamed("ts", "ord").drop("_error", "pseg")
    return Inputs(reports)


def main(argv: list[str] | None = None) -> int:
    from caesar.jobs.kafka_options import add_kafka_option_argument, spark_kafka_options
    from caesar.jobs.spark_session import spark_session

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alerts", required=True, help="directory consume_alerts wrote")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--lr-file")
    source.add_argument("--generate", help="generator settings, e.g. duration_s=600,segments=40:59")
    source.add_argument("--topic", help="input topic (needs --bootstrap)")
    parser.add_argument("--historical", help="historical-tolls file of --lr-file (Type 3)")
    parser.add_argument("--all-types", action="store_true",
                        help="also compare TollCharge, AccountBalance and DailyExpenditure")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    add_kafka_option_argument(parser)
    args = parser.parse_args(argv)

    spark = spark_session("caesar-lr-validate", kafka=bool(args.topic))
    if args.lr_file:
        inputs = inputs_from_lr_file(spark, args.lr_file, args.historical)
    elif args.generate:
        inputs = inputs_from_generator(spark, parse_spec(args.generate))
    else:
        inputs = inputs_from_topic(spark, args.bootstrap, args.topic,
                                   spark_kafka_options(args.kafka_option))
    result = validate(spark, inputs, args.alerts, ALL if args.all_types else CORE)
    print(result.summary())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
