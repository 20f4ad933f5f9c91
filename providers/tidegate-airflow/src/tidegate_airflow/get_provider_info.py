"""What Airflow learns of this provider, by the ``apache_airflow_provider`` entry point.

Airflow's ``ProvidersManager`` calls :func:`get_provider_info` and validates the dict against
``airflow/provider_info.schema.json``: ``package-name`` must be this distribution's name, and
the modules listed are where ``airflow providers hooks|triggers|…`` and the connection form
look. The page (:mod:`tidegate_airflow.ui`) is not listed under ``plugins``: Airflow reads that
list only when ``[core] lazy_discover_providers`` is off, and then registers a plugin the
``airflow.plugins`` entry point already loaded a second time, as an import error; the entry
point alone loads it under every setting. Building the dict imports nothing.
"""

from __future__ import annotations

from typing import Any

INTEGRATION = "Tidegate"
PACKAGE = "tidegate_airflow"


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "tidegate-airflow",
        "name": "Tidegate",
        "description": "Tidegate's event-time streaming jobs driven from Airflow: deploy, restart, planned "
        "stop, failover and drills through the job controller, waits on the triggerer, and the Tidegate page.",
        "versions": [_version()],
        "integrations": [{"integration-name": INTEGRATION, "tags": ["service"]}],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": [f"{PACKAGE}.hooks.tidegate"]}],
        "connection-types": [
            {
                "connection-type": "tidegate",
                "hook-class-name": f"{PACKAGE}.hooks.tidegate.TidegateHook",
                "hook-name": "Tidegate",
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [f"{PACKAGE}.operators.lifecycle", f"{PACKAGE}.operators.spark_submit"],
            }
        ],
        "sensors": [{"integration-name": INTEGRATION, "python-modules": [f"{PACKAGE}.sensors.job_state"]}],
        "triggers": [{"integration-name": INTEGRATION, "python-modules": [f"{PACKAGE}.triggers.job_state"]}],
    }


def _version() -> str:
    """The installed distribution's version (the root project's; pyproject.toml keeps them equal)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tidegate-airflow")
    except PackageNotFoundError:  # imported from a source tree without installing it
        return "unknown"
