"""Tidegate's page in Airflow's UI: jobs × regions, metrics over time, drills, planned stops
and completeness checks, read from the control database; buttons that trigger the
Tidegate DAGs through Airflow's REST API.

Airflow loads it as the plugin :class:`tidegate_airflow.ui.plugin.TidegatePlugin`, named by the
package's ``airflow.plugins`` entry point; no plugins folder is involved.
"""
