#!/usr/bin/env bash
# Airflow on the embedded defaults, with Tidegate's DAGs and its provider (installed by bootstrap):
#   bash scripts/airflow.sh standalone            # UI at http://localhost:8080 (password in var/airflow)
#   bash scripts/airflow.sh dags test tidegate_deploy -c '{"spec": "jobs/device_fleet.yaml"}'
# Metadata in var/airflow (SQLite); Tidegate's control database in var/control.db.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export AIRFLOW_HOME="${AIRFLOW_HOME:-$PWD/var/airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW_CONN_TIDEGATE_SPARK_EAST="${AIRFLOW_CONN_TIDEGATE_SPARK_EAST:-{\"conn_type\": \"spark\", \"host\": \"local[2]\"\}}"
export AIRFLOW_CONN_TIDEGATE_SPARK_WEST="${AIRFLOW_CONN_TIDEGATE_SPARK_WEST:-{\"conn_type\": \"spark\", \"host\": \"local[2]\"\}}"
export PATH="$PWD/.venv/bin:$PATH" PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
export TIDEGATE_JOBS_DIR="$PWD/jobs"
mkdir -p "$AIRFLOW_HOME"
[ -f "$AIRFLOW_HOME/airflow.db" ] || airflow db migrate >/dev/null
exec airflow "$@"
