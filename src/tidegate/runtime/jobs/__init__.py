"""Starting and running jobs: config and regions (:mod:`.config`), where a start reads from
(:mod:`.planning`), the controller (:mod:`.controller`), detached processes (:mod:`.process`),
the streaming driver (:mod:`.driver`), the region supervisor (:mod:`.supervisor`), whether a
driver is alive (:mod:`.liveness`), where a job stands (:mod:`.status`) and what a retried
procedure step takes over rather than refusing (:mod:`.adoption`)."""
