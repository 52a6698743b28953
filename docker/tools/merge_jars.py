"""Copy connector jars into Spark's jars directory, skipping every artifact
Spark already ships (in any version).

Maven resolves the Kafka connector and spark-avro with their transitive
dependencies; most of those (scala-library, slf4j, compression codecs, spark-tags)
are already in pyspark's jars/, and two versions of one artifact on the
classpath fail only at run time.

    merge_jars.py SRC_DIR SPARK_JARS_DIR [--link-dir DIR] [--require ARTIFACT...]

--link-dir also links the added jars into DIR (for `spark.jars`-style lists);
--require fails unless SPARK_JARS_DIR ends up with each named artifact.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path


def artifact_of(jar_name: str) -> str:
    """The Maven artifact of a jar file name, without version and classifier.

    "kafka-clients-3.9.2.jar" -> "kafka-clients"; "zstd-jni-1.5.6-4.jar" -> "zstd-jni";
    "spark-sql-kafka-0-10_2.13-4.3.0.jar" -> "spark-sql-kafka-0-10_2.13";
    "netty-tcnative-boringssl-static-2.0.76.Final-linux-x86_64.jar" -> "netty-tcnative-boringssl-static".
    The version is the first "-"-separated token that starts with a digit after
    which no digit-led token holds a "_" (a Scala suffix such as "10_2.13" belongs
    to the artifact; a classifier such as "x86_64" does not start with a digit).
    """
    if not jar_name.endswith(".jar"):
        raise ValueError(f"cannot tell the artifact of {jar_name!r} (expected NAME-VERSION.jar)")
    tokens = jar_name[: -len(".jar")].split("-")
    digit_led = [bool(t) and t[0].isdigit() for t in tokens]
    for i in range(1, len(tokens)):
        if digit_led[i] and not any(
                digit_led[j] and "_" in tokens[j] for j in range(i, len(tokens))):
            return "-".join(tokens[:i])
    raise ValueError(f"cannot tell the artifact of {jar_name!r} (expected NAME-VERSION.jar)")


def merge(src: Path, dest: Path, link_dir: Path | None = None) -> tuple[list[str], list[str]]:
    """Copy jars of src missing from dest; return (copied, skipped) file names."""
    shipped = {artifact_of(jar.name) for jar in dest.glob("*.jar")}
    copied: list[str] = []
    skipped: list[str] = []
    for jar in sorted(src.glob("*.jar")):
        if artifact_of(jar.name) in shipped:
            skipped.append(jar.name)
            continue
        shutil.copy2(jar, dest / jar.name)
        copied.append(jar.name)
        if link_dir is not None:
            (link_dir / jar.name).symlink_to((dest / jar.name).resolve())
    return copied, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="add connector jars to Spark's jars")
    parser.add_argument("src", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--link-dir", type=Path)
    parser.add_argument("--require", nargs="*", default=[], metavar="ARTIFACT")
    args = parser.parse_args(argv)
    for folder in (args.src, args.dest, args.link_dir):
        if folder is not None and not folder.is_dir():
            print(f"merge_jars: {folder} is not a directory", file=sys.stderr)
            return 2
    copied, skipped = merge(args.src, args.dest, args.link_dir)
    for name in copied:
        print(f"added   {name}")
    for name in skipped:
        print(f"skipped {name} (Spark ships it)")
    present = {artifact_of(jar.name) for jar in args.dest.glob("*.jar")}
    missing = [name for name in args.require if name not in present]
    if missing:
        print(f"merge_jars: {args.dest} lacks {', '.join(missing)}", file=sys.stderr)
        return 1
    if not copied:
        print(f"merge_jars: nothing to add from {args.src}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
