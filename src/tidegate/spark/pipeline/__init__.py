"""What a micro-batch goes through, in order, and what drives it.

1. :mod:`.source` (and :mod:`.java_source`, its reader on the JVM; :mod:`.read` picks one):
   the event log as one offset range per partition, the broker clock recorded with the offsets;
2. :mod:`.parse`: payloads judged or quarantined with their reason (semantics §9);
3. :mod:`.policy_stage`: late, early and out-of-order events, per log partition, by the
   event-time core (:mod:`tidegate.eventtime`); with a percentile watermark,
   :mod:`.percentile_stage` sets aside the kept events behind it;
4. :mod:`.window_stage`: windows closed on the job watermark, each emitted exactly once —
   or :mod:`.analytic_stage`: LAG, LAST and ISFIRST per partition key, each event's row
   emitted once the watermark passes it — or :mod:`.join_stage`: a temporal join of the
   job's two inputs, each row emitted once the watermark passes its time;
5. :mod:`.sink`, through :mod:`.batch_write`: every output staged, fsynced and renamed into
   place inside the fence; the state version committed last.

:mod:`.engine` runs one micro-batch through those stages; :mod:`.runner` runs the engine
under ``foreachBatch`` (the stream) or over the whole log at once (the batch path).

Nothing is imported here, so ``import tidegate.spark.pipeline.X`` costs only what X needs.
"""
