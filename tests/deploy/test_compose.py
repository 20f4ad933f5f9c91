"""docker-compose.yaml and docker/Dockerfile held to the code's configuration — statically:
no Docker engine runs here, so the stack is parsed, never started.

Checks: every variable of ``tidegate.runtime.jobs.config.ENVIRONMENT`` a Tidegate container needs
is set, identically everywhere, and parses; each configured region has a master, workers, a
driver host and an S3 store whose names, URLs, ports, bucket and key pair agree; named volumes
are mounted at one path each and the configured local paths lie on them; Airflow runs the
LocalExecutor on PostgreSQL;
no literal secret; .env.example covers the file; health checks probe ports the services
listen on; the image is pinned. Then the compose validator itself: Compose v2 (Docker's plugin,
or the pinned release scripts/compose_v2.sh built) when present, else Debian's ``docker-compose``
v1, which scripts/test.sh installs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import pytest
import yaml
from compose_model import (
    AIRFLOW_INIT,
    COMPOSE_FILE,
    DOCKERIGNORE,
    ENV_EXAMPLE,
    POSTGRES_INIT,
    REPO,
    Dockerfile,
    MissingVariable,
    Stack,
    active,
    commented_defaults,
    read_env_file,
    references,
)

from tidegate.runtime.jobs.config import ENVIRONMENT, load_config
from tidegate.storage.s3 import S3Settings

THIRD_PARTY = {"postgres", "kafka", "s3"}  # components of their own images, not Tidegate's
SEAWEEDFS_DIR = REPO / "docker" / "seaweedfs"
AIRFLOW_SERVICES = {
    "airflow-init": None,
    "airflow-api-server": "api-server",
    "airflow-scheduler": "scheduler",
    "airflow-dag-processor": "dag-processor",
    "airflow-triggerer": "triggerer",
}
PLACEHOLDER = "CHANGE_ME"
SECRET_NAME = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|CREDENTIAL|PRIVATE|(^|_)KEY$")


@pytest.fixture(scope="module")
def stack() -> Stack:
    try:
        return Stack()
    except MissingVariable as exc:
        pytest.fail(f".env.example does not define {exc.name}, which docker-compose.yaml requires ({exc.message})")


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return Dockerfile()


@pytest.fixture(scope="module")
def regions(stack) -> list[str]:
    values = {s.env.get("TIDEGATE_REGIONS") for s in stack.tidegate_services}
    assert len(values) == 1, f"TIDEGATE_REGIONS differs between services: {values}"
    (text,) = values
    assert text, "TIDEGATE_REGIONS is not set"
    return [r.strip() for r in text.split(",") if r.strip()]


def _prefix(region: str) -> str:
    return f"TIDEGATE_REGION_{region.upper().replace('-', '_')}_"


def _s3_prefix(region: str) -> str:
    return f"TIDEGATE_S3_{region.upper().replace('-', '_')}_"


def _needed_variables(regions: list[str]) -> tuple[set[str], set[str]]:
    """(required, optional) names from ENVIRONMENT, <NAME> expanded for every region (and
    <KEY> for every key its meaning lists)."""
    required, optional = set(), set()
    for name, meaning in ENVIRONMENT.items():
        if "<KEY>" in name:
            listed = re.search(r"KEY is ([A-Z_, ]+) or ([A-Z_]+)", meaning)
            keys = [k.strip() for k in listed.group(1).split(",")] + [listed.group(2)]
            names = [
                name.replace("<NAME>_", p).replace("<KEY>", k)
                for p in ["", *(_s3_prefix(r)[len("TIDEGATE_S3_") :] for r in regions)]
                for k in keys
            ]
        elif "<NAME>" in name:
            names = [name.replace("TIDEGATE_REGION_<NAME>_", _prefix(r)) for r in regions]
        else:
            names = [name]
        (optional if "(optional)" in meaning else required).update(names)
    return required, optional


def _read_in_code() -> set[str]:
    """TIDEGATE_* names the code outside ENVIRONMENT reads (the Airflow provider, DAGs, jobs)."""
    names = set()
    for folder in ("src", "providers", "dags", "jobs"):
        for path in (REPO / folder).rglob("*.py"):
            names.update(re.findall(r"""["'](TIDEGATE_[A-Z0-9_]*[A-Z0-9])["']""", path.read_text()))
    return names


def _config(service):
    return load_config(service.env, cwd=Path(service.spec.get("working_dir", "/")))


# -- the platform's configuration -------------------------------------------------------------


def test_every_kind_of_container_is_there(stack):
    assert set(AIRFLOW_SERVICES) <= set(stack.services), "the Airflow services of the official compose file"
    for name, sub in AIRFLOW_SERVICES.items():
        svc = stack.services[name]
        assert svc.component == "airflow", f"{name}: label io.tidegate.component=airflow"
        if sub:
            assert svc.command[:2] == ["airflow", sub], f"{name} runs `airflow {sub}`"
    assert stack.services["postgres"].component == "postgres"
    assert stack.services["kafka"].component == "kafka"
    # everything built from the Tidegate image is classified, so no container escapes the checks
    for svc in stack.services.values():
        if svc.component not in THIRD_PARTY:
            assert svc.component in ("airflow", "drivers", "spark-worker", "spark-master"), (
                f"{svc.name}: label io.tidegate.component (airflow, drivers, spark-worker, spark-master)"
            )


def test_tidegate_containers_set_every_variable_the_code_reads(stack, regions):
    required, optional = _needed_variables(regions)
    read = _read_in_code()
    for svc in stack.tidegate_services:
        missing = sorted(required - set(svc.env))
        assert not missing, f"{svc.name} does not set {missing} (tidegate.runtime.jobs.config.ENVIRONMENT)"
        unknown = sorted(k for k in svc.env if k.startswith("TIDEGATE_") and k not in required | optional | read)
        assert not unknown, f"{svc.name} sets {unknown}, which Tidegate does not read (a typo?)"
        assert svc.env.get("PYSPARK_PYTHON"), f"{svc.name}: PYSPARK_PYTHON"


def test_tidegate_variables_are_identical_in_every_container(stack, regions):
    required, optional = _needed_variables(regions)
    names = sorted(required | optional | {"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "TZ"})
    reference = stack.services["airflow-scheduler"]
    for svc in stack.tidegate_services:
        for name in names:
            assert svc.env.get(name) == reference.env.get(name), (
                f"{name} is {svc.env.get(name)!r} in {svc.name} but {reference.env.get(name)!r} in {reference.name}"
            )


def test_the_code_reads_the_configuration_as_intended(stack, regions):
    for svc in stack.tidegate_services:
        config = _config(svc)  # raises ConfigError on anything the code cannot parse
        assert list(config.regions) == regions
        assert config.control_db.startswith("postgresql+psycopg://")
        for region in config.regions.values():
            # drivers are started by the region's driver host, so they outlive Airflow's task processes
            assert region.launcher == "supervisor", f"{svc.name}: region {region.name} launcher"
            assert region.spark_master.startswith("spark://"), region.spark_master
        storages = [str(r.storage) for r in config.regions.values()]
        assert len(set(storages)) == len(storages), f"{svc.name}: regions share storage {storages}"
        if len(regions) == 2:
            assert config.partner(regions[0]).name == regions[1]


def test_each_region_has_a_master_workers_and_a_driver_host(stack, regions):
    assert len(regions) == 2, "duplicates run in a pair of regions"
    labelled = {s.region for s in stack.services.values() if s.region}
    assert labelled == set(regions), f"services labelled for regions {labelled}, configured {regions}"
    config = _config(stack.services["airflow-scheduler"])
    for r in regions:
        master = stack.services.get(f"spark-{r}-master")
        assert master is not None and master.component == "spark-master" and master.region == r, f"spark-{r}-master"
        assert master.command[:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
        assert master.option("--host") == master.name == master.spec.get("hostname")
        port = int(master.option("--port"))
        master_url = f"spark://{master.name}:{port}"
        assert port in master.expose

        assert config.region(r).spark_master == master_url, (
            f"{_prefix(r)}MASTER is {config.region(r).spark_master}, the region's master is {master_url}"
        )

        workers = [s for s in stack.by_component("spark-worker", r)]
        assert workers, f"region {r} has no Spark worker"
        for w in workers:
            assert re.fullmatch(rf"spark-{r}-worker-\d+", w.name), f"{w.name}: name workers spark-{r}-worker-N"
            assert w.command[:2] == ["spark-class", "org.apache.spark.deploy.worker.Worker"]
            assert master_url in w.command, f"{w.name} must register with {master_url}: {w.command}"
            # scalable: no fixed container name, host name or host port
            assert not ({"container_name", "hostname"} & set(w.spec)) and not w.published, w.name
            assert w.spec["depends_on"][master.name]["condition"] == "service_healthy"

        drivers = stack.by_component("drivers", r)
        assert [d.name for d in drivers] == [f"tidegate-{r}-drivers"], f"region {r}: one driver host"
        (d,) = drivers
        assert d.command == ["tidegate", "region", "supervise", "--region", r]
        assert d.spec.get("hostname") == d.name, "runs rows name the driver host: keep it stable across restarts"
        assert d.env.get("SPARK_LOCAL_HOSTNAME") == d.name, "executors call the driver back by its service name"
        assert d.spec["depends_on"][master.name]["condition"] == "service_healthy"
        assert d.spec.get("restart") in ("always", "unless-stopped")


def test_the_image_is_one_for_drivers_executors_and_airflow(stack, dockerfile):
    images = {s.image for s in stack.services.values() if s.component not in THIRD_PARTY}
    assert len(images) == 1, f"one image for drivers, Spark daemons and Airflow (same Python everywhere): {images}"
    for svc in stack.services.values():
        if svc.component in THIRD_PARTY:
            continue
        build = svc.spec.get("build") or {}
        assert Path(REPO, build.get("context", "."), build.get("dockerfile", "Dockerfile")).resolve() == dockerfile.path
        assert svc.spec.get("init") is True, f"{svc.name}: init: true (reap orphaned JVMs and Python workers)"
        if "PYSPARK_PYTHON" in svc.env:
            assert svc.env["PYSPARK_PYTHON"] == dockerfile.env["PYSPARK_PYTHON"], svc.name
    assert dockerfile.env["PYSPARK_PYTHON"] == dockerfile.env["PYSPARK_DRIVER_PYTHON"]


# -- volumes and paths -------------------------------------------------------------------------


def test_each_named_volume_is_mounted_at_one_path(stack):
    declared = set(stack.data.get("volumes") or {})
    paths: dict[str, set[str]] = {}
    for svc in stack.all_services.values():  # a profile's volumes too
        for m in svc.mounts:
            if m.named_volume:
                assert m.source in declared, f"{svc.name} mounts undeclared volume {m.source}"
                paths.setdefault(m.source, set()).add(m.target)
    for volume, targets in paths.items():
        assert len(targets) == 1, f"volume {volume} is mounted at different paths: {sorted(targets)}"
    assert declared == set(paths), f"declared but unused volumes: {sorted(declared - set(paths))}"


def _storage_volume(region: str) -> str:
    return f"tidegate-{region}-storage"


def _within(path: PurePosixPath | Path, mount: str) -> bool:
    path, mount_path = PurePosixPath(str(path)), PurePosixPath(mount)
    return path == mount_path or mount_path in path.parents


def test_configured_paths_are_on_the_shared_volumes(stack, regions, dockerfile):
    for svc in stack.tidegate_services:
        if svc.name == "airflow-init":  # one-shot: migrates databases, touches no files
            continue
        config = _config(svc)
        event_log = svc.mount_of("tidegate-event-log")
        assert event_log is not None and not event_log.read_only, f"{svc.name} needs the event log volume"
        assert _within(config.event_log, event_log.target), (
            f"{svc.name}: TIDEGATE_EVENT_LOG {config.event_log} is not on {event_log.target}"
        )
        for r in regions:  # checkpoints and outputs are in the region's store, nowhere on a volume
            assert not config.region(r).storage.is_local, f"{svc.name}: {_prefix(r)}STORAGE is a local path"
        if svc.component == "airflow":
            # the controller, checks and failover look at both regions, driver logs included
            needed = regions
            gx = svc.mount_of("tidegate-gx-results")
            assert gx is not None, f"{svc.name}: the GX results volume"
            assert PurePosixPath(gx.target) == PurePosixPath(str(config.gx_project)) / "uncommitted", (
                f"{svc.name}: GX writes results under {config.gx_project}/uncommitted, the volume is at {gx.target}"
            )
        elif svc.component == "drivers":
            needed = [svc.region]  # a driver host writes its own region's logs only
        else:
            needed = []  # executors write the stores over S3: no region volume on a worker
        mounted = [r for r in regions if svc.mount_of(_storage_volume(r))]
        assert mounted == needed, f"{svc.name} mounts the region volumes of {mounted}, it needs {needed}"
        for r in needed:
            m = svc.mount_of(_storage_volume(r))
            assert not m.read_only, f"{svc.name}: {_storage_volume(r)} read-only"
            work = config.region(r).work
            assert _within(work, m.target), f"{svc.name}: {_prefix(r)}WORK {work} is not on {m.target}"


def _store(stack, region: str):
    return stack.services.get(f"s3-{region}")


def test_each_region_has_its_own_store(stack, regions):
    """Region r's storage is a bucket of the service s3-r, reached at its S3 port, path-style,
    with the key pair the store makes its identity: the same .env variables on both sides."""
    raw_env = stack.raw_services["airflow-scheduler"].env
    seen_buckets, seen_keys, seen_volumes = set(), set(), set()
    for svc in stack.tidegate_services:
        for r in regions:
            store = _store(stack, r)
            assert store is not None and store.component == "s3" and store.region == r, f"s3-{r}"
            root = _config(svc).region(r).storage
            assert root.uri.startswith("s3a://") and root.bucket == store.env["S3_BUCKET"], (
                f"{svc.name}: {_prefix(r)}STORAGE {root.uri} is not in s3-{r}'s bucket {store.env['S3_BUCKET']}"
            )
            settings = S3Settings.from_env(r, svc.env)
            port = int(store.env["S3_PORT"])
            assert settings.endpoint == f"http://{store.name}:{port}" and port in store.expose, (
                f"{svc.name}: region {r}'s endpoint {settings.endpoint}, its store listens on {store.name}:{port}"
            )
            assert settings.uses_path_style, f"{svc.name}: a SeaweedFS store is addressed path-style"
            c = settings.credentials
            assert c is not None and (c.access_key_id, c.secret_access_key) == (
                store.env["S3_ACCESS_KEY_ID"],
                store.env["S3_SECRET_ACCESS_KEY"],
            ), f"{svc.name}: region {r}'s keys"
    for r in regions:
        store = _store(stack, r)
        raw = stack.raw_services[store.name].env
        for ours, theirs in (("ACCESS_KEY_ID", "S3_ACCESS_KEY_ID"), ("SECRET_ACCESS_KEY", "S3_SECRET_ACCESS_KEY")):
            ref = references(raw[theirs])
            assert ref and ref[0].required, f"{store.name}: {theirs} is a required value from .env"
            assert references(raw_env[_s3_prefix(r) + ours])[0].name == ref[0].name, (
                f"{store.name}'s {theirs} and the containers' {_s3_prefix(r)}{ours} name different .env values"
            )
            seen_keys.add(ref[0].name)
        seen_buckets.add(store.env["S3_BUCKET"])
        (data,) = [m for m in store.mounts if m.named_volume]
        assert data.target == "/data" and not data.read_only, f"{store.name}: its data volume at /data"
        assert [s.name for s in stack.services.values() if s.mount_of(data.source)] == [store.name], (
            f"{data.source} is {store.name}'s alone"
        )
        seen_volumes.add(data.source)
    # nothing shared between regions: losing one store leaves the other's data and keys alone
    assert len(seen_buckets) == len(seen_volumes) == len(regions) and len(seen_keys) == 2 * len(regions)


def test_the_stores_start_before_what_uses_them(stack, regions):
    for r in regions:
        store = _store(stack, r)
        assert store.healthcheck == ["CMD", "/usr/local/bin/tidegate-s3", "health"], store.name
        assert store.spec.get("init") is True and store.spec.get("restart") in ("always", "unless-stopped")
        drivers = stack.services[f"tidegate-{r}-drivers"]
        assert drivers.spec["depends_on"][store.name]["condition"] == "service_healthy", drivers.name
        for name in AIRFLOW_SERVICES:
            if name == "airflow-init":  # migrates databases only
                continue
            deps = stack.services[name].spec["depends_on"]
            assert deps[store.name]["condition"] == "service_healthy", f"{name} waits for {store.name}"


def test_the_store_image(stack):
    """One image for both stores: the official SeaweedFS image at the release the pinned source
    reports, or the Debian base with the pinned binary; its entry point makes the identity,
    the bucket and the health check, and keeps statistics on the machine."""
    dockerfile = Dockerfile(SEAWEEDFS_DIR / "Dockerfile")
    default = dockerfile.args["SEAWEEDFS_IMAGE"]
    assert re.fullmatch(r"chrislusf/seaweedfs:\d+\.\d+", default), default
    script = (REPO / "scripts" / "compose.sh").read_text()
    assert f"seaweedfs_image={default}" in script and f"docker.io/{default}" in script
    example = commented_defaults(ENV_EXAMPLE)
    stores = [s for s in stack.services.values() if s.component == "s3"]
    for store in stores:
        build = store.spec["build"]
        assert Path(REPO, build["context"]).resolve() == SEAWEEDFS_DIR and store.image.startswith("tidegate-seaweedfs:")
        assert references(stack.raw_services[store.name].spec["build"]["args"]["SEAWEEDFS_IMAGE"])[0].arg == default
    assert example["SEAWEEDFS_IMAGE"] == default
    assert "install -m 0755 /usr/local/share/tidegate-seaweedfs/run.sh /usr/local/bin/tidegate-s3" in dockerfile.text
    assert re.search(r"^/docker/seaweedfs/bin/$", (REPO / ".gitignore").read_text(), re.M), "the copied binary"
    run = (SEAWEEDFS_DIR / "run.sh").read_text()
    assert run.startswith("#!/bin/sh\n") and os.access(SEAWEEDFS_DIR / "run.sh", os.X_OK)
    for flag in (
        "-filer",
        "-s3",
        "-master.telemetry=false",
        "-ip.bind=127.0.0.1",
        "-s3.ip.bind=0.0.0.0",
        '-s3.port="$port"',
        "s3.bucket.create",
    ):
        assert flag in run, f"run.sh: {flag}"
    # flags of the pinned release that the tests' own stores (tidegate.storage.seaweedfs) pass too
    tested = (REPO / "src" / "tidegate" / "storage" / "seaweedfs.py").read_text()
    for flag in re.findall(r"-s3\.port\.\w+=0", run):
        assert flag in tested, f"run.sh passes {flag}, which the tested stores do not"


def test_volume_mount_points_exist_in_the_image_owned_by_its_user(stack, dockerfile):
    """A fresh named volume takes the ownership of its mount point in the image; a mount
    point the image lacks is created root-owned, and the non-root user cannot write it."""
    for svc in stack.services.values():
        if svc.component in THIRD_PARTY:
            continue
        for m in svc.mounts:
            if not m.named_volume:
                continue
            target = PurePosixPath(m.target)
            assert target in dockerfile.created_dirs, (
                f"{svc.name}: docker/Dockerfile does not create the mount point {target}"
                + (" (add the region to ARG TIDEGATE_REGIONS)" if "/regions/" in m.target else "")
            )
            assert any(_within(target, str(owned)) for owned in dockerfile.owned_by_user), (
                f"{svc.name}: {target} is not chown'ed to the image's user"
            )


def test_job_specs_find_the_event_log_from_the_working_directory(stack, dockerfile):
    """Specs name the event log relative to the working directory (``event_log: var/event-log``): in
    every container that resolves to the event log volume."""
    for svc in stack.tidegate_services:
        assert PurePosixPath(svc.spec["working_dir"]) == dockerfile.workdir, svc.name
    config = _config(stack.services["airflow-scheduler"])
    for spec_file in sorted((REPO / "jobs").glob("*.yaml")):
        event_log = (yaml.safe_load(spec_file.read_text()).get("source") or {}).get("event_log")
        if not event_log:
            continue
        path = PurePosixPath(event_log)
        resolved = dockerfile.resolve(path if path.is_absolute() else dockerfile.workdir / path)
        assert resolved == PurePosixPath(str(config.event_log)), (
            f"{spec_file.name}: event log {event_log} resolves to {resolved} in the containers, "
            f"the platform's is {config.event_log}"
        )


# -- Airflow ----------------------------------------------------------------------------------


def test_airflow_runs_the_local_executor_on_postgres(stack, dockerfile):
    postgres = stack.services["postgres"]
    init_script = POSTGRES_INIT.read_text()
    for name in AIRFLOW_SERVICES:
        svc = stack.services[name]
        env = svc.env
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor", name
        for key in ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"):
            url = urlsplit(env[key])
            assert url.scheme == "postgresql+psycopg", f"{name} {key}: psycopg 3 is the driver installed"
            assert (url.hostname, url.port, url.path) == ("postgres", 5432, "/airflow"), f"{name} {key}"
            assert url.port in postgres.expose
        assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(dockerfile.workdir / "dags")
        assert "AIRFLOW__CORE__PLUGINS_FOLDER" not in env, name  # the installed provider's entry points load the page
        api = urlsplit(env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
        assert api.hostname == "airflow-api-server" and api.port == int(env["AIRFLOW__API__PORT"]), name
        if name != "airflow-init":
            deps = svc.spec["depends_on"]
            assert deps["postgres"]["condition"] == "service_healthy", name
            assert deps["airflow-init"]["condition"] == "service_completed_successfully", name
    # Airflow and Tidegate: two databases, two roles, both created by the init script
    control = urlsplit(stack.services["airflow-scheduler"].env["TIDEGATE_CONTROL_DB"])
    airflow = urlsplit(stack.services["airflow-scheduler"].env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    assert (control.hostname, control.port) == ("postgres", 5432)
    assert control.path != airflow.path and control.username != airflow.username
    for url in (control, airflow):
        assert f"create_database {url.username} " in init_script and init_script.count(f" {url.path[1:]}\n")
    mount = postgres.mount_of("./docker/postgres/init-databases.sh")
    assert mount and mount.target.startswith("/docker-entrypoint-initdb.d/") and mount.read_only
    assert os.access(POSTGRES_INIT, os.X_OK), "the postgres image sources non-executable init scripts"


def test_airflow_submits_batch_applications_to_each_regions_master(stack, regions, dockerfile):
    """The provider's operators spark-submit the batch reference and the completeness check through the
    connection ``tidegate_spark_<region>``: it must name the region's master, client mode
    (standalone refuses Python applications in cluster mode)."""
    for name in AIRFLOW_SERVICES:
        svc = stack.services[name]
        config = _config(svc)
        for r in regions:
            key = f"AIRFLOW_CONN_TIDEGATE_SPARK_{r.upper().replace('-', '_')}"
            assert key in svc.env, f"{name}: {key} (the Spark connection of region {r})"
            conn = json.loads(svc.env[key])
            assert conn["conn_type"] == "spark" and "port" not in conn, f"{name} {key}: {conn}"
            assert conn["host"] == config.region(r).spark_master, (
                f"{name} {key} submits to {conn['host']}, region {r}'s master is {config.region(r).spark_master}"
            )
            assert conn.get("extra", {}).get("deploy-mode") == "client"
        jobs_dir = PurePosixPath(svc.env.get("TIDEGATE_JOBS_DIR", str(dockerfile.workdir / "jobs")))
        assert jobs_dir == dockerfile.workdir / "jobs" and jobs_dir in dockerfile.copies, name
    # the applications the operators submit are in jobs/, so in the image
    commands = REPO / "providers" / "tidegate-airflow" / "src" / "tidegate_airflow" / "commands.py"
    apps = re.findall(r'jobs_dir\(\) / "([\w.]+\.py)"', commands.read_text())
    assert apps, f"no spark-submit applications found in {commands}"
    for app in apps:
        assert (REPO / "jobs" / app).exists(), f"the provider submits jobs/{app}, which does not exist"


def test_dags_the_provider_jobs_and_expectations_are_in_the_image(dockerfile):
    copied = {dest: sources for dest, sources in dockerfile.copies.items()}
    for name in ("dags", "providers/tidegate-airflow", "jobs", "expectations"):
        dest = dockerfile.workdir / name
        assert dest in copied, f"docker/Dockerfile does not copy {name}/ to {dest}"
    assert re.search(r"mkdir -p [^&]*\bdags\b", dockerfile.text), (
        "dags/ must exist in the image even before the repository has it"
    )
    # installed, so Airflow finds its entry points (the provider's metadata, the Tidegate page)
    assert re.search(r"pip install [^&]*-e \./providers/tidegate-airflow", dockerfile.text)


def test_the_admin_user_comes_from_env(stack):
    init = stack.raw_services["airflow-init"].env
    for key in ("AIRFLOW_ADMIN_USERNAME", "AIRFLOW_ADMIN_PASSWORD"):
        assert references(init[key]) and references(init[key])[0].name == key
    assert stack.services["airflow-init"].command == ["bash", "/opt/tidegate/docker/airflow-init.sh"]
    script = AIRFLOW_INIT.read_text()
    assert "airflow db migrate" in script and "AIRFLOW_ADMIN_PASSWORD" in script
    users = stack.raw_services["airflow-api-server"].env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"]
    assert references(users)[0].name == "AIRFLOW_ADMIN_USERNAME" and users.endswith(":admin")
    passwords = stack.services["airflow-api-server"].env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
    for name in ("airflow-init", "airflow-api-server"):
        auth = stack.services[name].mount_of("airflow-auth")
        assert auth is not None and _within(PurePosixPath(passwords), auth.target), name


# -- secrets and .env ------------------------------------------------------------------------


def _walk_env(services):
    for svc in services.values():
        for key, value in svc.env.items():
            yield svc.name, key, value


def test_no_literal_secret_in_the_compose_file(stack):
    for service, key, value in _walk_env(stack.raw_services):
        if SECRET_NAME.search(key) and not key.endswith("_FILE"):
            refs = references(value)
            assert re.fullmatch(r"\$\{[A-Z0-9_]+:\?[^}]*\}", value) and refs[0].required, (
                f"{service}: {key} must be a required ${{VAR:?message}} reference to .env, not {value!r}"
            )
        for m in re.finditer(r"://(?P<user>[^:/@]+):(?P<password>[^@]+)@", value):
            assert re.fullmatch(r"\$\{[A-Z0-9_]+:\?[^}]*\}", m.group("password")), (
                f"{service}: {key} has a literal password in its URL"
            )
    # nothing that looks like a generated key anywhere, comments included: a long token
    # mixing upper case, lower case and digits (base64, Fernet), or a long hex string; a
    # variable's name is not one, even where its default follows it (${NAME-http://…})
    text = re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*", "${", COMPOSE_FILE.read_text())
    for token in re.findall(r"[A-Za-z0-9+/_=-]{24,}", text):
        random_looking = all(re.search(c, token) for c in ("[a-z]", "[A-Z]", "[0-9]"))
        assert not random_looking and not re.fullmatch(r"[0-9a-fA-F]{32,}", token), (
            f"docker-compose.yaml holds a key-like literal {token[:6]}…"
        )


def test_no_secret_in_the_image(dockerfile):
    for keyword in ("ENV", "ARG"):
        for rest in dockerfile.all(keyword):
            assert not SECRET_NAME.search(rest.split("=")[0]), f"docker/Dockerfile {keyword} {rest}"
    ignored = DOCKERIGNORE.read_text().split()
    assert ".env" in ignored and ".venv" in ignored and "expectations/uncommitted" in ignored
    assert re.search(r"^\.env$", (REPO / ".gitignore").read_text(), re.M), ".env must stay git-ignored"


def test_env_example_defines_what_the_compose_file_requires(stack):
    example = read_env_file(ENV_EXAMPLE)
    documented = commented_defaults(ENV_EXAMPLE)
    refs = stack.references
    required = {r.name for r in refs if r.required}
    missing = sorted(required - set(example))
    assert not missing, f".env.example does not define {missing}, which docker-compose.yaml requires"
    for r in refs:
        if not r.required:
            assert r.name in example or r.name in documented, f".env.example: document optional {r.name}"
            if r.name in documented:
                assert documented[r.name] == r.arg, (
                    f".env.example documents {r.name}={documented[r.name]}, the compose default is {r.arg}"
                )
    unused = sorted(set(example) - {r.name for r in refs} - {"COMPOSE_PROJECT_NAME"})
    assert not unused, f".env.example sets {unused}, which docker-compose.yaml does not use"
    for key, value in example.items():
        if SECRET_NAME.search(key):
            assert value == PLACEHOLDER, f".env.example: {key} must be the placeholder {PLACEHOLDER}, not a value"


def test_a_missing_required_value_stops_the_stack():
    env = read_env_file(ENV_EXAMPLE)
    del env["TIDEGATE_DB_PASSWORD"]
    with pytest.raises(MissingVariable) as info:
        Stack(env)
    assert info.value.name == "TIDEGATE_DB_PASSWORD" and ".env" in info.value.message


# -- health checks ----------------------------------------------------------------------------


def _listening_ports(svc) -> set[int]:
    """Ports the service's own command or settings make it listen on."""
    ports = set()
    for flag in ("--port", "--webui-port"):
        if svc.option(flag):
            ports.add(int(svc.option(flag)))
    for key in ("AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT",):
        if key in svc.env:
            ports.add(int(svc.env[key]))
    if svc.component == "postgres":
        ports.add(5432)  # the image's default; nothing here moves it
    if svc.component == "kafka":
        ports |= {int(p) for p in re.findall(r"PLAINTEXT://:(\d+)", svc.env.get("KAFKA_LISTENERS", ""))}
    if svc.component == "spark-worker" and not svc.option("--webui-port"):
        ports.add(8081)
    return ports


def test_health_checks_probe_ports_the_services_listen_on(stack):
    for svc in stack.services.values():
        test = svc.healthcheck
        if svc.name == "airflow-init":
            assert test is None  # a one-shot job; the others wait for its completion
            continue
        assert test, f"{svc.name} has no health check"
        words = " ".join(test)
        ports = {int(p) for p in re.findall(r"//(?:localhost|127\.0\.0\.1):(\d+)", words)}
        ports |= {int(p) for p in re.findall(r"--port[ =](\d+)", words)}
        for port in ports:
            assert port in svc.expose, f"{svc.name}: health check port {port} is not in expose {sorted(svc.expose)}"
            assert port in _listening_ports(svc), f"{svc.name}: nothing makes the service listen on {port}"
        if "localhost:8974" in words:
            assert svc.env["AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK"] == "true"
        if "healthcheck.py" in words:
            assert "docker/healthcheck.py" in Dockerfile().text, "healthcheck.py is copied into the image"
            assert test[test.index("/opt/tidegate/docker/healthcheck.py") + 1] in ("http", "supervisor")
        if svc.component == "spark-master":
            assert "status=ALIVE" in words
        if svc.component == "drivers":
            assert test[-3:] == ["supervisor", "--region", svc.region], svc.name
        for container_port in (c for _, c in svc.published):
            assert container_port in svc.expose, f"{svc.name}: publishes {container_port}, which it does not expose"


def test_depends_on_healthy_only_services_with_health_checks(stack):
    for svc in stack.services.values():
        for dep, cond in (svc.spec.get("depends_on") or {}).items():
            assert dep in stack.services, f"{svc.name} depends on unknown {dep}"
            if cond.get("condition") == "service_healthy":
                assert stack.services[dep].healthcheck, f"{svc.name} waits for {dep} to be healthy; it has no check"


def test_published_host_ports_do_not_collide(stack):
    host_ports = [h for s in stack.services.values() for h, _ in s.published]
    assert len(host_ports) == len(set(host_ports)), host_ports


# -- the image ---------------------------------------------------------------------------------


def test_the_dockerfile_pins_versions(dockerfile):
    base = dockerfile.base_image
    name, _, tag = base.partition("@")[0].rpartition(":")
    assert name and tag and tag != "latest", f"base image {base} has no version tag"
    pyproject = (REPO / "pyproject.toml").read_text()
    minor = re.search(r'requires-python = ">=(\d+\.\d+)', pyproject).group(1)
    assert name.endswith("python") and tag.startswith(f"{minor}-"), f"base image {base}, pyproject wants {minor}"
    runs = dockerfile.all("RUN")
    pip_runs = [cmd for run in runs for cmd in re.split(r"&&|;", run) if re.search(r"\bpip install\b", cmd)]
    assert pip_runs, "no pip install in docker/Dockerfile"
    for cmd in pip_runs:
        words = shlex.split(cmd)
        args = words[words.index("install") + 1 :]
        packages, i = [], 0
        while i < len(args):
            if args[i] in ("-c", "-r", "--constraint", "--requirement"):
                i += 2
                continue
            if not args[i].startswith("-"):
                packages.append(args[i])
            i += 1
        if "." in packages:
            assert "requirements/constraints.txt" in words, (
                f"{cmd.strip()}: install . with -c requirements/constraints.txt"
            )
            assert "--no-build-isolation" in words, f"{cmd.strip()}: builds must use the pinned backend"
        local = [p for p in packages if p.startswith("./") and (REPO / p).is_dir()]  # the provider
        if local:
            assert "--no-deps" in words, f"{cmd.strip()}: its dependencies are the root's pinned set"
            assert "--no-build-isolation" in words, f"{cmd.strip()}: builds must use the pinned backend"
        for p in packages:
            assert p == "." or p in local or re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[A-Za-z0-9_.+\-]+", p), (
                f"unpinned: {p}"
            )
        for flag in ("-r", "--requirement"):
            if flag in words:
                req = REPO / words[words.index(flag) + 1]
                for line in req.read_text().splitlines():
                    line = line.split("#")[0].strip()
                    assert not line or "==" in line, f"{req.name}: {line} is not pinned"
    for line in (REPO / "requirements" / "constraints.txt").read_text().splitlines():
        assert not line.strip() or "==" in line, f"constraints.txt: {line} is not pinned"
    apt = [cmd for run in runs for cmd in re.split(r"&&", run) if "apt-get install" in cmd]
    assert apt and all("--no-install-recommends" in c for c in apt)
    assert any("openjdk-17-jdk-headless" in c for c in apt), "Java 17 for Spark 4, javac for the JVM log reader"
    assert any("tidegate.spark.pipeline.java_source" in run for run in runs), "the image builds the JVM log reader"
    user = dockerfile.all("USER")
    assert user and user[-1] not in ("root", "0"), "the image runs as a non-root user"
    assert dockerfile.env.get("PYSPARK_PYTHON", "").startswith("/usr/local/bin/python")


# -- the compose validator ------------------------------------------------------------------------


def _validator() -> list[str]:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    pinned = subprocess.run(
        ["bash", str(REPO / "scripts" / "compose_v2.sh"), "--path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if os.access(pinned, os.X_OK):
        return [pinned]
    legacy = shutil.which("docker-compose") or (
        "/usr/bin/docker-compose" if Path("/usr/bin/docker-compose").exists() else None
    )
    if legacy:
        return [legacy]
    pytest.fail(
        "no compose validator: install Debian's docker-compose (`apt-get install -y docker-compose`) "
        "or the docker compose v2 plugin; scripts/test.sh installs it"
    )


def _compose(*args: str, env_file: Path = ENV_EXAMPLE) -> subprocess.CompletedProcess:
    # a clean environment: the shell's variables would override the env file's
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run(
        [*_validator(), "--project-directory", str(REPO), "--env-file", str(env_file), "-f", str(COMPOSE_FILE), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_compose_validator_accepts_the_file():
    done = _compose("config", "-q")
    assert done.returncode == 0, f"{' '.join(_validator())} config rejects docker-compose.yaml:\n{done.stderr}"


def test_the_compose_validator_refuses_a_missing_secret(tmp_path):
    env_file = tmp_path / "env"
    env_file.write_text(
        "".join(f"{k}={v}\n" for k, v in read_env_file(ENV_EXAMPLE).items() if k != "AIRFLOW_FERNET_KEY")
    )
    done = _compose("config", "-q", env_file=env_file)
    assert done.returncode != 0 and "AIRFLOW_FERNET_KEY" in done.stderr, done.stderr


def test_the_smokes_throwaway_env_file_is_all_the_stack_needs(tmp_path):
    """scripts/compose.sh smoke starts the stack with compose_smoke.py's env file alone: new
    secrets, readable by its owner only, that the validator accepts without .env."""
    write = [sys.executable, str(REPO / "scripts" / "compose_smoke.py"), "env"]
    env_file = tmp_path / "smoke.env"
    subprocess.run([*write, str(env_file), "0.1.0"], check=True)
    assert env_file.stat().st_mode & 0o077 == 0
    written = read_env_file(env_file)
    assert not {v for v in written.values() if "CHANGE_ME" in v}
    again = tmp_path / "again.env"
    subprocess.run([*write, str(again), "0.1.0"], check=True)
    assert written["AIRFLOW_FERNET_KEY"] != read_env_file(again)["AIRFLOW_FERNET_KEY"], "a new secret each run"
    done = _compose("config", "-q", env_file=env_file)
    assert done.returncode == 0, done.stderr


def test_the_validator_resolves_the_file_as_these_tests_do(stack):
    """The structural tests above read the file with their own interpolation and YAML
    merges; the validator's resolved configuration must agree with it."""
    done = _compose("config")
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)
    # Debian's docker-compose 1.29 lists every profile's services, Compose v2 those it would start
    resolved["services"] = {n: s for n, s in resolved["services"].items() if active(s, frozenset())}
    assert set(resolved["services"]) == set(stack.services)
    for name, svc in stack.services.items():
        theirs = {k: str(v) for k, v in (resolved["services"][name].get("environment") or {}).items()}
        assert theirs == svc.env, f"{name}: environment differs"
        assert [str(c) for c in resolved["services"][name].get("command") or []] == svc.command, name
        their_targets = sorted(
            v["target"] if isinstance(v, dict) else v.split(":")[1]
            for v in resolved["services"][name].get("volumes") or []
        )
        assert their_targets == sorted(m.target for m in svc.mounts), name


def test_both_regions_read_the_one_kafka_broker(stack, regions):
    """Every Tidegate container finds the same brokers (TIDEGATE_KAFKA_BOOTSTRAP), the
    compose broker by default, and each region's driver host waits for it to be healthy."""
    kafka = stack.services["kafka"]
    assert kafka.env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"  # a missing topic is an error, not a new topic
    listen = kafka.env["KAFKA_ADVERTISED_LISTENERS"].split("//")[1]
    for svc in stack.tidegate_services:
        assert _config(svc).kafka_bootstrap == listen, svc.name
    for r in regions:
        drivers = stack.services[f"tidegate-{r}-drivers"]
        assert drivers.spec["depends_on"]["kafka"]["condition"] == "service_healthy"
