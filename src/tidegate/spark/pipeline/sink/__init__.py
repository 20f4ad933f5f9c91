"""Where a micro-batch's results land: outputs, side outputs, state versions, metrics.

What the sink promises (docs/concepts/reliability.md says the same):

* **All or nothing per folder.** Rows are written into a hidden staging folder
  (``.tmp-…``: Spark's and DuckDB's file listings skip names starting with a dot, so a
  reader never meets a half-written batch or a left-over of a crash), split by the hour of
  their event time, and each hour's part is made visible by one ``rename`` to
  ``date=D/hour=H/batch-N`` (:mod:`tidegate.lineage.layout`). Staging left by a crash is
  removed when the next driver of the lineage starts (:func:`.files.clear_partial_writes`).
* **Durable before acknowledged.** Every file of a folder, the folder and its parent are
  fsynced before the batch returns to Spark, so by the time Spark records the batch as
  committed its rows survive a power cut. (Spark's own checkpoint files are not synced
  by Spark; if one is lost, the batch runs again and rewrites the same bytes.)
* **Fenced.** Each rename runs inside the lineage fence (:mod:`tidegate.lineage.fence`):
  a driver that lost its lease commits nothing.
* **Exactly once.** A batch re-run after a crash finds its folders already visible and
  leaves them as they are (same input, same state, same bytes); one already merged by
  compaction writes nothing.

:mod:`.files` keeps those promises for every folder and file a batch writes — on an object
store through :mod:`.objects`, where a commit record created once replaces the rename
(:mod:`tidegate.lineage.commits`); :mod:`.state`
holds the versioned engine state written through them; :mod:`.metrics` is what a batch
reports (:class:`~.metrics.BatchReport`), read back from what it wrote.

Nothing is imported here.
"""
