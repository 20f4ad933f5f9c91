#!/usr/bin/env bash
# Builds etcd's server (Apache-2.0), the member each site of the replicated control database
# runs (tests/control/ha), from the version pinned in tools/etcd/go.mod. Debian 12's etcd-server
# is 3.4.23, whose leases a partitioned former raft leader could still revoke (fixed upstream
# from 3.4.25/3.5.8); decision 0015 says why the pin. The binary is cached outside the checkout,
# in ${TIDEGATE_CACHE:-~/.cache/tidegate}/etcd/<version>/etcd, so a fresh clone or a second run
# finds it offline and at once (silently). The first build downloads about 150 MB of Go modules
# into Go's own module cache and takes a minute or two. Debian's etcdctl (etcd-client) is kept:
# it speaks the same v3 API.
#   --path   print where the binary is (or will be) and exit
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's|^require go.etcd.io/etcd/server/v3 \(v[^ ]*\).*|\1|p' tools/etcd/go.mod)
if [ -z "$version" ]; then
  echo "etcd: no pinned version found in tools/etcd/go.mod" >&2
  exit 2
fi
cache="${TIDEGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tidegate}"
dir="$cache/etcd/$version"
if [ "${1:-}" = "--path" ]; then
  echo "$dir/etcd"
  exit 0
fi
[ -x "$dir/etcd" ] && exit 0

if ! command -v go >/dev/null 2>&1; then
  echo "etcd: go not found — the replicated control database runs etcd $version built from source:" \
       "install Go 1.21 or newer (it fetches the toolchain etcd asks for itself; Debian 12's" \
       "golang-go is 1.19, too old: use the golang-1.2x package from bookworm-backports or Go's" \
       "own release), put it on PATH and rerun. Without it tests/control/ha runs Debian's etcd 3.4" >&2
  exit 0
fi

echo "etcd: building etcd $version into $dir (first time only: downloads ~150 MB of Go" \
     "modules into $(go env GOMODCACHE), then builds for a minute or two)" >&2
started=$(date +%s)
mkdir -p "$cache/etcd"
partial="$dir.partial"
rm -rf "$partial"
mkdir -p "$partial"
# nice: a developer's machine stays usable while the build takes its cores
(cd tools/etcd && nice -n 10 go build -mod=readonly -trimpath -ldflags "-s -w" \
  -o "$partial/etcd" go.etcd.io/etcd/server/v3)
"$partial/etcd" --version >/dev/null 2>&1
rm -rf "$dir"
mv "$partial" "$dir"
echo "etcd: built $dir/etcd in $(( $(date +%s) - started )) s" >&2
