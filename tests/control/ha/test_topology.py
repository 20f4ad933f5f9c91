"""What each site runs and how clients follow the primary, without starting anything."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine
from sqlalchemy.exc import OperationalError

from tidegate.control.db import ControlDB, _redact
from tidegate.control.ha import reconnect
from tidegate.control.ha.topology import QUICK, Site, Timings, etcd_command, multi_host_url, patroni_config

SITES = [
    Site("east", "10.0.1.5", 2379, 2380, pg_port=5432, api_port=8008),
    Site("west", "10.0.2.5", 2379, 2380, pg_port=5432, api_port=8008),
    Site("witness", "10.0.3.5", 2379, 2380),
]
PASSWORDS = {"postgres": "su", "replicator": "rep", "rewinder": "rew"}


def test_the_multi_host_url_reaches_every_region_and_only_a_writable_server():
    url = multi_host_url(SITES, "tidegate", "tidegate", "p@ss")
    assert url == (
        "postgresql+psycopg://tidegate:p%40ss@/tidegate"
        "?host=10.0.1.5:5432&host=10.0.2.5:5432&target_session_attrs=read-write"
    )
    engine = create_engine(url)
    _, params = engine.dialect.create_connect_args(engine.url)  # what psycopg is given: libpq's multi-host form
    assert (params["host"], params["port"]) == ("10.0.1.5,10.0.2.5", "5432,5432")
    assert params["target_session_attrs"] == "read-write" and params["password"] == "p@ss"
    assert "p@ss" not in _redact(url) and "p%40ss" not in _redact(url)


def test_replication_is_synchronous_and_each_patroni_asks_only_its_own_etcd_member():
    config = patroni_config(SITES[0], SITES, data_dir=Path("/d/pg"), bin_dir=Path("/b"), passwords=PASSWORDS)
    dcs = config["bootstrap"]["dcs"]
    assert dcs["synchronous_mode"] is True and dcs["maximum_lag_on_failover"] == 0
    assert config["etcd3"] == {"hosts": ["10.0.1.5:2379"], "use_proxies": True}
    assert config["postgresql"]["use_pg_rewind"] and config["postgresql"]["parameters"]["wal_log_hints"] == "on"
    assert "host replication replicator 10.0.2.5/32 scram-sha-256" in config["postgresql"]["pg_hba"]
    with pytest.raises(ValueError, match="witness runs etcd only"):
        patroni_config(SITES[2], SITES, data_dir=Path("/d"), bin_dir=Path("/b"), passwords=PASSWORDS)


def test_every_etcd_member_knows_all_three_sites():
    command = etcd_command(SITES[2], SITES, Path("/d/etcd"))
    assert (
        "--initial-cluster=east=http://10.0.1.5:2380,west=http://10.0.2.5:2380,witness=http://10.0.3.5:2380" in command
    )


def test_timings_that_let_a_cut_off_primary_outlive_its_leader_key_are_refused():
    assert QUICK.loop_wait_s + 2 * QUICK.retry_timeout_s <= QUICK.ttl_s
    with pytest.raises(ValueError, match="loop_wait \\+ 2 × retry_timeout at most ttl"):
        Timings(ttl_s=20, loop_wait_s=10, retry_timeout_s=6)


def test_a_ttl_patroni_would_silently_raise_is_refused():
    # Patroni runs ttl 20 s when told less: the promotion window would not be what was written
    with pytest.raises(ValueError, match="below the 20 s Patroni accepts"):
        Timings(ttl_s=8, loop_wait_s=1, retry_timeout_s=3, primary_stop_timeout_s=2)


def test_a_primary_stop_that_outlasts_one_dcs_retry_is_refused():
    # Patroni 3.0 would start a second demotion beside a slow first one (see Timings)
    assert 0 < QUICK.primary_stop_timeout_s < QUICK.retry_timeout_s
    with pytest.raises(ValueError, match="below retry_timeout"):
        Timings(ttl_s=30, loop_wait_s=10, retry_timeout_s=10, primary_stop_timeout_s=10)


@pytest.mark.parametrize(
    "error, transient",
    [
        (psycopg.OperationalError("connection failed: Connection refused"), True),  # no server answers
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),  # lost mid-call
        (psycopg.errors.AdminShutdown("terminating connection due to administrator command"), True),
        (psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"), True),
        (psycopg.errors.QueryCanceled("canceling statement due to statement timeout"), False),  # it answered
        (psycopg.OperationalError('FATAL:  password authentication failed for user "x"'), False),
        (psycopg.errors.UniqueViolation("duplicate key"), False),
    ],
)
def test_only_a_lost_or_not_yet_primary_server_is_worth_waiting_for(error, transient):
    assert reconnect.is_transient(error) is transient


class _Flaky:
    def __init__(self, engine, failures: int) -> None:
        self.engine, self.failures, self.calls = engine, failures, 0

    @reconnect.idempotent
    def read(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise OperationalError("SELECT 1", {}, psycopg.OperationalError("server closed the connection"))
        return "read"


def test_an_idempotent_call_is_run_again_across_a_promotion_but_not_beyond_its_deadline(monkeypatch):
    monkeypatch.setattr(reconnect, "BACKOFF_S", (0.01,))
    engine = create_engine("sqlite://")
    fresh = _Flaky(engine, failures=2)
    with pytest.raises(OperationalError):  # never reached a primary: told at once, not retried
        fresh.read()
    reconnect._reached.add(engine)
    flaky = _Flaky(engine, failures=3)
    assert flaky.read() == "read" and flaky.calls == 4
    stuck = _Flaky(engine, failures=10**6)
    with reconnect.deadline(0.3), pytest.raises(OperationalError):
        stuck.read()
    # tried again (a loaded machine may fit only a few tries in), then given up long before the
    # failures ran out: the deadline, not the flakiness, ended it
    assert 1 < stuck.calls < 10**6


def test_the_embedded_sqlite_control_database_is_opened_as_before(tmp_path):
    db = ControlDB(f"sqlite:///{tmp_path / 'control.db'}")
    assert db.engine.dialect.name == "sqlite"
    assert db.acquire_lease("job:fleet:east", "run-1", ttl_s=15) == 1
    assert db.renew_lease("job:fleet:east", "run-1", ttl_s=15) and db.holds("job:fleet:east", "run-1", 1)
    assert db.engine not in reconnect._reached  # one file, no promotion: nothing waits for a primary
    db.dispose()
