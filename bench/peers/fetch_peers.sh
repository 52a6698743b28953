#!/usr/bin/env bash
# Fetches the peer engines (Esper, Flink CEP) from Maven Central with Maven,
# once, into ~/.cache/caesar/peers/<engine>-<version>/libs (each engine its
# own classpath). No-op when already cached; jars are never committed.
# Usage: fetch_peers.sh [esper|flink]...   (default: both)
set -euo pipefail
ESPER_VERSION="${CAESAR_ESPER_VERSION:-8.9.0}"
FLINK_VERSION="${CAESAR_FLINK_VERSION:-1.18.1}"
ROOT="${CAESAR_CACHE:-$HOME/.cache/caesar}/peers"

command -v mvn >/dev/null || { echo "error: Maven (mvn) is needed to fetch the peer jars; install it (apt-get install maven)" >&2; exit 1; }
MVN=(mvn -B -q -Dstyle.color=never)
if [ -n "${CAESAR_MAVEN_REPO:-}" ]; then MVN+=("-Dmaven.repo.local=$CAESAR_MAVEN_REPO"); fi

# fetch NAME VERSION DEPENDENCY-XML
fetch() {
  local name="$1" version="$2" deps="$3"
  local cache="$ROOT/$name-$version" libs="$ROOT/$name-$version/libs"
  if [ -f "$cache/.complete" ]; then
    echo "[peers] $name $version already cached in $libs ($(ls "$libs" | wc -l) jars)"
    return 0
  fi
  local work
  work="$(mktemp -d)"
  cat > "$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>caesar</groupId>
  <artifactId>peer-$name</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
$deps
  </dependencies>
</project>
POM
  echo "[peers] fetching $name $version from Maven Central"
  mkdir -p "$cache"
  rm -rf "$libs.partial"
  "${MVN[@]}" -f "$work/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$libs.partial" 2>&1 | sed "s/\x1b\[[0-9;]*m//g"
  rm -rf "$libs" "$work"
  mv "$libs.partial" "$libs"
  touch "$cache/.complete"
  echo "[peers] $name $version cached in $libs ($(ls "$libs" | wc -l) jars, $(du -sh "$libs" | cut -f1))"
}

dep() { echo "    <dependency><groupId>$1</groupId><artifactId>$2</artifactId><version>$3</version></dependency>"; }

ENGINES=("$@")
[ ${#ENGINES[@]} -eq 0 ] && ENGINES=(esper flink)
for engine in "${ENGINES[@]}"; do
  case "$engine" in
    esper)
      fetch esper "$ESPER_VERSION" "$(dep com.espertech esper-common "$ESPER_VERSION")
$(dep com.espertech esper-compiler "$ESPER_VERSION")
$(dep com.espertech esper-runtime "$ESPER_VERSION")
$(dep org.slf4j slf4j-nop 1.7.36)" ;;
    flink)
      # flink-clients brings the local MiniCluster the job runs in
      fetch flink "$FLINK_VERSION" "$(dep org.apache.flink flink-cep "$FLINK_VERSION")
$(dep org.apache.flink flink-streaming-java "$FLINK_VERSION")
$(dep org.apache.flink flink-clients "$FLINK_VERSION")
$(dep org.slf4j slf4j-nop 1.7.36)" ;;
    *) echo "error: unknown engine $engine (esper or flink)" >&2; exit 2 ;;
  esac
done
