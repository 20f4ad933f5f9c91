"""Tidegate's Airflow provider: the hook (the one door to the controller), its operators, the
deferrable sensor and trigger that wait for a job, the procedures the DAGs call, and the
Tidegate page (:mod:`tidegate_airflow.ui`), an Airflow plugin.

Airflow finds it by the package's entry points: ``apache_airflow_provider`` (the provider's
metadata, :func:`tidegate_airflow.get_provider_info.get_provider_info`) and ``airflow.plugins``
(the page). Importing it loads nothing of Tidegate: the DAG processor imports these modules at
every parse, and each import of ``tidegate`` is inside the function that needs it.
"""
