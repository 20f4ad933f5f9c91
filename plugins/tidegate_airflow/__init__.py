"""Tidegate operators, sensors, triggers and hooks for Airflow 3 (the Airflow side only)."""
