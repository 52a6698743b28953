"""Copy connector jars into Spark's jars directory, skipping every artifact
Spark already ships (in any version).

Maven resolves the Kafka connector and spark-avro with their transitive
dependencies; most of those (scala-library, slf4j, compression codecs, spark-tags)
are already in pyspark's jars/, and two versions of one artifact on the
classpath fail only at run time. Usage: merge_jars.py SRC_DIR SPARK_JARS_DIR
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

# "kafka-clients-3.9.2.jar" -> "kafka-clients"; "spark-avro_2.13-4.3.0.jar" -> "spark-avro_2.13";
# the version starts at the first "-<digit>".
_VERSIONED = re.compile(r"^(?P<artifact>.+?)-\d[^/]*\.jar$")


def artifact_of(jar_name: str) -> str:
    match = _VERSIONED.match(jar_name)
    if match is None:
        raise ValueError(f"cannot tell the artifact of {jar_name!r} (expected NAME-VERSION.jar)")
    return match.group("artifact")


def merge(src: Path, dest: Path) -> tuple[list[str], list[str]]:
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
    return copied, skipped


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    src, dest = Path(args[0]), Path(args[1])
    for folder in (src, dest):
        if not folder.is_dir():
            print(f"merge_jars: {folder} is not a directory", file=sys.stderr)
            return 2
    copied, skipped = merge(src, dest)
    if not copied:
        print(f"merge_jars: nothing to add from {src}", file=sys.stderr)
        return 1
    for name in copied:
        print(f"added   {name}")
    for name in skipped:
        print(f"skipped {name} (Spark ships it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
