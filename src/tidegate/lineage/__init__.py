"""A lineage: one Spark checkpoint and the outputs written under it, as files on disk.

The engine writes a lineage and the runtime reads it back — to plan the next start, to
hand over to a successor, to serve consumers — so both go through this package, which
imports neither pyspark nor airflow:

* :mod:`.layout` — where every file of a lineage lives, and how its folders are named;
* :mod:`.offsets` — the input positions Spark's offset log records for each micro-batch;
* :mod:`.committed` — what the lineage has committed: state versions, visible batches, and
  the files a reader of a span reads;
* :mod:`.compaction` — an hour's batch folders merged into one file, switched to atomically;
* :mod:`.final` — how far its output is final ("final through"), the cut a successor
  takes over from;
* :mod:`.fence` — the fence every commit into it passes: only the driver holding the
  lineage's lease under the highest epoch commits.

Nothing is imported here, so ``import tidegate.lineage.X`` costs only what X needs.
"""
