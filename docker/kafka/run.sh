#!/usr/bin/env bash
# Entry point of docker/kafka/Dockerfile on a plain Debian base (the official image brings
# its own): a single-node KRaft broker from the KAFKA_* variables, as apache/kafka reads them
# (KAFKA_FOO_BAR -> foo.bar; __ -> _ and ___ -> - within a name).
set -euo pipefail
props=/opt/kafka/config/server.properties
: > "$props"
for var in $(compgen -e); do
  case "$var" in
    KAFKA_HEAP_OPTS|KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_OPTS|KAFKA_LOG4J_OPTS) continue ;;
    KAFKA_*) ;;
    *) continue ;;
  esac
  key="${var#KAFKA_}"
  key="${key,,}"
  key="${key//___/-}"
  key="${key//__/@}"
  key="${key//_/.}"
  key="${key//@/_}"
  printf '%s=%s\n' "$key" "${!var}" >> "$props"
done

classpath='/opt/kafka/libs/*'
java_opts=(${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G} ${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20}
           -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties ${KAFKA_OPTS:-})
# the official image's default cluster id; a KRaft log directory is formatted once
java "${java_opts[@]}" -cp "$classpath" kafka.tools.StorageTool format --ignore-formatted \
  --cluster-id "${CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}" --config "$props"
exec java "${java_opts[@]}" -cp "$classpath" kafka.Kafka "$props"
