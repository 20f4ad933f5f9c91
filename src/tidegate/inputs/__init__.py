"""What a job reads: partitioned logs of events, whichever kind they are.

* :mod:`.log` — the interface every log answers (:class:`~.log.PartitionedLog`: offsets,
  arrival times, a clock, reads of a range), where a job's input is, and the registry of
  kinds (:data:`~.log.KINDS`) that opens a log by its location;
* :mod:`.log_set` — the logs of a job whose inputs read their own, end to end as one;
* :mod:`.planning` — where a read starts and ends and where each micro-batch ends;
* :mod:`.event_log` — the embedded event log, on local disk;
* :mod:`.kafka` — a Kafka topic read as a partitioned log, and a local broker.

Nothing here imports pyspark: the controller plans every kind of input without a JVM.
Reading a log in Spark is the pipeline's (:mod:`tidegate.spark.pipeline.source`,
:mod:`tidegate.spark.pipeline.java_source`, :mod:`tidegate.spark.kafka`).

Nothing is imported here, so ``import tidegate.inputs.X`` costs only what X needs.
"""
