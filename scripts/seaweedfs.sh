#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (Apache-2.0), the S3-compatible server the tests start for each
# region, from the version pinned in tools/seaweedfs/go.mod. The binary is cached outside the
# checkout, in ${TIDEGATE_CACHE:-~/.cache/tidegate}/seaweedfs/<version>/weed, so a fresh clone
# or a second run finds it offline and at once (silently). The first build downloads about
# 3.7 GB of Go modules into Go's own module cache and takes minutes.
#   --path   print where the binary is (or will be) and exit
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's|^require github.com/seaweedfs/seaweedfs \(v[^ ]*\).*|\1|p' tools/seaweedfs/go.mod)
if [ -z "$version" ]; then
  echo "seaweedfs: no pinned version found in tools/seaweedfs/go.mod" >&2
  exit 2
fi
cache="${TIDEGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tidegate}"
dir="$cache/seaweedfs/$version"
if [ "${1:-}" = "--path" ]; then
  echo "$dir/weed"
  exit 0
fi
[ -x "$dir/weed" ] && exit 0

if ! command -v go >/dev/null 2>&1; then
  echo "seaweedfs: go not found — the object-storage tests need SeaweedFS built from source:" \
       "install Go 1.21 or newer (it fetches the toolchain SeaweedFS asks for itself; Debian 12's" \
       "golang-go is 1.19, too old: use the golang-1.2x package from bookworm-backports or Go's" \
       "own release), put it on PATH and rerun. Without it those tests are skipped (failed under CI=true)" >&2
  exit 0
fi

echo "seaweedfs: building weed $version into $dir (first time only: downloads ~3.7 GB of Go" \
     "modules into $(go env GOMODCACHE), then builds for a few minutes)" >&2
started=$(date +%s)
mkdir -p "$cache/seaweedfs"
partial="$dir.partial"
rm -rf "$partial"
mkdir -p "$partial"
# nice: a developer's machine stays usable while the build takes its cores
(cd tools/seaweedfs && nice -n 10 go build -mod=readonly -trimpath -ldflags "-s -w" \
  -o "$partial/weed" github.com/seaweedfs/seaweedfs/weed)
"$partial/weed" version >/dev/null 2>&1
rm -rf "$dir"
mv "$partial" "$dir"
echo "seaweedfs: built $dir/weed in $(( $(date +%s) - started )) s" >&2
