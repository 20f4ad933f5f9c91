"""Triggers that run on the triggerer: :mod:`.job_state` (``JobStateTrigger``)."""
