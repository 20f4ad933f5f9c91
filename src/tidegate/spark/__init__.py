"""Tidegate on Spark: the session (:mod:`.session`), the ``tidegate`` source (:mod:`.source`),
Kafka/Event Hubs input (:mod:`.kafka`), the engine and the jobs built on them.

Nothing is imported here, so ``import tidegate.spark.X`` costs only what X needs.
"""
