"""Spark batch validator: expected Linear Road outputs (plain Spark SQL over the
input, see expected_sql.py) against the alerts the pipeline wrote (Parquet from
consume_alerts.py): missing, extra, duplicate and different records per type.

    python -m caesar.examples.linear_road.validate --alerts out/ --lr-file data.lr
    python -m caesar.examples.linear_road.validate --alerts out/ --generate xways=1,duration_s=600,seed=3
    python -m caesar.examples.linear_road.validate --alerts out/ --bootstrap 127.0.0.1:9092 --topic lr-position-reports
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caesar.examples.linear_road import expected_sql
from caesar.examples.linear_road.avro import (
    ACCIDENT_ALERT,
    POSITION_REPORT,
    SPARK_DDL,
    TOLL_NOTIFICATION,
)
from caesar.examples.linear_road.generator import GeneratorConfig, generate
from caesar.examples.linear_road.records import LR_FIELDS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

KEY = ("vid", "time")
COMPARED = {
    TOLL_NOTIFICATION: ("vid", "time", "xway", "dir", "seg", "lav", "toll"),
    ACCIDENT_ALERT: ("vid", "time", "xway", "dir", "seg", "acc_seg"),
}
SHORT_NAMES = {TOLL_NOTIFICATION: "TollNotification", ACCIDENT_ALERT: "AccidentAlert"}
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
                     f"accidents: {self.accidents}")
        for t in self.types:
            for kind, rows in t.examples.items():
                lines.append(f"  {t.name} {kind}, e.g.:")
                lines.extend(f"    {row}" for row in rows)
        lines.append("RESULT: " + ("zero differences" if self.ok else "DIFFERENCES FOUND"))
        return "\n".join(lines)


def compare(expected: DataFrame, actual: DataFrame, name: str,
            fields: tuple[str, ...]) -> TypeComparison:
    """Match on (vid, time); one Spark pass for the counts, more only for examples."""
    from pyspark.sql import functions as F

    # Several actual records for one key count as one duplicate; the first is compared.
    actual_one = actual.groupBy(*KEY).agg(
        F.count(F.lit(1)).alias("_n"), *[F.first(c).alias(c) for c in fields if c not in KEY])
    e, a = expected.select(*fields).alias("e"), actual_one.alias("a")
    joined = e.join(a, [e[k] == a[k] for k in KEY], "full_outer")
    differs = F.lit(False)
    for c in fields:
        differs = differs | ~F.col(f"e.{c}").eqNullSafe(F.col(f"a.{c}"))
    in_e, in_a = F.col("e.vid").isNotNull(), F.col("a.vid").isNotNull()
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
            .orderBy(F.col(f"{side}.time"), F.col(f"{side}.vid")).limit(EXAMPLES) \
            .select(*[F.col(f"e.{c}").alias(f"e_{c}") for c in fields],
                    *[F.col(f"a.{c}").alias(f"a_{c}") for c in fields]).collect()
        if kind == "different":
            result.examples["different (expected, actual)"] = [
                {c: (r[f"e_{c}"], r[f"a_{c}"]) for c in fields
                 if c in KEY or r[f"e_{c}"] != r[f"a_{c}"]} for r in picked]
        else:
            result.examples[kind] = [{c: r[f"{side}_{c}"] for c in fields} for r in picked]
    flagged.unpersist()
    return result


def validate(spark: SparkSession, reports: DataFrame, alerts_dir: str | Path) -> Validation:
    tolls, alerts = expected_sql.expected_outputs(spark, reports)
    types = []
    for schema, expected in ((TOLL_NOTIFICATION, tolls), (ACCIDENT_ALERT, alerts)):
        actual = read_actual(spark, alerts_dir, schema)
        types.append(compare(expected, actual, SHORT_NAMES[schema], COMPARED[schema]))
    positive = tolls.filter("toll > 0").count()
    return Validation(types, positive, expected_sql.accidents(spark).count())


def read_actual(spark: SparkSession, alerts_dir: str | Path, schema: str) -> DataFrame:
    path = Path(alerts_dir) / SHORT_NAMES[schema]
    if path.is_dir() and any(path.rglob("*.parquet")):  # batch_id=N/ from --writer spark
        return spark.read.parquet(str(path))
    return spark.createDataFrame([], SPARK_DDL[schema])


# -- inputs -------------------------------------------------------------------------------

def reports_from_generator(spark: SparkSession, config: GeneratorConfig) -> DataFrame:
    return spark.createDataFrame(list(generate(config)), SPARK_DDL[POSITION_REPORT])


def reports_from_lr_file(spark: SparkSession, path: str | Path) -> DataFrame:
    """A standard LR file (15 integer fields, no header); only Type=0 rows."""
    ddl = ", ".join(f"{name} INT" for name in LR_FIELDS)
    raw = spark.read.csv(str(path), schema=ddl, mode="FAILFAST")
    return raw.filter("Type = 0").selectExpr(
        "Time AS time", "VID AS vid", "Spd AS spd", "XWay AS xway", "Lane AS lane",
        "Dir AS dir", "Seg AS seg", "Pos AS pos")


def reports_from_topic(spark: SparkSession, bootstrap: str, topic: str,
                       kafka_options: dict[str, str] | None = None) -> DataFrame:
    """Every PositionReport on the input topic (batch read with Spark's Kafka source),
    once: of fanned-out reports only the segment's own copy (pseg = seg)."""
    from caesar.examples.linear_road.avro import decode_column

    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .options(**(kafka_options or {})).option("subscribe", topic)
           .option("kafka.isolation.level", "read_committed").option("startingOffsets", "earliest")
           .option("endingOffsets", "latest").load())
    decoded = raw.select(decode_column(POSITION_REPORT, raw.value).alias("r")).select("r.*")
    return decoded.filter("_error IS NULL AND (pseg = -1 OR pseg = seg)").drop("_error", "pseg")


def parse_generator_spec(text: str) -> GeneratorConfig:
    """'xways=1,duration_s=600,seed=3' -> GeneratorConfig."""
    values: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        values[key.strip()] = int(value)
    return GeneratorConfig(**values)


def main(argv: list[str] | None = None) -> int:
    from caesar.jobs.kafka_options import add_kafka_option_argument, spark_kafka_options
    from caesar.jobs.spark_session import spark_session

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alerts", required=True, help="directory consume_alerts wrote")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--lr-file")
    source.add_argument("--generate", help="generator settings, e.g. xways=1,duration_s=600")
    source.add_argument("--topic", help="input topic (needs --bootstrap)")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    add_kafka_option_argument(parser)
    args = parser.parse_args(argv)

    spark = spark_session("caesar-lr-validate", kafka=bool(args.topic))
    if args.lr_file:
        reports = reports_from_lr_file(spark, args.lr_file)
    elif args.generate:
        reports = reports_from_generator(spark, parse_generator_spec(args.generate))
    else:
        reports = reports_from_topic(spark, args.bootstrap, args.topic,
                                     spark_kafka_options(args.kafka_option))
    result = validate(spark, reports, args.alerts)
    print(result.summary())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
