#!/usr/bin/env bash
# The compose stack (docker-compose.yaml) under Docker or podman.
#
#   scripts/compose.sh build    build the four images (tidegate, tidegate-postgres, tidegate-kafka,
#                               tidegate-seaweedfs), and tidegate-patroni when the control-ha
#                               profile is on
#   scripts/compose.sh up       build, start every service with .env, wait until all are healthy
#   scripts/compose.sh smoke    build, start with throwaway secrets, deploy the demo job into both
#                               regions with traffic flowing, drill a node failure, fail over,
#                               check GX on the consumer view, tear everything down; prints the
#                               time of each step and the total. With the control-ha profile
#                               (COMPOSE_PROFILES=control-ha), the primary's region loses its
#                               Airflow, PostgreSQL and etcd member first; the other's fails over
#   scripts/compose.sh down     stop and remove the containers (volumes too with --volumes)
#   scripts/compose.sh ps | logs [SERVICE...] | exec SERVICE CMD...
#
# The engine: Docker when its daemon answers, else podman through its Docker-compatible API
# socket, which this script starts. Compose is Docker Compose v2 on both: Docker's `docker
# compose` plugin, else the release pinned in tools/compose/VERSION, built by
# scripts/compose_v2.sh. Its `up --wait` gates the start on the health checks.
# TIDEGATE_ENGINE=docker|podman forces an engine.
#
# Base images (TIDEGATE_BASE_IMAGES):
#   registry     python:3.11-slim-bookworm, postgres:16-bookworm, apache/kafka:4.1.1,
#                chrislusf/seaweedfs:4.53 (pulled)
#   debootstrap  one Debian bookworm base made here with debootstrap (root, no registry), from
#                which all four images are built: Debian's python3 (3.11), postgresql (15),
#                Java 17 with the pinned Kafka jars (scripts/jvm_deps.sh), and the weed binary
#                built from the pinned SeaweedFS source (scripts/seaweedfs.sh)
# The tidegate image carries the pinned hadoop-aws jars (scripts/jvm_deps.sh) on either base.
#   default: registry under Docker or when those images are already present; else debootstrap
#   when it is installed.
# The control-ha profile (docs/guide/docker.md): on when COMPOSE_PROFILES names it (in the
# environment or the env file); adds docker-compose.control-ha.yaml and builds tidegate-patroni
# (Debian's postgresql-15, patroni, etcd-server, etcd-client on debian:bookworm-slim or the
# debootstrap base).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
STATE="$REPO/var/compose"                  # git-ignored: env file, socket, pid files, logs
mkdir -p "$STATE"
VERSION="${TIDEGATE_VERSION:-0.1.0}"
DEBIAN_BASE="${TIDEGATE_DEBIAN_BASE:-localhost/tidegate-debian:bookworm}"

say() { printf 'compose: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# -- engine -------------------------------------------------------------------------------------

engine="${TIDEGATE_ENGINE:-}"
if [ -z "$engine" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    engine=docker
  elif command -v podman >/dev/null 2>&1; then
    engine=podman
  else
    die "neither a Docker daemon nor podman: install Docker, or podman (apt-get install -y podman runc)"
  fi
fi

if [ "$engine" = podman ]; then
  # podman's settings for this stack: ulimits under the machine's hard limits (podman's default
  # nofile of 1048576 is refused where the hard limit is lower); runc where cgroups are mounted
  # in hybrid mode, which crun refuses; cgroupfs and file events where no systemd runs
  conf="$STATE/containers.conf"
  nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=1048576
  [ "$nofile" -gt 16384 ] && nofile=16384
  {
    echo "[containers]"
    echo "default_ulimits = [\"nofile=${nofile}:${nofile}\", \"nproc=16384:16384\"]"
    echo "[engine]"
    if [ -d /sys/fs/cgroup/unified ] && [ -d /sys/fs/cgroup/memory ] && command -v runc >/dev/null 2>&1; then
      echo 'runtime = "runc"'
    fi
    if [ ! -S /run/systemd/private ]; then
      echo 'cgroup_manager = "cgroupfs"'
      echo 'events_logger = "file"'
    fi
  } > "$conf"
  export CONTAINERS_CONF="$conf"
fi

# -- base images ------------------------------------------------------------------------------

base="${TIDEGATE_BASE_IMAGES:-}"
if [ -z "$base" ]; then
  if [ "$engine" = docker ]; then
    base=registry
  elif podman image exists docker.io/library/python:3.11-slim-bookworm \
       && podman image exists docker.io/library/postgres:16-bookworm \
       && podman image exists docker.io/apache/kafka:4.1.1 \
       && podman image exists docker.io/chrislusf/seaweedfs:4.53; then
    base=registry
  elif command -v debootstrap >/dev/null 2>&1; then
    base=debootstrap
  else
    base=registry
  fi
fi
case "$base" in
  registry)
    python_image=python:3.11-slim-bookworm
    postgres_image=postgres:16-bookworm
    kafka_image=apache/kafka:4.1.1
    seaweedfs_image=chrislusf/seaweedfs:4.53
    patroni_image=debian:bookworm-slim ;;
  debootstrap)
    python_image="$DEBIAN_BASE"; postgres_image="$DEBIAN_BASE"; kafka_image="$DEBIAN_BASE"
    seaweedfs_image="$DEBIAN_BASE"; patroni_image="$DEBIAN_BASE" ;;
  *) die "TIDEGATE_BASE_IMAGES=$base: registry or debootstrap" ;;
esac
export PYTHON_IMAGE="${PYTHON_IMAGE:-$python_image}"
export POSTGRES_IMAGE="${POSTGRES_IMAGE:-$postgres_image}"
export KAFKA_IMAGE="${KAFKA_IMAGE:-$kafka_image}"
export SEAWEEDFS_IMAGE="${SEAWEEDFS_IMAGE:-$seaweedfs_image}"
export PATRONI_IMAGE="${PATRONI_IMAGE:-$patroni_image}"

control_ha() {  # the control-ha profile is on: COMPOSE_PROFILES, from the environment or the env file
  local profiles="${COMPOSE_PROFILES:-}"
  if [ -z "$profiles" ] && [ -n "${ENV_FILE:-}" ] && [ -f "$ENV_FILE" ]; then
    profiles=$(sed -n 's/^COMPOSE_PROFILES=//p' "$ENV_FILE" | tail -n1)
  fi
  case ",$profiles," in *,control-ha,*) return 0 ;; *) return 1 ;; esac
}

debian_base() {  # the debootstrap base, made once
  [ "$base" = debootstrap ] || return 0
  if $engine image exists "$DEBIAN_BASE" 2>/dev/null || $engine image inspect "$DEBIAN_BASE" >/dev/null 2>&1; then
    return 0
  fi
  [ "$(id -u)" = 0 ] || die "debootstrap needs root (or set TIDEGATE_BASE_IMAGES=registry)"
  local root="$STATE/debian-rootfs"
  rm -rf "$root"
  say "making the Debian bookworm base $DEBIAN_BASE with debootstrap"
  debootstrap --variant=minbase bookworm "$root" "${TIDEGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$STATE/debootstrap.log" 2>&1 \
    || die "debootstrap failed: $STATE/debootstrap.log"
  cat > "$root/etc/apt/sources.list" <<EOF
deb ${TIDEGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian} bookworm main
deb ${TIDEGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian} bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | $engine import --change 'CMD ["bash"]' - "$DEBIAN_BASE" >"$STATE/import.log" 2>&1 \
    || die "importing the base failed: $STATE/import.log"
  rm -rf "$root"
}

kafka_libs() {  # the pinned broker jars in docker/kafka's build context (Debian base only)
  [ "$KAFKA_IMAGE" = "$DEBIAN_BASE" ] || return 0
  bash scripts/jvm_deps.sh
  local jars="${TIDEGATE_JVM_DEPS:-$REPO/var/jvm}/kafka-broker"
  [ -f "$jars/.fetched" ] || die "no Kafka broker jars in $jars: install maven, then run scripts/jvm_deps.sh"
  mkdir -p docker/kafka/libs
  rsync -a --delete --exclude .fetched "$jars/" docker/kafka/libs/ 2>/dev/null \
    || { rm -rf docker/kafka/libs && mkdir -p docker/kafka/libs && cp "$jars"/*.jar docker/kafka/libs/; }
}

jvm_deps() {  # the pinned hadoop-aws jars in docker/Dockerfile's context (every base: s3a:// storage)
  bash scripts/jvm_deps.sh
  local jars="${TIDEGATE_JVM_DEPS:-$REPO/var/jvm}/hadoop-aws"
  [ -f "$jars/.fetched" ] || die "no hadoop-aws jars in $jars: install maven, then run scripts/jvm_deps.sh"
  mkdir -p docker/jvm-deps/hadoop-aws
  rsync -a --delete "$jars/" docker/jvm-deps/hadoop-aws/ 2>/dev/null \
    || { rm -rf docker/jvm-deps/hadoop-aws && cp -a "$jars" docker/jvm-deps/hadoop-aws; }
}

seaweedfs_bin() {  # the pinned weed binary in docker/seaweedfs's build context (Debian base only)
  [ "$SEAWEEDFS_IMAGE" = "$DEBIAN_BASE" ] || return 0
  bash scripts/seaweedfs.sh
  local weed; weed=$(bash scripts/seaweedfs.sh --path)
  [ -x "$weed" ] || die "no weed binary at $weed: install Go, then run scripts/seaweedfs.sh"
  mkdir -p docker/seaweedfs/bin
  cmp -s "$weed" docker/seaweedfs/bin/weed || install -m 0755 "$weed" docker/seaweedfs/bin/weed
}

build() {
  debian_base
  kafka_libs
  jvm_deps
  seaweedfs_bin
  local secret=()
  # a TLS-inspecting proxy's CA bundle, for pip inside the build (docker/Dockerfile)
  local ca="${TIDEGATE_BUILD_CA:-${PIP_CERT:-${REQUESTS_CA_BUNDLE:-}}}"
  [ -n "$ca" ] && [ -s "$ca" ] && secret=(--secret "id=pip-ca,src=$ca")
  local quiet=(); [ -n "${TIDEGATE_COMPOSE_VERBOSE:-}" ] || quiet=(--quiet)
  if [ "$engine" = docker ]; then export DOCKER_BUILDKIT=1; fi
  say "building tidegate:$VERSION on $PYTHON_IMAGE"
  $engine build "${quiet[@]}" "${secret[@]}" -f docker/Dockerfile \
    $( [ "$engine" = podman ] && echo --ignorefile docker/Dockerfile.dockerignore ) \
    --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE" -t "tidegate:$VERSION" . >"$STATE/build-tidegate.log" 2>&1 \
    || { tail -n 40 "$STATE/build-tidegate.log" >&2; die "build of tidegate failed: $STATE/build-tidegate.log"; }
  say "building tidegate-postgres:$VERSION on $POSTGRES_IMAGE"
  $engine build "${quiet[@]}" --build-arg "POSTGRES_IMAGE=$POSTGRES_IMAGE" -t "tidegate-postgres:$VERSION" \
    docker/postgres >"$STATE/build-postgres.log" 2>&1 \
    || { tail -n 40 "$STATE/build-postgres.log" >&2; die "build of tidegate-postgres failed"; }
  say "building tidegate-kafka:$VERSION on $KAFKA_IMAGE"
  $engine build "${quiet[@]}" --build-arg "KAFKA_IMAGE=$KAFKA_IMAGE" -t "tidegate-kafka:$VERSION" \
    docker/kafka >"$STATE/build-kafka.log" 2>&1 \
    || { tail -n 40 "$STATE/build-kafka.log" >&2; die "build of tidegate-kafka failed"; }
  say "building tidegate-seaweedfs:$VERSION on $SEAWEEDFS_IMAGE"
  $engine build "${quiet[@]}" --build-arg "SEAWEEDFS_IMAGE=$SEAWEEDFS_IMAGE" -t "tidegate-seaweedfs:$VERSION" \
    docker/seaweedfs >"$STATE/build-seaweedfs.log" 2>&1 \
    || { tail -n 40 "$STATE/build-seaweedfs.log" >&2; die "build of tidegate-seaweedfs failed"; }
  control_ha || return 0
  say "building tidegate-patroni:$VERSION on $PATRONI_IMAGE (the control-ha profile)"
  $engine build "${quiet[@]}" "${secret[@]}" -f docker/patroni/Dockerfile \
    $( [ "$engine" = podman ] && echo --ignorefile docker/patroni/Dockerfile.dockerignore ) \
    --build-arg "PATRONI_IMAGE=$PATRONI_IMAGE" -t "tidegate-patroni:$VERSION" . >"$STATE/build-patroni.log" 2>&1 \
    || { tail -n 40 "$STATE/build-patroni.log" >&2; die "build of tidegate-patroni failed: $STATE/build-patroni.log"; }
}

# -- compose ----------------------------------------------------------------------------------

SOCKET_PID="$STATE/podman-service.pid"
TICKER_PID="$STATE/healthcheck-ticker.pid"

start_podman_service() {
  [ "$engine" = podman ] || return 0
  local sock="$STATE/podman.sock"
  if [ -f "$SOCKET_PID" ] && kill -0 "$(cat "$SOCKET_PID")" 2>/dev/null && [ -S "$sock" ]; then
    :
  else
    rm -f "$sock"
    podman system service --time=0 "unix://$sock" >"$STATE/podman-service.log" 2>&1 &
    echo $! > "$SOCKET_PID"
    for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.2; done
    [ -S "$sock" ] || die "podman's API socket did not come up: $STATE/podman-service.log"
  fi
  export DOCKER_HOST="unix://$sock"
  # podman runs health checks from systemd timers; where no systemd runs, nothing would run
  # them, so every service would stay "starting" and its dependants would never start
  if [ ! -S /run/systemd/private ] && ! { [ -f "$TICKER_PID" ] && kill -0 "$(cat "$TICKER_PID")" 2>/dev/null; }; then
    health_ticker >"$STATE/healthcheck-ticker.log" 2>&1 &
    echo $! > "$TICKER_PID"
  fi
}

health_ticker() {  # runs each container's health check: every 5 s until healthy, then every 30 s
  declare -A last=()
  while true; do
    now=$(date +%s)
    while read -r id status; do
      case "$status" in
        *"(healthy)"*) [ $((now - ${last[$id]:-0})) -ge 30 ] || continue ;;
        *"(starting)"*|*"(unhealthy)"*) ;;
        *) continue ;;
      esac
      last[$id]=$now
      timeout 60 podman healthcheck run "$id" >/dev/null 2>&1 &
    done < <(podman ps --filter "label=com.docker.compose.project=$PROJECT" --format '{{.ID}} {{.Status}}' 2>/dev/null)
    wait
    sleep 5
  done
}

stop_podman_service() {
  for f in "$TICKER_PID" "$SOCKET_PID"; do
    if [ -f "$f" ]; then
      kill "$(cat "$f")" 2>/dev/null || true
      rm -f "$f"
    fi
  done
}

compose_cmd() {
  if [ "$engine" = docker ] && docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose)
  else
    bash scripts/compose_v2.sh || die "no Compose v2: see scripts/compose_v2.sh"
    COMPOSE=("$(bash scripts/compose_v2.sh --path)")
  fi
  COMPOSE+=(--project-directory "$REPO" --project-name "$PROJECT" --env-file "$ENV_FILE" -f "$REPO/docker-compose.yaml")
  if control_ha; then
    COMPOSE+=(-f "$REPO/docker-compose.control-ha.yaml" --profile control-ha)
  fi
}

compose() { "${COMPOSE[@]}" "$@"; }

up_stack() {  # start in dependency order; done when every health check passes and airflow-init exited 0
  compose up -d --no-build --wait --wait-timeout "${1:-900}" || {
    compose ps -a >&2 || true
    compose logs --tail 40 airflow-init >&2 || true
    die "the stack did not come up healthy"
  }
}

# -- commands -----------------------------------------------------------------------------------

smoke_env() {  # throwaway secrets and free host ports: the smoke never needs .env
  python3 scripts/compose_smoke.py env "$STATE/smoke.env" "$VERSION"
  echo "$STATE/smoke.env"
}

env_value() { sed -n "s/^$1=//p" "$ENV_FILE" | tail -n1; }

T0=$(date +%s)
STEPS=()
step() {  # step NAME CMD...: run, time, remember
  local name=$1; shift
  local t=$(date +%s)
  say "── $name"
  "$@"
  local d=$(( $(date +%s) - t ))
  STEPS+=("$(printf '%-10s %5ss' "$name" "$d")")
  say "── $name: ${d}s"
}
report() {
  say "steps:"
  for s in "${STEPS[@]}"; do say "  $s"; done
  say "  $(printf '%-10s %5ss' total "$(( $(date +%s) - T0 ))")"
}

cmd="${1:-}"; shift || true
case "$cmd" in
  build)
    build ;;
  up)
    ENV_FILE="${TIDEGATE_ENV_FILE:-$REPO/.env}"
    [ -f "$ENV_FILE" ] || die "no $ENV_FILE: cp .env.example .env, replace every CHANGE_ME"
    PROJECT="$(env_value COMPOSE_PROJECT_NAME)"; PROJECT="${PROJECT:-tidegate}"
    compose_cmd
    step build build
    step start start_podman_service
    step up up_stack 900
    compose ps
    report ;;
  down)
    ENV_FILE="${TIDEGATE_ENV_FILE:-$REPO/.env}"
    [ -f "$ENV_FILE" ] || ENV_FILE="$STATE/smoke.env"
    [ -f "$ENV_FILE" ] || die "no .env and no smoke env: nothing to stop"
    PROJECT="$(env_value COMPOSE_PROJECT_NAME)"; PROJECT="${PROJECT:-tidegate}"
    compose_cmd
    start_podman_service
    compose down --remove-orphans --timeout 30 "$@"
    stop_podman_service ;;
  ps|logs|exec)
    ENV_FILE="${TIDEGATE_ENV_FILE:-$REPO/.env}"
    [ -f "$ENV_FILE" ] || ENV_FILE="$STATE/smoke.env"
    PROJECT="$(env_value COMPOSE_PROJECT_NAME)"; PROJECT="${PROJECT:-tidegate}"
    compose_cmd
    start_podman_service
    compose "$cmd" "$@" ;;
  smoke)
    ENV_FILE=$(smoke_env)
    rm -f "$STATE/smoke-failure.log" "$STATE/smoke-drivers.log"
    PROJECT="$(env_value COMPOSE_PROJECT_NAME)"
    compose_cmd
    teardown() {
      local rc=$?
      if [ -z "${DOCKER_HOST:-}" ] && [ "$engine" = podman ]; then  # failed before anything started
        report
        exit "$rc"
      fi
      if [ "$rc" != 0 ]; then
        compose ps >&2 || true
        compose logs --tail 60 >"$STATE/smoke-failure.log" 2>&1 || true
        say "failed; the services' last logs: $STATE/smoke-failure.log"
        # the drivers' own logs are on the regions' volumes, which `down --volumes` removes
        local svc region
        for svc in $(compose config --services | grep -E '^tidegate-.+-drivers$'); do
          region=${svc#tidegate-}; region=${region%-drivers}
          compose exec -T "$svc" sh -c "for f in /var/tidegate/regions/$region/jobs/*/drivers/*.log; do
            echo \"== $svc \$f\"; tail -n 200 \"\$f\"; done" >>"$STATE/smoke-drivers.log" 2>&1 || true
        done
        say "the drivers' logs: $STATE/smoke-drivers.log"
      fi
      if [ -z "${TIDEGATE_SMOKE_KEEP:-}" ]; then
        local t=$(date +%s)
        compose down --volumes --remove-orphans --timeout 30 >/dev/null 2>&1 || true
        stop_podman_service
        STEPS+=("$(printf '%-10s %5ss' down "$(( $(date +%s) - t ))")")
      fi
      report
      [ "$rc" = 0 ] && say "smoke passed ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null), $(date -u +%F))"
      exit "$rc"
    }
    trap teardown EXIT
    step build build
    step start start_podman_service
    step up up_stack 900
    export AIRFLOW_URL="http://127.0.0.1:$(env_value AIRFLOW_API_PORT)"
    export AIRFLOW_USERNAME="$(env_value AIRFLOW_ADMIN_USERNAME)" AIRFLOW_PASSWORD="$(env_value AIRFLOW_ADMIN_PASSWORD)"
    traffic() {  # traffic SERVICE: events written on the wall clock from SERVICE's container, for the rest of the run
      compose exec -T -d "$1" tidegate event-log generate /var/tidegate/event-log --create --partitions 4 \
        --clock wall --mode realtime --rate "${TIDEGATE_SMOKE_RATE:-20}" --duration 2h --devices 8
    }
    step traffic traffic airflow-scheduler
    step deploy python3 scripts/compose_smoke.py deploy
    step drill python3 scripts/compose_smoke.py drill
    if control_ha; then
      # the control plane of the region that holds the primary lost at once — its Airflow, its
      # PostgreSQL and its etcd member — then the failover through the other region's Airflow,
      # on the PostgreSQL the quorum promotes
      step idle python3 scripts/compose_smoke.py idle
      patroni_list() { compose exec -T "patroni-$1" patronictl -c /var/lib/postgresql/patroni/patroni.yaml list "${@:2}"; }
      lost=$(patroni_list east -f json | python3 -c 'import json, sys
print(next(m["Member"] for m in json.load(sys.stdin) if m["Role"] == "Leader"))') || die "no Patroni leader"
      if [ "$lost" = east ]; then survivor=west; suffix=""; port=AIRFLOW_WEST_API_PORT
      else survivor=east; suffix="-west"; port=AIRFLOW_API_PORT; fi
      patroni_list "$survivor" >&2
      say "the primary is in $lost: losing $lost's Airflow, PostgreSQL and etcd member"
      step primary-lost compose kill "airflow-api-server$suffix" "airflow-scheduler$suffix" \
        "airflow-dag-processor$suffix" "airflow-triggerer$suffix" "patroni-$lost" "etcd-$lost"
      # east's scheduler wrote the traffic: west's goes on with it
      if [ "$lost" = east ]; then step traffic traffic airflow-scheduler-west; fi
      export AIRFLOW_URL="http://127.0.0.1:$(env_value "$port")"
      step failover python3 scripts/compose_smoke.py failover
      patroni_list "$survivor" >&2 || true
    else
      step failover python3 scripts/compose_smoke.py failover
    fi
    ;;
  *)
    sed -n '2,21p' "$0" >&2
    exit 2 ;;
esac
