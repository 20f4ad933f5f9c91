#!/usr/bin/env bash
# Fetches the pinned JVM dependencies (maven/*/pom.xml) with Maven into var/jvm/<name>/
# (git-ignored), with Maven's own cache outside the clone in ${TIDEGATE_CACHE:-~/.cache/tidegate}/m2,
# so a fresh clone on the same machine (CI's) copies the jars instead of downloading them again. A set whose .fetched stamp matches its
# pom is left alone, so a second run neither starts Maven nor touches the network.
set -euo pipefail
cd "$(dirname "$0")/.."
deps="${TIDEGATE_JVM_DEPS:-$PWD/var/jvm}"
for pom in maven/*/pom.xml; do
  name=$(basename "$(dirname "$pom")")
  out="$deps/$name"
  want=$(sha256sum "$pom" | cut -d' ' -f1)
  if [ -f "$out/.fetched" ] && [ "$(cat "$out/.fetched")" = "$want" ]; then
    continue
  fi
  if ! command -v mvn >/dev/null 2>&1; then
    echo "bootstrap: mvn not found — the $name jars are needed (Kafka input, s3a storage): apt-get install maven, then rerun" >&2
    continue
  fi
  echo "bootstrap: fetching the $name jars with Maven into $out" >&2
  rm -rf "$out.partial"
  mvn -q -B -Dstyle.color=never -Dmaven.repo.local="${TIDEGATE_CACHE:-$HOME/.cache/tidegate}/m2" -f "$pom" dependency:copy-dependencies \
    -DoutputDirectory="$out.partial" >&2
  echo "$want" > "$out.partial/.fetched"
  rm -rf "$out"
  mv "$out.partial" "$out"
done
