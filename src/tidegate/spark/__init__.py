"""Tidegate on Spark: the session (:mod:`.session`), the pipeline a micro-batch goes through
(:mod:`.pipeline`: source, parse, policy, window, sink, and the engine and runner that drive
them), Kafka/Event Hubs input (:mod:`.kafka`), and the tools beside them (:mod:`.tools`).

Nothing is imported here, so ``import tidegate.spark.X`` costs only what X needs.
"""
