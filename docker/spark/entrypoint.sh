#!/usr/bin/env bash
# Container entry point of the CAESAR Spark jobs image.
#
# Spark on Kubernetes (spark-submit --master k8s://..., and so the Spark operator)
# starts driver and executor pods from this image with the first argument
# `driver` or `executor` and the rest in SPARK_* environment variables; this
# script turns that into the JVM/spark-submit command, like the entry point of
# Apache Spark's own images. Anything else runs as given (e.g. `spark-submit ...`,
# `python -m caesar.examples.linear_road.produce ...`).
set -euo pipefail

: "${SPARK_HOME:?SPARK_HOME is not set}"
SPARK_CLASSPATH="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$SPARK_HOME/jars/*"

# Executor JVM options arrive as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in order.
java_opts=()
while IFS= read -r name; do
  java_opts+=("${!name}")
done < <(compgen -e | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n || true)

case "${1:-}" in
  driver)
    shift
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
      --deploy-mode client \
      "$@"
    ;;
  executor)
    shift
    exec java "${java_opts[@]}" \
      -Xms"${SPARK_EXECUTOR_MEMORY:?}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
      -cp "$SPARK_CLASSPATH${SPARK_DIST_CLASSPATH:+:$SPARK_DIST_CLASSPATH}" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL:?}" \
      --executor-id "${SPARK_EXECUTOR_ID:?}" \
      --cores "${SPARK_EXECUTOR_CORES:?}" \
      --app-id "${SPARK_APPLICATION_ID:?}" \
      --hostname "${SPARK_EXECUTOR_POD_IP:?}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME:-}" \
      "$@"
    ;;
  "")
    echo "usage: driver|executor (Spark on Kubernetes) or any command" >&2
    exit 2
    ;;
  *)
    exec "$@"
    ;;
esac
