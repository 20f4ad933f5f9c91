#!/usr/bin/env bash
# Builds Docker Compose v2 (Apache-2.0), the Compose implementation scripts/compose.sh drives
# under podman (through podman's Docker-compatible API socket) and wherever the `docker compose`
# plugin is missing, from the version pinned in tools/compose/VERSION. Compose v2 is the
# maintained implementation: it gates `up --wait` on the services' health checks and on
# one-shot services that others wait for with service_completed_successfully. The source comes
# from the Go module proxy and is built as its own main module (its go.mod holds directives that
# only hold there). The binary is cached outside the checkout, in
# ${TIDEGATE_CACHE:-~/.cache/tidegate}/compose/<version>/docker-compose, so a second run finds
# it offline and at once (silently). The first build downloads about 300 MB of Go modules into
# Go's own module cache and takes a few minutes.
#   --path   print where the binary is (or will be) and exit
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(tr -d '[:space:]' < tools/compose/VERSION)
case "$version" in
  v2.*) ;;
  *) echo "compose: tools/compose/VERSION holds '$version', not a Compose v2 release (v2.x.y)" >&2; exit 2 ;;
esac
cache="${TIDEGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tidegate}"
dir="$cache/compose/$version"
if [ "${1:-}" = "--path" ]; then
  echo "$dir/docker-compose"
  exit 0
fi
[ -x "$dir/docker-compose" ] && exit 0

if ! command -v go >/dev/null 2>&1; then
  echo "compose: go not found — the compose stack runs Docker Compose $version built from source:" \
       "install Go 1.24 or newer, put it on PATH and rerun (or install Docker's compose plugin)" >&2
  exit 2
fi

echo "compose: building Docker Compose $version into $dir (first time only: downloads ~300 MB" \
     "of Go modules into $(go env GOMODCACHE), then builds for a few minutes)" >&2
started=$(date +%s)
src=$(go mod download -json "github.com/docker/compose/v2@$version" \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
mkdir -p "$cache/compose"
partial="$dir.partial"
rm -rf "$partial"
mkdir -p "$partial"
# the module cache is read-only: build in a copy, where its go.mod is the main module's
cp -r "$src" "$partial/src"
chmod -R u+w "$partial/src"
(cd "$partial/src" && nice -n 10 go build -mod=readonly -trimpath \
  -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$version" \
  -o "$partial/docker-compose" ./cmd)
rm -rf "$partial/src"
"$partial/docker-compose" version >/dev/null
rm -rf "$dir"
mv "$partial" "$dir"
echo "compose: built $dir/docker-compose in $(( $(date +%s) - started )) s" >&2
