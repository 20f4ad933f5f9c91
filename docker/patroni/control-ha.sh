#!/usr/bin/env bash
# Entry point of docker/patroni/Dockerfile (the control-ha profile):
#   tidegate-control-ha etcd NAME      site NAME's etcd member
#   tidegate-control-ha patroni NAME   region NAME's PostgreSQL 15 under Patroni
# for the sites of CONTROL_HA_SITES ("NAME:PG_HOST[:ETCD_HOST] ..."), as
# tidegate.control.ha.topology makes them (through tidegate.control.ha.render): nothing here
# repeats a setting. Patroni's settings are written at every start — the passwords come from
# the environment — into the region's volume, readable by postgres only. Once the region's
# PostgreSQL is the primary, the application's roles and databases are created there by the
# single server's init-databases.sh (idempotent); the standby copies them.
set -Eeuo pipefail

say() { printf 'control-ha: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

kind="${1:-}"; name="${2:-}"
[ -n "$name" ] || die "usage: tidegate-control-ha etcd|patroni NAME"
[ -n "${CONTROL_HA_SITES:-}" ] || die "CONTROL_HA_SITES is not set"
sites=()
for site in $CONTROL_HA_SITES; do sites+=(--site "$site"); done

PATRONI_HOME="${PATRONI_HOME:-/var/lib/postgresql/patroni}"  # the volume (docker-compose.yaml)
SOCKET_DIR=/var/run/postgresql

as() {  # as USER: run this script again as USER, after giving it its directories
  local user=$1; shift
  chown "$user:$user" "$@"
  chmod 0700 "${@:1:1}"
  exec setpriv --reuid="$user" --regid="$user" --init-groups "$0" "$kind" "$name"
}

databases() {  # waits for the databases: makes them where this region is the primary
  local psql=(psql -h "$SOCKET_DIR" -U postgres -d postgres -XqtA)
  while sleep 3; do
    [ "$("${psql[@]}" -c "SELECT count(*) FROM pg_database WHERE datname IN ('airflow', 'tidegate')" 2>/dev/null)" = 2 ] \
      && return 0
    [ "$("${psql[@]}" -c 'SELECT NOT pg_is_in_recovery()' 2>/dev/null)" = t ] || continue
    POSTGRES_USER=postgres PGHOST="$SOCKET_DIR" bash /usr/local/share/tidegate-ha/init-databases.sh \
      || say "creating the databases failed; retrying"
  done
}

case "$kind" in
  etcd)
    [ "$(id -u)" != 0 ] || as etcd /var/lib/etcd
    exec python3 -m tidegate.control.ha.render etcd "$name" "${sites[@]}" --data-dir "/var/lib/etcd/$name" --exec ;;
  patroni)
    [ "$(id -u)" != 0 ] || as postgres "$PATRONI_HOME" "$SOCKET_DIR"
    python3 -m tidegate.control.ha.render patroni "$name" "${sites[@]}" \
      --data-dir "$PATRONI_HOME/data" --bin-dir /usr/lib/postgresql/15/bin --socket-dir "$SOCKET_DIR" \
      --hba-address samenet --client-network samenet --out "$PATRONI_HOME/patroni.yaml" \
      || die "no settings for region $name (Patroni's passwords: docker-compose.control-ha.yaml sets them from .env)"
    databases &
    exec patroni "$PATRONI_HOME/patroni.yaml" ;;
  *)
    die "usage: tidegate-control-ha etcd|patroni NAME" ;;
esac
