"""The event-time core: policies, watermarks, windows, analytic functions (LAG, LAST,
ISFIRST, one module each in ``analytic_functions``, found by name in its registry; the
mergeable aggregates in ``aggregates`` likewise) and the temporal join as plain functions
over arrays.

Nothing in this package imports pyspark or airflow. Times are ``int64`` microseconds
since the Unix epoch (UTC), the resolution of Spark's ``TIMESTAMP``. Intervals are
half-open, ``[start, end)``, unless a docstring says otherwise.
"""
