#!/usr/bin/env bash
# The compose stack's one-shot initialisation (service airflow-init), run on every
# `docker compose up`; idempotent. Every other Airflow service and both driver hosts wait
# for it to finish successfully.
#   1. Airflow's metadata database: `airflow db migrate`
#   2. the admin user from .env (AIRFLOW_ADMIN_USERNAME / AIRFLOW_ADMIN_PASSWORD): the
#      Simple auth manager takes its users from [core] simple_auth_manager_users and their
#      passwords from the JSON file [core] simple_auth_manager_passwords_file, written here
#      (on the airflow-auth volume, readable by the tidegate user only)
#   3. Tidegate's control database: its tables, created once here so the two region
#      supervisors do not race to create them
set -euo pipefail

for var in AIRFLOW_ADMIN_USERNAME AIRFLOW_ADMIN_PASSWORD AIRFLOW__CORE__FERNET_KEY \
           AIRFLOW__API_AUTH__JWT_SECRET AIRFLOW__API__SECRET_KEY AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE; do
  value="${!var:-}"
  if [ -z "$value" ] || [ "$value" = "CHANGE_ME" ]; then
    echo "airflow-init: $var is not set (or still CHANGE_ME): set it in .env (see .env.example)" >&2
    exit 2
  fi
done

echo "airflow-init: migrating Airflow's metadata database"
airflow db migrate

echo "airflow-init: admin user ${AIRFLOW_ADMIN_USERNAME}"
python - <<'PY'
import json
import os

path = os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
os.makedirs(os.path.dirname(path), exist_ok=True)
tmp = path + ".tmp"
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    f.write(json.dumps({os.environ["AIRFLOW_ADMIN_USERNAME"]: os.environ["AIRFLOW_ADMIN_PASSWORD"]}) + "\n")
os.replace(tmp, path)
PY

echo "airflow-init: Tidegate's control database"
python - <<'PY'
from tidegate.control.db import ControlDB, _redact
from tidegate.runtime.jobs.config import load_config

config = load_config()
ControlDB(config.control_db).dispose()
regions = ", ".join(f"{r.name} ({r.spark_master}, {r.launcher}, {r.storage})" for r in config.regions.values())
print(f"airflow-init: control database {_redact(config.control_db)} ready; regions {regions}")
PY

airflow version
