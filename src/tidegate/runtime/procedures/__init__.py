"""What operators do to running jobs (semantics §7–§8), as plain Python the Airflow procedures
call: the planned stop's decision (:mod:`.planned_stop`), failover (:mod:`.failover`) and the
health it acts on (:mod:`.health`), rollback (:mod:`.rollback`), recovery drills
(:mod:`.drills`) and the faults they inject (:mod:`.faults`)."""
