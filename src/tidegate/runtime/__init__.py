"""The job lifecycle: platform config and regions, start planning, the controller, drivers,
supervisors and catch-up estimates (semantics §6–§7)."""
