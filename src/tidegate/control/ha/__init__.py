"""The control database in both regions: PostgreSQL with a synchronous standby, run by
Patroni over a three-member etcd (east, west and a witness site).

``topology`` builds each site's commands and configuration (pure functions: what a host
runs); ``cluster`` starts them as local processes for tests, benches and trying it out;
``reconnect`` is how every client rides out a promotion. Why Patroni, and what is
guaranteed: docs/decisions/0015-control-database-across-regions-with-patroni.md.
"""
