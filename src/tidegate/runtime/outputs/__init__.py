"""A job's output as consumers see it: every lineage over its span (:mod:`.reader`), which
region consumers read (:mod:`.consumers`), and upkeep of a job's files — compaction and
retention (:mod:`.upkeep`)."""
