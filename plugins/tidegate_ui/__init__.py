"""Tidegate's page in Airflow's UI: jobs × regions, metrics over time, drills, planned stops
and completeness checks, read from the control database; buttons that trigger the
Tidegate DAGs through Airflow's REST API.

Airflow imports every ``.py`` file under its plugins folder as a top-level module named
after the file, so this package's modules are hidden from that scan (``.airflowignore``
here) and loaded as a package by ``plugins/tidegate_ui_plugin.py``.
"""
