"""The job lifecycle (semantics §6–§8), one subpackage per stage of it:

* :mod:`.jobs` — starting and running jobs: platform config and regions, start planning,
  the controller, the detached drivers and region supervisors, whether a driver is alive,
  and where a job stands;
* :mod:`.estimates` — how long a (re)start takes to catch up: the model, the rehearsal,
  what the rehearsal competed with, and when a job has caught up;
* :mod:`.procedures` — what operators do to running jobs: the planned stop's decision,
  failover and the health it acts on, rollback, recovery drills and the faults they inject;
* :mod:`.checks` — completeness after a recovery, and the warm service that runs checks;
* :mod:`.outputs` — a job's output as consumers see it: the reader, which region they
  read, and upkeep of the files;
* :mod:`.fencing` — at most one driver of a job and region commits.
"""
