"""The control database: jobs, versions, runs, lineages, leases, metrics, estimates,
active regions, checks and procedures — what every part of the platform reads and writes."""
