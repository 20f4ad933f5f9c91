#!/usr/bin/env bash
# PostgreSQL init script of the compose stack, mounted into /docker-entrypoint-initdb.d/:
# the postgres image runs it once, on an empty data directory, as the superuser.
#
# One server, two databases, each owned by its own login role:
#   airflow   Airflow's metadata database  (AIRFLOW_DB_PASSWORD)
#   tidegate  Tidegate's control database  (TIDEGATE_DB_PASSWORD)
# Neither role can connect to the other's database. Idempotent: existing roles and
# databases are left as they are (their passwords too — change those with ALTER ROLE).
set -euo pipefail

for var in AIRFLOW_DB_PASSWORD TIDEGATE_DB_PASSWORD; do
  value="${!var:-}"
  if [ -z "$value" ] || [ "$value" = "CHANGE_ME" ]; then
    echo "init-databases: $var is not set (or still CHANGE_ME): set it in .env (see .env.example)" >&2
    exit 2
  fi
done

create_database() {  # role, name of the variable holding its password, database
  # the password is read from the environment inside psql (\getenv), never put on a command line
  psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" \
       --dbname "${POSTGRES_DB:-${POSTGRES_USER:-postgres}}" \
       -v role="$1" -v db="$3" -v password_var="$2" <<'SQL'
\getenv password :password_var
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :'role', :'password')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', :'db') \gexec
SELECT format('GRANT ALL ON DATABASE %I TO %I', :'db', :'role') \gexec
SQL
  echo "init-databases: database $3 owned by role $1"
}

create_database airflow AIRFLOW_DB_PASSWORD airflow
create_database tidegate TIDEGATE_DB_PASSWORD tidegate
