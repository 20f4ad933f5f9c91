"""The event-time core: policies, watermarks, windows, analytic functions (LAG, LAST,
ISFIRST, one module each in ``analytic_functions``, found by name in its registry; the
mergeable aggregates in ``aggregates`` likewise) and the temporal join as plain functions
over arrays.

Nothing in this package imports pyspark or airflow. Times are ``int64`` microseconds
since the Unix epoch (UTC), the resolution of Spark's ``TIMESTAMP``. Windows and
ISFIRST intervals include their end, ``(start, end]``, as Stream Analytics' do, unless
asked for ``[start, end)`` (windows.py); other intervals (input positions, batches) are
``[start, end)``.
"""
