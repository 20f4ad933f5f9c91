#!/usr/bin/env bash
# Installs Patroni (MIT), the replicated control database's failover manager
# (tests/control/ha, decision 0015), at the version pinned in tools/patroni/requirements.txt,
# into a venv of the system's Python 3 — Patroni runs as the postgres user, who can run
# neither the project's .venv interpreter (it may live in root's home) nor anything in
# root's cache. The venv lives in ${TIDEGATE_PATRONI_HOME:-/var/cache/tidegate/patroni},
# which every user can read; a second run with the same pins does nothing (offline).
#   --path   print where the patroni program is (or will be) and exit
set -euo pipefail
cd "$(dirname "$0")/.."

home="${TIDEGATE_PATRONI_HOME:-/var/cache/tidegate/patroni}"
if [ "${1:-}" = "--path" ]; then
  echo "$home/bin/patroni"
  exit 0
fi
want=$(cat tools/patroni/requirements.txt requirements/constraints.txt | sha256sum | cut -d' ' -f1)
stamp="$home/.tidegate-installed"
if [ -x "$home/bin/patroni" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
python=/usr/bin/python3
if ! "$python" -c "import venv, ensurepip" 2>/dev/null; then
  echo "patroni: $python with its venv module is needed (apt-get install python3-venv)" >&2
  exit 2
fi
echo "patroni: installing $(grep -v '^#' tools/patroni/requirements.txt) into $home (first run only)" >&2
rm -rf "$home"
mkdir -p "$(dirname "$home")"
"$python" -m venv "$home"
"$home/bin/python" -m pip install --quiet --disable-pip-version-check \
  -c requirements/constraints.txt -r tools/patroni/requirements.txt
chmod -R a+rX "$home"
echo "$want" > "$stamp"
