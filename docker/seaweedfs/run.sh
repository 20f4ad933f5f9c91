#!/bin/sh
# The entry point of a region's S3 store (docker/seaweedfs/Dockerfile), POSIX sh: it runs on
# the official Alpine image (busybox) and on Debian (dash) alike.
#
#   tidegate-s3 serve    write the identities file from the environment, start `weed server
#                        -filer -s3`, create the region's bucket once S3 answers, then write
#                        the ready file and wait for the server
#   tidegate-s3 health   the health check: the ready file exists (the bucket was made since
#                        this start) and the S3 gateway answers GET /healthz now
#
# Environment: S3_BUCKET (the region's bucket), S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY
# (the one identity, from .env, never in the compose file or a job spec), S3_PORT (8333),
# S3_DATA (/data, the store's volume). Only the S3 port listens on the container network; the
# master, volume server and filer listen on loopback. No statistics leave the machine.
set -eu

port="${S3_PORT:-8333}"
data="${S3_DATA:-/data}"
config="${S3_CONFIG:-/etc/seaweedfs/s3.json}"
ready="${S3_READY:-/tmp/tidegate-s3.ready}"
master=127.0.0.1:9333

say() { echo "tidegate-s3: $*" >&2; }

health() {
  [ -f "$ready" ] || { say "not ready: the bucket is not made yet"; exit 1; }
  wget -q -T 5 -O /dev/null "http://127.0.0.1:${port}/healthz"
}

required() {  # required NAME PATTERN-OF-REFUSED-CHARACTERS
  eval "value=\${$1:-}"
  case "$value" in
    ""|CHANGE_ME) say "$1 is not set (set it in .env)"; exit 2 ;;
  esac
  case "$value" in
    *[!$2]*) say "$1 has characters outside [$2]"; exit 2 ;;
  esac
}

weed_shell() {  # run one `weed shell` command against this store's master
  echo "$1" | timeout 60 weed shell -master="$master" 2>&1
}

serve() {
  required S3_BUCKET 'a-z0-9.-'
  required S3_ACCESS_KEY_ID 'A-Za-z0-9._~+/=-'
  required S3_SECRET_ACCESS_KEY 'A-Za-z0-9._~+/=-'
  rm -f "$ready"
  mkdir -p "$data" "$(dirname "$config")"
  # the one identity, readable by this user alone (the characters were checked: no JSON escaping)
  old_umask=$(umask); umask 077
  printf '{"identities": [{"name": "tidegate", "credentials": [{"accessKey": "%s", "secretKey": "%s"}], "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}\n' \
    "$S3_ACCESS_KEY_ID" "$S3_SECRET_ACCESS_KEY" > "$config"
  chmod 0600 "$config"
  umask "$old_umask"

  weed server -dir="$data" \
    -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3.ip.bind=0.0.0.0 \
    -filer -s3 -s3.port="$port" -s3.config="$config" \
    -s3.port.iceberg=0 -s3.port.lance=0 \
    -master.volumeSizeLimitMB=1024 -volume.max=0 \
    -master.telemetry=false -master.telemetry.url=http://127.0.0.1:9/ &
  pid=$!
  trap 'kill -TERM "$pid" 2>/dev/null || true' TERM INT

  # the bucket, once the filer answers (made once: it stays on the volume across restarts)
  tries=0
  until weed_shell "s3.bucket.list" | grep -q "^ *${S3_BUCKET}[[:space:]]"; do
    kill -0 "$pid" 2>/dev/null || { say "weed server exited"; wait "$pid" || true; exit 1; }
    tries=$((tries + 1))
    [ "$tries" -le 120 ] || { say "bucket $S3_BUCKET not made in time"; kill -TERM "$pid"; exit 1; }
    weed_shell "s3.bucket.create -name $S3_BUCKET" >/dev/null || true
    sleep 1
  done
  # and S3 answers
  until wget -q -T 5 -O /dev/null "http://127.0.0.1:${port}/healthz"; do
    kill -0 "$pid" 2>/dev/null || { say "weed server exited"; wait "$pid" || true; exit 1; }
    sleep 1
  done
  touch "$ready"
  say "bucket $S3_BUCKET ready on :$port"
  # a signal interrupts wait (and the trap passes it on): wait again until the server is gone
  rc=0
  while kill -0 "$pid" 2>/dev/null; do
    wait "$pid" && rc=0 || rc=$?
  done
  rm -f "$ready"
  exit "$rc"
}

case "${1:-serve}" in
  serve) serve ;;
  health) health ;;
  *) say "usage: tidegate-s3 serve|health"; exit 2 ;;
esac
