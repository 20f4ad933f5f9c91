"""Tools beside the pipeline: they use it (or Spark) but no micro-batch goes through them.

* :mod:`.cluster`: a local Spark standalone cluster and a job driver in a process of its
  own, for tests and benchmarks;
* :mod:`.test_query` (``tidegate query test``) and :mod:`.policy_check`
  (``tidegate query policy-check``): a job spec or a policy over a sample file, on the engine;
* :mod:`.passthrough`: the event log, unchanged, into Parquet (``jobs/passthrough.py``);
* :mod:`.compare`: two outputs row for row;
* :mod:`.workerpath`: Spark's Python workers import the installed pyspark (run at install).

The pipeline never imports them. Nothing is imported here.
"""
