"""The control-ha profile (docker-compose.yaml's x-control-ha, docker-compose.control-ha.yaml,
docker/patroni/) held to the default stack and to tidegate.control.ha.topology — statically,
through the compose validator, as tests/deploy/test_compose.py does.

The default stack starts none of the profile's services; the profile adds exactly the three
etcd members and the two regions' Patroni; each Patroni asks its own region's member only;
what the containers run is what topology.py makes (the entry point is run here with stand-ins
for patroni and etcd); and every Tidegate and Airflow container opens the multi-host URL.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
import yaml
from compose_model import (
    COMPOSE_FILE,
    ENV_EXAMPLE,
    REPO,
    Dockerfile,
    Stack,
    active,
    commented_defaults,
    read_env_file,
    references,
)
from test_compose import _validator

from tidegate.control.ha.render import PASSWORD_VARIABLES, parse_sites
from tidegate.control.ha.topology import etcd_command, multi_host_url, patroni_config
from tidegate.runtime.jobs.config import load_config

PROFILE = "control-ha"
OVERRIDE = REPO / "docker-compose.control-ha.yaml"
PATRONI_DIR = REPO / "docker" / "patroni"
ENTRY_POINT = PATRONI_DIR / "control-ha.sh"
REGIONS = ("east", "west")
ETCD_MEMBERS = {"etcd-east", "etcd-west", "etcd-witness"}
PATRONIS = {"patroni-east", "patroni-west"}
# west's own Airflow, beside east's (the default stack's)
WEST_AIRFLOW = {f"airflow-{c}-west" for c in ("api-server", "scheduler", "dag-processor", "triggerer")}
# Patroni's own users: required by the override file, documented (commented) in .env.example
HA_SECRETS = {
    "PATRONI_REPLICATION_PASSWORD": "CONTROL_HA_REPLICATION_PASSWORD",
    "PATRONI_REWIND_PASSWORD": "CONTROL_HA_REWIND_PASSWORD",
}


def _env_file(tmp_path_factory) -> Path:
    """.env.example with the profile's two secrets set, as .env would have them."""
    path = tmp_path_factory.mktemp("env") / "env"
    values = {**read_env_file(ENV_EXAMPLE), **{v: "CHANGE_ME" for v in HA_SECRETS.values()}}
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


def _resolved(*args: str, env_file: Path = ENV_EXAMPLE, override: bool = False) -> dict:
    """The validator's resolved configuration, reduced to the services `up` would start."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    files = ["-f", str(COMPOSE_FILE)] + (["-f", str(OVERRIDE)] if override else [])
    done = subprocess.run(
        [*_validator(), "--project-directory", str(REPO), "--env-file", str(env_file), *files, *args, "config"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)
    profiles = frozenset(args[i + 1] for i, a in enumerate(args) if a == "--profile")
    resolved["services"] = {n: s for n, s in resolved["services"].items() if active(s, profiles)}
    return resolved


@pytest.fixture(scope="module")
def default() -> dict:
    return _resolved()


@pytest.fixture(scope="module")
def with_profile(tmp_path_factory) -> dict:
    return _resolved("--profile", PROFILE, env_file=_env_file(tmp_path_factory), override=True)


@pytest.fixture(scope="module")
def sites(with_profile):
    values = {
        s["environment"]["CONTROL_HA_SITES"]
        for n, s in with_profile["services"].items()
        if n in ETCD_MEMBERS | PATRONIS
    }
    assert len(values) == 1, f"the profile's services name different sites: {values}"
    return parse_sites(values.pop().split(), hba_address="samenet")


def _env(service: dict) -> dict[str, str]:
    return {k: str(v) for k, v in (service.get("environment") or {}).items()}


def _volume(service: dict) -> tuple[str, str]:
    """(volume, mount point) of the service's one named volume (v1 resolves mounts as text)."""
    mounts = [
        (v["source"], v["target"]) if isinstance(v, dict) else tuple(v.split(":")[:2])
        for v in service.get("volumes") or []
        if (v.get("type") == "volume" if isinstance(v, dict) else not v.startswith((".", "/")))
    ]
    assert len(mounts) == 1, mounts
    return mounts[0]


# -- which services ------------------------------------------------------------------------------


def test_the_default_stack_has_none_of_the_profiles_services(default):
    assert not (ETCD_MEMBERS | PATRONIS) & set(default["services"])
    assert set(default["services"]) == set(Stack().services)
    for name, svc in default["services"].items():
        assert "patroni" not in _env(svc).get("TIDEGATE_CONTROL_DB", ""), name
        assert not {"patroni-east", "patroni-west"} & set(svc.get("depends_on") or {}), name


def test_the_profile_adds_exactly_the_etcd_members_the_regions_patroni_and_wests_airflow(default, with_profile):
    added = set(with_profile["services"]) - set(default["services"])
    assert added == ETCD_MEMBERS | PATRONIS | WEST_AIRFLOW
    data = set()
    for name in added - WEST_AIRFLOW:
        svc = with_profile["services"][name]
        assert svc["profiles"] == [PROFILE], name
        assert svc["image"].startswith("tidegate-patroni:"), name
        assert Path(REPO, svc["build"]["context"], svc["build"]["dockerfile"]).resolve() == PATRONI_DIR / "Dockerfile"
        assert svc["hostname"] == name, f"{name}: the name its site is known by"
        assert svc["healthcheck"]["test"], name
        source, target = _volume(svc)
        data.add(source)
        kind, site = name.split("-", 1)
        assert svc["command"] == [kind, site], name
        if kind == "patroni":
            assert target == "/var/lib/postgresql/patroni", name
            assert {"5432", "8008"} <= {str(p) for p in svc["expose"]}, name
        else:
            assert target == "/var/lib/etcd", name
            assert {"2379", "2380"} <= {str(p) for p in svc["expose"]}, name
    assert len(data) == len(ETCD_MEMBERS | PATRONIS), f"each its own volume: {sorted(data)}"


def test_each_patroni_talks_only_to_its_own_regions_etcd_member(with_profile, sites):
    for region in REGIONS:
        svc = with_profile["services"][f"patroni-{region}"]
        assert set(svc["depends_on"]) == {f"etcd-{region}"}, "waits for its own member only"
        site = next(s for s in sites if s.name == region)
        config = patroni_config(
            site, sites, data_dir=Path("/d"), bin_dir=Path("/b"), passwords=dict.fromkeys(PASSWORD_VARIABLES, "x")
        )
        assert config["etcd3"] == {"hosts": [f"etcd-{region}:2379"], "use_proxies": True}
    assert {s.name for s in sites} == {"east", "west", "witness"}
    assert [s.name for s in sites if s.is_witness] == ["witness"]


# -- what the containers run: topology.py's settings ------------------------------------------------


def _run_entry_point(tmp_path: Path, env: dict[str, str], *args: str) -> Path:
    """docker/patroni/control-ha.sh with stand-ins: `patroni` and `etcd` record their command
    line, `psql` reports both databases there, `id` a non-root user."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    recorder = f"#!/bin/sh\n{sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \"$@\" > {record}\n"
    stand_ins = {
        "patroni": recorder,
        "etcd": recorder,
        "psql": "#!/bin/sh\necho 2\n",
        "id": "#!/bin/sh\necho 1000\n",
        "python3": f'#!/bin/sh\nexec {sys.executable} "$@"\n',
    }
    for name, text in stand_ins.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    full = {
        **env,
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PYTHONPATH": str(REPO / "src"),
        "PATRONI_HOME": str(tmp_path / "patroni"),
    }
    (tmp_path / "patroni").mkdir()
    done = subprocess.run(["bash", str(ENTRY_POINT), *args], env=full, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return record


@pytest.mark.parametrize("region", REGIONS)
def test_patronis_settings_are_what_topology_makes(with_profile, sites, region, tmp_path):
    svc = with_profile["services"][f"patroni-{region}"]
    env = _env(svc)
    record = _run_entry_point(tmp_path, env, *svc["command"])
    home = tmp_path / "patroni"
    assert json.loads(record.read_text()) == [str(home / "patroni.yaml")]
    assert (home / "patroni.yaml").stat().st_mode & 0o077 == 0, "it holds the passwords"
    written = yaml.safe_load((home / "patroni.yaml").read_text())
    expected = patroni_config(
        next(s for s in sites if s.name == region),
        sites,
        data_dir=home / "data",
        bin_dir=Path("/usr/lib/postgresql/15/bin"),
        passwords={user: env[var] for user, var in PASSWORD_VARIABLES.items()},
        socket_dir=Path("/var/run/postgresql"),
        client_networks=("samenet",),
    )
    assert written == expected
    dcs = written["bootstrap"]["dcs"]
    assert dcs["synchronous_mode"] is True and dcs["postgresql"]["use_pg_rewind"] is True
    raw = Stack(profiles=frozenset({PROFILE})).raw_services[f"patroni-{region}"].env
    assert references(raw["PATRONI_SUPERUSER_PASSWORD"])[0].name == "POSTGRES_PASSWORD", "the single server's superuser"
    # the entry point's default home is the volume's mount point
    default_home = re.search(r'PATRONI_HOME="\$\{PATRONI_HOME:-([^}]+)\}"', ENTRY_POINT.read_text()).group(1)
    assert default_home == _volume(svc)[1]


@pytest.mark.parametrize("member", sorted(ETCD_MEMBERS))
def test_etcd_members_run_what_topology_makes(with_profile, sites, member, tmp_path):
    svc = with_profile["services"][member]
    record = _run_entry_point(tmp_path, _env(svc), *svc["command"])
    site = next(s for s in sites if s.name == svc["command"][1])
    argv = json.loads(record.read_text())
    assert ["etcd", *argv] == etcd_command(site, sites, Path("/var/lib/etcd") / site.name)
    assert "--pre-vote=true" in argv and f"--advertise-client-urls=http://{member}:2379" in argv
    assert "--listen-peer-urls=http://0.0.0.0:2380" in argv, "etcd binds to addresses, not names"
    cluster = next(a for a in argv if a.startswith("--initial-cluster="))
    assert cluster.count("=http://etcd-") == 3
    assert member in svc["healthcheck"]["test"][2], "the health check asks this member"


def test_the_entry_point_refuses_to_start_patroni_without_its_users_passwords(with_profile, tmp_path):
    svc = with_profile["services"]["patroni-east"]
    env = {k: v for k, v in _env(svc).items() if k not in HA_SECRETS}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n")
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    full = {**env, "PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(REPO / "src"), "PATRONI_HOME": str(tmp_path)}
    done = subprocess.run(["bash", str(ENTRY_POINT), "patroni", "east"], env=full, capture_output=True, text=True)
    assert done.returncode == 2
    assert "PATRONI_REPLICATION_PASSWORD" in done.stderr and "docker-compose.control-ha.yaml" in done.stderr
    assert not (tmp_path / "patroni.yaml").exists()


# -- the clients: the multi-host URL --------------------------------------------------------------


def test_west_runs_an_airflow_of_its_own_that_reports_to_its_own_api_server(with_profile):
    """The same four services as east's, on the same image, volumes, health checks and
    databases; only their names, and the execution API their task processes, triggers and
    callbacks report to, are west's. Its api-server is published on a port of its own."""
    services = with_profile["services"]
    for name in WEST_AIRFLOW:
        west, east = services[name], services[name.removesuffix("-west")]
        assert west["profiles"] == [PROFILE] and west["hostname"] == name
        for key in ("image", "command", "volumes", "healthcheck", "depends_on", "working_dir", "ulimits", "init"):
            assert west.get(key) == east.get(key), f"{name}: {key} differs from east's"
        theirs, ours = _env(east), _env(west)
        assert ours.pop("AIRFLOW__CORE__EXECUTION_API_SERVER_URL") == "http://airflow-api-server-west:8080/execution/"
        assert theirs.pop("AIRFLOW__CORE__EXECUTION_API_SERVER_URL") == "http://airflow-api-server:8080/execution/"
        assert ours == theirs, name
    east_port, west_port = (
        {str(p["published"]) if isinstance(p, dict) else p.split(":")[-2] for p in services[n]["ports"]}
        for n in ("airflow-api-server", "airflow-api-server-west")
    )
    assert west_port == {commented_defaults(ENV_EXAMPLE)["AIRFLOW_WEST_API_PORT"]} and east_port != west_port


def test_every_tidegate_and_airflow_service_opens_the_multi_host_url(with_profile, sites):
    stack = Stack(profiles=frozenset({PROFILE}))
    clients = {s.name for s in stack.tidegate_services}
    assert clients == {n for n, s in stack.services.items() if "TIDEGATE_CONTROL_DB" in s.env}
    password = read_env_file(ENV_EXAMPLE)
    control = multi_host_url(sites, "tidegate", "tidegate", password["TIDEGATE_DB_PASSWORD"])
    airflow = multi_host_url(sites, "airflow", "airflow", password["AIRFLOW_DB_PASSWORD"])
    assert "host=patroni-east:5432&host=patroni-west:5432&target_session_attrs=read-write" in control
    for name in clients:
        svc = with_profile["services"][name]
        env = _env(svc)
        assert env["TIDEGATE_CONTROL_DB"] == control, name
        assert load_config(env, cwd=Path(svc["working_dir"])).control_db == control, name
        if stack.services[name].component == "airflow":
            for key in ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"):
                assert env[key] == airflow, f"{name} {key}"
        if stack.services[name].component in ("airflow", "drivers"):
            deps = svc["depends_on"]
            for patroni in PATRONIS:
                assert deps[patroni]["condition"] == "service_healthy", f"{name} waits for {patroni}"
        # everything else as in the default stack
        others = {k: v for k, v in env.items() if "DATABASE__SQL_ALCHEMY" not in k and k != "TIDEGATE_CONTROL_DB"}
        assert others == {k: v for k, v in stack.services[name].env.items() if k in others}, name
    overridden = set(yaml.safe_load(OVERRIDE.read_text())["services"])
    assert overridden == clients | PATRONIS, "the override touches the clients and Patroni's passwords, nothing else"


def test_the_profiles_secrets_are_required_and_documented(tmp_path):
    raw = yaml.safe_load(OVERRIDE.read_text())
    documented = commented_defaults(ENV_EXAMPLE)
    for region in REGIONS:
        env = raw["services"][f"patroni-{region}"]["environment"]
        for ours, theirs in HA_SECRETS.items():
            assert re.fullmatch(r"\$\{[A-Z0-9_]+:\?[^}]*\}", env[ours]) and references(env[ours])[0].name == theirs
            assert documented.get(theirs) == "CHANGE_ME", f".env.example: document # {theirs}=CHANGE_ME"
    assert documented["COMPOSE_FILE"] == "docker-compose.yaml:docker-compose.control-ha.yaml"
    assert documented["COMPOSE_PROFILES"] == PROFILE
    smoke = tmp_path / "smoke.env"
    subprocess.run([sys.executable, str(REPO / "scripts" / "compose_smoke.py"), "env", str(smoke), "0"], check=True)
    written = read_env_file(smoke)
    assert all(len(written.get(theirs, "")) >= 24 for theirs in HA_SECRETS.values()), "the smoke's env file sets them"
    # and nothing literal in the URLs: the passwords are the default stack's .env values
    for value in (v for svc in raw["services"].values() for v in (svc.get("environment") or {}).values()):
        for m in re.finditer(r"://[^:/@]+:(?P<password>[^@]+)@", value):
            assert re.fullmatch(r"\$\{[A-Z0-9_]+:\?[^}]*\}", m.group("password")), value


# -- the image ------------------------------------------------------------------------------------


def test_the_image_is_debians_postgresql_and_etcd_the_pinned_patroni_and_the_topology_module():
    dockerfile = Dockerfile(PATRONI_DIR / "Dockerfile")
    assert dockerfile.args["PATRONI_IMAGE"] == "debian:bookworm-slim"
    assert commented_defaults(ENV_EXAMPLE)["PATRONI_IMAGE"] == "debian:bookworm-slim"
    stack = Stack(profiles=frozenset({PROFILE}))
    for name in ETCD_MEMBERS | PATRONIS:
        arg = stack.raw_services[name].spec["build"]["args"]["PATRONI_IMAGE"]
        assert references(arg)[0].arg == dockerfile.args["PATRONI_IMAGE"], name
    (install,) = [c for run in dockerfile.all("RUN") for c in run.split("&&") if "apt-get install" in c]
    assert "--no-install-recommends" in install
    assert {"postgresql-15", "python3-venv", "etcd-server", "etcd-client"} <= set(install.split())
    assert "patroni" not in install.split(), "Debian's Patroni 3.0.2 may take the leader key back after a partition"
    # Patroni from the pins the tests run (tools/patroni/requirements.txt), held to the project's constraints
    (pip,) = [c for run in dockerfile.all("RUN") for c in run.split("&&") if "pip install" in c]
    assert "-r /opt/patroni-requirements/requirements.txt" in pip
    assert "-c /opt/patroni-requirements/constraints.txt" in pip
    # behind a TLS-inspecting proxy, pip trusts its CA through the build secret, never a layer
    assert all("--mount=type=secret,id=pip-ca" in run for run in dockerfile.all("RUN") if "pip install" in run)
    copied = {src for sources in dockerfile.copies.values() for src in sources}
    assert {"src/tidegate/control/ha/topology.py", "src/tidegate/control/ha/render.py"} <= copied
    assert "docker/postgres/init-databases.sh" in copied, "the single server's roles and databases, not a copy"
    assert {"tools/patroni/requirements.txt", "requirements/constraints.txt"} <= copied
    # the build context is the repository's root: the ignore file lets in what is copied, nothing else
    kept = {line[1:] for line in (PATRONI_DIR / "Dockerfile.dockerignore").read_text().split() if line.startswith("!")}
    assert kept == copied
    assert dockerfile.all("ENTRYPOINT") == ['["tidegate-control-ha"]']
    assert os.access(ENTRY_POINT, os.X_OK)
    script = (REPO / "scripts" / "compose.sh").read_text()
    assert "-f docker/patroni/Dockerfile" in script and "--ignorefile docker/patroni/Dockerfile.dockerignore" in script
    assert "patroni_image=debian:bookworm-slim" in script
    # the image's modules import the standard library only (Debian's Python, nothing else)
    for module in ("topology.py", "render.py"):
        text = (REPO / "src" / "tidegate" / "control" / "ha" / module).read_text()
        imports = set(re.findall(r"^(?:from|import) ([\w.]+)", text, re.M))
        assert all(
            m.split(".")[0] in sys.stdlib_module_names or m.startswith("tidegate.control.ha") for m in imports
        ), f"{module} imports {sorted(imports)}"
    assert PurePosixPath("/opt/tidegate-ha/tidegate/control/ha") in dockerfile.copies
