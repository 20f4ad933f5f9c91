"""The Spark settings no job spec, region or caller may change: spec text is untrusted.

Spec expressions are written by job authors and run inside the platform's Spark sessions
(docs/concepts/threat-model.md). With these settings Spark never rewrites ``${env:…}``,
``${system:…}`` or ``${spark.…}`` inside SQL text before parsing it, and never reads a
path named as a table (``SELECT * FROM parquet.`/etc/…```). Every session
(:func:`tidegate.spark.session.build_session`), every spark-submit the Airflow plugins build,
and the standalone cluster's drivers get them, applied last. Imports nothing, so the
plugins take it without pyspark.
"""

from __future__ import annotations

LOCKED_SQL_CONF: dict[str, str] = {
    "spark.sql.variable.substitute": "false",
    "spark.sql.runSQLOnFiles": "false",
}
