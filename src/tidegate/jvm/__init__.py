"""The JVMs Tidegate starts: which java (:mod:`.java`), their options (:mod:`.options`) and
Spark's class archive they map (:mod:`.class_archive`).

The bottom of the house: nothing here imports the rest of Tidegate (only its errors) nor
pyspark, so Spark's sessions, the Kafka broker, the standalone cluster and the Airflow
plugins' spark-submits all take their java and its options from one place.

Nothing is imported here, so ``import tidegate.jvm.X`` costs only what X needs.
"""
