#!/usr/bin/env bash
# Fetches the Apache Kafka broker (KRaft) jars from Maven Central with Maven,
# once, into ~/.cache/caesar/kafka/<version>/libs. No-op when already cached.
# `caesar up` and the test fixtures run the broker from these jars.
set -euo pipefail
KAFKA_VERSION="${CAESAR_KAFKA_VERSION:-4.1.1}"
# Kafka 4.1's POM leaves the logging backend out; log4j-slf4j-impl binds
# SLF4J 1.x to log4j2 (without it the broker runs silently).
LOG4J_VERSION="${CAESAR_LOG4J_VERSION:-2.24.3}"
CACHE="${CAESAR_CACHE:-$HOME/.cache/caesar}/kafka/$KAFKA_VERSION"
LIBS="$CACHE/libs"
STAMP="$CACHE/.complete"

if [ -f "$STAMP" ]; then
  echo "Kafka $KAFKA_VERSION already cached in $LIBS ($(ls "$LIBS" | wc -l) jars)"
  exit 0
fi
command -v mvn >/dev/null || { echo "error: Maven (mvn) is needed to fetch the Kafka jars; install it (apt-get install maven)" >&2; exit 1; }
command -v java >/dev/null || { echo "error: Java 17+ is needed to run the Kafka broker" >&2; exit 1; }

# CAESAR_MAVEN_REPO: a separate local Maven repository (e.g. to measure a cold fetch).
MVN=(mvn -B -q -Dstyle.color=never)
if [ -n "${CAESAR_MAVEN_REPO:-}" ]; then MVN+=("-Dmaven.repo.local=$CAESAR_MAVEN_REPO"); fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>caesar</groupId>
  <artifactId>kafka-broker-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
POM

echo "fetching org.apache.kafka:kafka_2.13:$KAFKA_VERSION (+ log4j-slf4j-impl $LOG4J_VERSION) from Maven Central"
"${MVN[@]}" -f "$WORK/pom.xml" dependency:tree -DoutputFile="$WORK/tree.txt" -Dscope=runtime 2>&1 \
  | sed "s/\x1b\[[0-9;]*m//g"
echo "dependency tree (mvn dependency:tree, runtime scope):"
sed 's/^/  /' "$WORK/tree.txt"
echo "copying $(grep -c ':jar:' "$WORK/tree.txt") jars to $LIBS"
mkdir -p "$CACHE"
rm -rf "$LIBS.partial"
"${MVN[@]}" -f "$WORK/pom.xml" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$LIBS.partial" 2>&1 | sed "s/\x1b\[[0-9;]*m//g"
rm -rf "$LIBS"
mv "$LIBS.partial" "$LIBS"
cp "$WORK/tree.txt" "$CACHE/dependency-tree.txt"
touch "$STAMP"
echo "Kafka $KAFKA_VERSION cached in $LIBS ($(ls "$LIBS" | wc -l) jars, $(du -sh "$LIBS" | cut -f1))"
