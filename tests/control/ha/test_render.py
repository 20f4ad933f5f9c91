"""The command line that writes a site's files from the topology (the compose profile's
containers run it): sites parsed, passwords from the environment, the topology's output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidegate.control.ha.render import RenderError, main, parse_site, parse_sites
from tidegate.control.ha.topology import Site, etcd_command, patroni_config

SITES = ["--site", "east:10.0.1.5", "--site", "west:10.0.2.5", "--site", "witness::10.0.3.5"]
PASSWORDS = {
    "PATRONI_SUPERUSER_PASSWORD": "su",
    "PATRONI_REPLICATION_PASSWORD": "rep",
    "PATRONI_REWIND_PASSWORD": "rew",
}


@pytest.mark.parametrize(
    "text, site",
    [
        # a region whose etcd member runs on its own host
        ("east:10.0.1.5", Site("east", "10.0.1.5", 2379, 2380, pg_port=5432, api_port=8008)),
        # a region in containers: PostgreSQL and etcd each on a name of its own
        (
            "east:patroni-east:etcd-east",
            Site("east", "patroni-east", 2379, 2380, pg_port=5432, api_port=8008, etcd_host="etcd-east"),
        ),
        # the witness: etcd only
        ("witness::10.0.3.5", Site("witness", "10.0.3.5", 2379, 2380)),
    ],
)
def test_a_site_is_name_postgres_host_and_etcd_host(text, site):
    assert parse_site(text) == site


@pytest.mark.parametrize("text", ["east", "east:", ":10.0.1.5", "east:a:b:c"])
def test_a_site_without_a_name_or_a_host_is_refused(text):
    with pytest.raises(RenderError, match="NAME:PG_HOST"):
        parse_site(text)


def test_the_cluster_is_two_regions_and_a_witness():
    with pytest.raises(RenderError, match="two regions and a witness"):
        parse_sites(["east:10.0.1.5", "west:10.0.2.5"])


def test_patronis_settings_are_the_topologys(tmp_path):
    out = tmp_path / "patroni.yaml"
    argv = ["patroni", "west", *SITES, "--data-dir", "/d/pg", "--bin-dir", "/b", "--client-network", "10.0.0.0/16"]
    assert main([*argv, "--out", str(out)], env=PASSWORDS) == 0
    sites = parse_sites(["east:10.0.1.5", "west:10.0.2.5", "witness::10.0.3.5"])
    assert json.loads(out.read_text()) == patroni_config(
        sites[1],
        sites,
        data_dir=Path("/d/pg"),
        bin_dir=Path("/b"),
        passwords={"postgres": "su", "replicator": "rep", "rewinder": "rew"},
        client_networks=("10.0.0.0/16",),
    )
    assert out.stat().st_mode & 0o077 == 0


def test_patroni_without_its_users_passwords_writes_nothing(tmp_path, capsys):
    out = tmp_path / "patroni.yaml"
    argv = ["patroni", "east", *SITES, "--data-dir", "/d", "--bin-dir", "/b", "--out", str(out)]
    assert main(argv, env={"PATRONI_SUPERUSER_PASSWORD": "su"}) == 2
    assert "PATRONI_REPLICATION_PASSWORD, PATRONI_REWIND_PASSWORD not set" in capsys.readouterr().err
    assert not out.exists()


def test_an_etcd_member_named_by_address_binds_it_and_by_name_binds_every_interface(capsys):
    assert main(["etcd", "witness", *SITES, "--data-dir", "/e"]) == 0
    sites = parse_sites(["east:10.0.1.5", "west:10.0.2.5", "witness::10.0.3.5"])
    printed = json.loads(capsys.readouterr().out)
    assert printed == etcd_command(sites[2], sites, Path("/e"))
    assert "--listen-peer-urls=http://10.0.3.5:2380" in printed
    named = parse_sites(["east:patroni-east:etcd-east", "west:patroni-west:etcd-west", "witness::etcd-witness"])
    command = etcd_command(named[0], named, Path("/e"))
    assert "--listen-client-urls=http://0.0.0.0:2379" in command
    assert "--advertise-client-urls=http://etcd-east:2379" in command
