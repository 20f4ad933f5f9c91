#!/usr/bin/env bash
# Entry point of docker/postgres/Dockerfile on a plain Debian base (the official postgres
# image brings its own): the part of that image's contract the compose stack relies on.
#   - started as root: owns PGDATA to postgres and runs itself again as postgres
#   - an empty PGDATA: initdb with the superuser POSTGRES_USER (default postgres) and
#     POSTGRES_PASSWORD; the init scripts of /docker-entrypoint-initdb.d/ run once against a
#     server that listens on its Unix socket only; then the server stops
#   - then `postgres` in the foreground, listening on every address, passwords (SCRAM)
#     required over TCP
set -Eeuo pipefail

if [ "${1:-}" != "postgres" ]; then
  exec "$@"
fi

PGDATA="${PGDATA:-/var/lib/postgresql/data}"
export PGDATA
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "docker-entrypoint: POSTGRES_PASSWORD is not set" >&2
    exit 2
  fi
  export POSTGRES_USER="${POSTGRES_USER:-postgres}"
  export POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
  initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
         --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  printf 'host all all all scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
  pg_ctl --wait --silent -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" start
  if [ "$POSTGRES_DB" != "postgres" ]; then
    psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname postgres \
         -c "CREATE DATABASE \"$POSTGRES_DB\""
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh)  echo "docker-entrypoint: running $f"
             if [ -x "$f" ]; then "$f"; else . "$f"; fi ;;
      *.sql) echo "docker-entrypoint: running $f"
             psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" -f "$f" ;;
      *)     if [ -e "$f" ]; then echo "docker-entrypoint: ignoring $f"; fi ;;
    esac
  done
  pg_ctl --wait --silent -m fast stop
  echo "docker-entrypoint: database initialised"
fi

shift
exec postgres -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
