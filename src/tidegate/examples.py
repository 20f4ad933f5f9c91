"""The demo's job: the example of the checkout's ``jobs/`` that commands and forms offer first.

``tidegate demo run`` runs it, the DAG forms and the Airflow page name it as their default, and
the benchmarks measure it. Its spec file owns the name (``name:``); tests/jobspec hold this
module to it. Imports nothing, so that a DAG file may read it at every parse.
"""

DEMO_SPEC = "device_fleet.yaml"  # under jobs/
DEMO_JOB = "device-fleet-counts"  # the name: in DEMO_SPEC
