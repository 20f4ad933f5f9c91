"""A local Spark standalone cluster (:mod:`.standalone`) and a Tidegate job run as its
client-mode driver in a process of its own (:mod:`.job`), for tests and benchmarks.

Nothing is imported here.
"""
