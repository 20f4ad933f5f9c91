"""How long a (re)started job takes to catch up (semantics §6): the model (:mod:`.estimate`), the
rehearsal (:mod:`.rehearsal`) corrected by what it competed with (:mod:`.contention`), and
the one rule for when a job has caught up (:mod:`.caught_up`)."""
