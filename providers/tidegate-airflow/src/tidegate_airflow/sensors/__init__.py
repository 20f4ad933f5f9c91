"""Sensors: :mod:`.job_state` (``TidegateWaitSensor``, deferred to ``JobStateTrigger``)."""
