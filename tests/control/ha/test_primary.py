"""Which region holds the control database's primary: Patroni's ``synchronous_standby_names``
in each of the forms PostgreSQL accepts, and the embedded SQLite database, which names none.
The replicated cluster's own answer is checked where it runs (tests/control/ha/test_region_loss.py)."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine

from tidegate.control.ha.primary import Primary, primary_of, standby_names
from tidegate.control.ha.topology import REGION_SETTING, Site, patroni_config


@pytest.mark.parametrize(
    ("setting", "names"),
    [
        ('"west"', ("west",)),
        ("west", ("west",)),
        ('FIRST 1 ("west")', ("west",)),
        ('ANY 1 (east, "west")', ("east", "west")),
        ('2 ("a""b", c)', ('a"b', "c")),
        ("*", ()),
        ("", ()),
    ],
)
def test_the_synchronous_standbys_are_read_from_every_form_of_the_setting(setting, names):
    assert standby_names(setting) == names


def test_a_control_database_that_is_not_replicated_names_no_primary_region(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'control.db'}")
    try:
        assert primary_of(engine) == Primary(None)
    finally:
        engine.dispose()


def test_each_regions_postgresql_names_its_region_and_only_its_own(tmp_path):
    sites = [
        Site("east", "10.0.0.11", 2379, 2380, 5432, 8008),
        Site("west", "10.0.0.12", 2379, 2380, 5432, 8008),
        Site("witness", "10.0.0.13", 2379, 2380),
    ]
    passwords = {"postgres": "p", "replicator": "r", "rewinder": "w"}
    configs = {
        s.name: patroni_config(s, sites, data_dir=tmp_path / s.name, bin_dir=tmp_path, passwords=passwords)
        for s in sites[:2]
    }
    assert {name: c["postgresql"]["parameters"][REGION_SETTING] for name, c in configs.items()} == {
        "east": "east",
        "west": "west",
    }
    # not in the settings every member shares through etcd: there one region would name both
    assert REGION_SETTING not in configs["east"]["bootstrap"]["dcs"]["postgresql"]["parameters"]
