#!/usr/bin/env bash
# System packages the test suite needs beyond Python 3.11 and Java 17, from Debian's apt:
#   postgresql      a real PostgreSQL server for the control-database tests
#   chromium        a headless browser for the Airflow UI page test
#   docker-compose  static validation of docker-compose.yaml (no Docker engine needed)
#   openjdk-17-jdk-headless  javac, to build the JVM reader of the event log the tests cover
#   maven           fetches the Kafka broker and Spark's Kafka connector (maven/*/pom.xml)
#   wget            the client of the compose stack's store health check, run by its test
#   etcd-server, etcd-client  the control database replicated across two regions
#                   (tests/control/ha: PostgreSQL under Patroni over a three-member etcd)
#   python3-venv    the system Python's venv, where scripts/patroni.sh installs the pinned Patroni
#                   (Debian's 3.0.2 may take the leader key back when a partition heals)
# and SeaweedFS, the S3-compatible store of the object-storage tests, built from source with Go
# by scripts/seaweedfs.sh once and cached outside the checkout (offline and instant after), and
# etcd at the version tools/etcd/go.mod pins (Debian's is 3.4.23), built the same way by scripts/etcd.sh.
# Installs only what is missing; needs root (or sudo).
set -euo pipefail

missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
command -v javac >/dev/null 2>&1 || [ -x "${JAVA_HOME:-/nonexistent}/bin/javac" ] || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v wget >/dev/null 2>&1 || missing+=(wget)
/usr/bin/python3 -c "import venv, ensurepip" 2>/dev/null || missing+=(python3-venv)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
bash "$(dirname "$0")/seaweedfs.sh" ||
  echo "prerequisites: SeaweedFS was not built — the object-storage tests skip (and fail under CI)" >&2
bash "$(dirname "$0")/etcd.sh" ||
  echo "prerequisites: etcd was not built — tests/control/ha runs Debian's etcd 3.4 instead" >&2

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  [ ${#missing[@]} -eq 0 ] && bash "$(dirname "$0")/patroni.sh" && exit 0
  echo "prerequisites: need ${missing[*]:-patroni} as root, and neither root nor sudo is available —" \
       "install them (apt-get install -y ${missing[*]}; bash scripts/patroni.sh) and run again" >&2
  exit 2
fi
patroni() {
  "${as_root[@]}" bash "$(dirname "$0")/patroni.sh" ||
    echo "prerequisites: Patroni was not installed — tests/control/ha cannot start its cluster" >&2
}
[ ${#missing[@]} -eq 0 ] && { patroni; exit 0; }
echo "prerequisites: installing ${missing[*]} with apt (first run only)" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
patroni
