"""Completeness after a recovery (semantics §8): which span to check against what, and the record
(:mod:`.completeness`); the warm service that runs checks with Spark loaded: its folder and
its clients (:mod:`.check_service`), the service itself (:mod:`.check_server`) and the time
limit of each of its requests (:mod:`.request_limit`)."""
