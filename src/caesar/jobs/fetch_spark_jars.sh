#!/usr/bin/env bash
# Fetch Spark's Kafka connector (and spark-avro when pyspark lacks it) once with Maven
# into ~/.cache/caesar/spark-jars/. Idempotent: a no-op when the marker file exists.
# The jobs pass these jars with spark.jars (see caesar/jobs/spark_session.py), so runs are offline.
set -euo pipefail

SPARK_VERSION="${CAESAR_SPARK_VERSION:-4.3.0}"
SCALA="2.13"
DEST="${CAESAR_SPARK_JARS:-$HOME/.cache/caesar/spark-jars}"
MARKER="$DEST/.complete-$SPARK_VERSION"
# The Python whose pyspark the jars must match (the caller's; setup.sh passes its venv's).
PY="${CAESAR_PYTHON:-python3}"

if [[ -f "$MARKER" ]]; then
  echo "[spark-jars] cached in $DEST"
  exit 0
fi
command -v mvn >/dev/null || { echo "[spark-jars] mvn not found: install Maven" >&2; exit 1; }

PYSPARK_JARS=""
if [[ -x "$PY" ]]; then
  PYSPARK_JARS="$("$PY" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))' 2>/dev/null || true)"
fi
# spark-avro is not bundled with pyspark and is not needed: the jobs encode and decode Avro
# (single-object encoding) in Python with fastavro, so only the Kafka connector is fetched.

# The connector of exactly pyspark's version is preferred; Maven Central may not have it yet
# (pyspark 4.3.0 was on PyPI before spark-sql-kafka 4.3.0 reached Central), so fall back to the
# newest earlier 4.x connector, whose source API Spark 4.3 still implements.
CANDIDATES="${CAESAR_SPARK_CONNECTOR_VERSIONS:-$SPARK_VERSION 4.2.0 4.1.1}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
rm -rf "$DEST.tmp"
FOUND=""
for VERSION in $CANDIDATES; do
  cat > "$WORK/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>caesar</groupId><artifactId>spark-jars</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_${SCALA}</artifactId><version>${VERSION}</version></dependency>
    <dependency><groupId>org.apache.spark</groupId><artifactId>spark-token-provider-kafka-0-10_${SCALA}</artifactId><version>${VERSION}</version></dependency>
  </dependencies>
</project>
POM
  echo "[spark-jars] resolving spark-sql-kafka-0-10_${SCALA}:${VERSION} (+ token provider, kafka-clients, commons-pool2) from Maven Central ..."
  # Runtime scope: kafka-clients, commons-pool2 and their runtime deps come along; Spark itself
  # is 'provided' in the connector's POM and is not copied.
  if mvn -B -q -f "$WORK/pom.xml" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$DEST.tmp" >"$WORK/mvn.log" 2>&1; then
    FOUND="$VERSION"
    break
  fi
  echo "[spark-jars]   not available: $(grep -m1 -o 'Could not find artifact [^ ]*' "$WORK/mvn.log" || echo "see mvn output")"
done
if [[ -z "$FOUND" ]]; then
  echo "[spark-jars] no connector version of [$CANDIDATES] could be resolved" >&2
  exit 1
fi
if [[ "$FOUND" != "$SPARK_VERSION" ]]; then
  echo "[spark-jars] note: using connector $FOUND with Spark $SPARK_VERSION"
fi

# Drop artifacts pyspark already ships (any version: scala-library, slf4j, spark-tags, ...) so
# the classpath has one copy of each.
if [[ -n "$PYSPARK_JARS" && -d "$PYSPARK_JARS" ]]; then
  for jar in "$DEST.tmp"/*.jar; do
    artifact="$(basename "$jar" | sed -E 's/-[0-9][^-]*\.jar$//')"
    if compgen -G "$PYSPARK_JARS/${artifact}-[0-9]*.jar" >/dev/null; then rm -f "$jar"; fi
  done
fi
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
touch "$MARKER"
echo "[spark-jars] $(ls "$DEST"/*.jar | wc -l) jars in $DEST:"
ls "$DEST" | sed 's/^/  /'
