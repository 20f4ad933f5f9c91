-- The Tidegate page's own PostgreSQL role: it may read the control database and nothing
-- else, so the server refuses its writes whatever its session asks for (the page also
-- opens read-only transactions; this makes the database, not the page, the guard).
--
-- Run once per control database, as a superuser (or the database's owner on PostgreSQL 15
-- and later), before or after Tidegate created its tables; running it again changes nothing:
--
--   TIDEGATE_UI_DB_PASSWORD=… psql -v ON_ERROR_STOP=1 --dbname tidegate \
--       -v ui_role=tidegate_ui -v owner=tidegate -v password_var=TIDEGATE_UI_DB_PASSWORD \
--       -f scripts/tidegate_ui_role.sql
--
--   ui_role       the page's role (created with LOGIN and that password if it does not exist)
--   owner         the role the platform connects as (TIDEGATE_CONTROL_DB): tables it creates
--                 later are readable by ui_role too
--   password_var  the environment variable holding the password (never on a command line)
--
-- Then give the Airflow API server TIDEGATE_UI_DB=postgresql+psycopg://tidegate_ui:…@host/tidegate
\getenv password :password_var
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :'ui_role', :'password')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'ui_role') \gexec
-- a second guard beside the grants: every transaction of the role starts read-only
ALTER ROLE :"ui_role" SET default_transaction_read_only = on;
SELECT format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), :'ui_role') \gexec
GRANT USAGE ON SCHEMA public TO :"ui_role";
GRANT SELECT ON ALL TABLES IN SCHEMA public TO :"ui_role";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA public GRANT SELECT ON TABLES TO :"ui_role";
-- before PostgreSQL 15 every role may create tables in schema public: not this one (the
-- owner keeps that right explicitly). Untested here: the test server is PostgreSQL 15.
SELECT 'REVOKE CREATE ON SCHEMA public FROM PUBLIC'
 WHERE current_setting('server_version_num')::int < 150000 \gexec
SELECT format('GRANT CREATE ON SCHEMA public TO %I', :'owner')
 WHERE current_setting('server_version_num')::int < 150000 \gexec
