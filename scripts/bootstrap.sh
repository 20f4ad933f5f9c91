#!/usr/bin/env bash
# Creates .venv/ (Python 3.11) and installs Tidegate with the pinned, tested dependency set.
# Idempotent: re-installs only when a pyproject.toml (the root's, the provider's) or the constraints change.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      PYTHON="$candidate"; break
    fi
  done
fi
if [ -z "$PYTHON" ]; then
  echo "bootstrap: Python 3.11 not found — install it (apt-get install python3.11 python3.11-venv) or set PYTHON=/path/to/python3.11" >&2
  exit 2
fi
if ! command -v java >/dev/null 2>&1; then
  echo "bootstrap: java not found — Spark needs Java 17: apt-get install openjdk-17-jdk-headless" >&2
  exit 2
fi

stamp=.venv/.tidegate-installed
# the provider's pyproject.toml too: its entry points are written when it is installed
want=$(cat pyproject.toml requirements/constraints.txt providers/tidegate-airflow/pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/tidegate ]; then
  .venv/bin/python -m tidegate.spark.tools.workerpath 2>/dev/null  # idempotent; older .venv/ may lack it
  bash scripts/jvm_deps.sh  # Kafka's jars: offline and silent once fetched
  .venv/bin/python -m tidegate.spark.pipeline.java_source >/dev/null || true  # idempotent; says why if it cannot
  .venv/bin/python -m tidegate.spark.class_archive >/dev/null || true  # rebuilt after a JDK or pyspark change
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $PYTHON" >&2
  "$PYTHON" -m venv .venv
fi
echo "bootstrap: installing Tidegate and its pinned dependencies into .venv (first time: a few minutes)" >&2
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -c requirements/constraints.txt -e '.[test]'
# Tidegate's Airflow provider (entry points apache_airflow_provider and airflow.plugins), editable;
# its dependencies are the ones above, and it builds with the pinned setuptools in .venv: no index
.venv/bin/python -m pip install --quiet -r docker/build-requirements.txt
.venv/bin/python -m pip install --quiet --no-deps --no-build-isolation -e providers/tidegate-airflow
# the build leaves metadata beside the sources, which are on the import path: Airflow would find the
# package twice and register its plugin twice (the installed metadata is in .venv)
rm -rf providers/tidegate-airflow/src/tidegate_airflow.egg-info
# Spark's Python workers: import the installed pyspark, not its zip copy (~1 s per worker start)
.venv/bin/python -m tidegate.spark.tools.workerpath
# Kafka: the broker and Spark's connector, pinned in maven/*/pom.xml, fetched by Maven into var/jvm/
bash scripts/jvm_deps.sh
# the JVM reader of the event log, and of Kafka with the jars above (needs javac); without it
# jobs read through the Python source
.venv/bin/python -m tidegate.spark.pipeline.java_source >/dev/null || true
# Spark's classes parsed and verified once, mapped by every JVM after (~40 s, once): a JVM's
# start takes about half the time; without it JVMs start as before
echo "bootstrap: building Spark's class archive (.venv/share/tidegate)" >&2
.venv/bin/python -m tidegate.spark.class_archive >/dev/null || true
echo "$want" > "$stamp"
