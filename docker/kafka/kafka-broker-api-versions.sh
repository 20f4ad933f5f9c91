#!/usr/bin/env bash
# The health check of docker/kafka/Dockerfile on a plain Debian base, at the path of the
# official image's tool (the broker jars do not include kafka-tools): sends a Kafka
# ApiVersions request (v0) and succeeds when the broker answers it without error.
#   kafka-broker-api-versions.sh --bootstrap-server localhost:9092
set -euo pipefail
server=localhost:9092
while [ $# -gt 0 ]; do
  case "$1" in
    --bootstrap-server) server="$2"; shift 2 ;;
    *) shift ;;
  esac
done
exec 3<>"/dev/tcp/${server%:*}/${server##*:}"
# length 12 | api key 18 (ApiVersions) | version 0 | correlation id 7 | client id "hc"
printf '\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x07\x00\x02hc' >&3
# answer: length (4 bytes), correlation id 7, error code 0
answer=$(timeout 5 head -c 10 <&3 | od -An -tx1 | tr -d ' \n')
if [ "${answer:8:12}" = "000000070000" ]; then
  echo "$server: ApiVersions answered"
  exit 0
fi
echo "$server: no valid ApiVersions answer (${answer:-nothing})" >&2
exit 1
