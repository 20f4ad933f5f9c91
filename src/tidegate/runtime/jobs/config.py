"""Where the platform lives: the control database, the default event log and the regions.

A **region** is where one duplicate of every job runs: its Spark master (``local[2]`` by
default, a ``spark://`` URL in a deployment), its storage root for checkpoints and
outputs (a local folder, or ``s3a://bucket/prefix`` on AWS S3 or an S3-compatible store,
reached with that region's :meth:`~tidegate.storage.s3.S3Settings.from_env` settings), a
local work folder for what the host's processes keep beside it (driver logs), and how its
drivers are launched (``local``: the controller starts them as detached processes on this
host; ``supervisor``: a ``tidegate region supervise --region R`` process running where the region's
drivers belong starts them). Two regions, ``east`` and ``west``, are configured by default;
both read the same input and share the control database.

Settings come from, last one winning: the defaults; a YAML file named by
``$TIDEGATE_CONFIG`` (read by :mod:`.config_file`, which also says which regions there are);
environment variables (``TIDEGATE_*``, listed in
:data:`ENVIRONMENT` — the configuration guide (docs/guide/configuration.md) and the compose file's
consistency test read that list).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidegate.errors import ConfigError
from tidegate.inputs.kafka.connections import HOSTS_ENV, KafkaConnection, load_allowed_hosts, load_connections
from tidegate.inputs.reference_capture import reference_captures, reference_connections
from tidegate.jobspec.folders import log_dirs, reference_dirs
from tidegate.jobspec.source import default_event_log
from tidegate.runtime.jobs.config_file import CONFIG_ENV, file_regions, read_config_file, region_names
from tidegate.storage.s3 import S3Settings
from tidegate.storage.uri import LOCAL as LOCAL_SCHEME
from tidegate.storage.uri import StorageRoot, parse_root

LAUNCHERS = ("local", "supervisor")
_REGION_NAME = re.compile(r"[a-z][a-z0-9-]*")

logger = logging.getLogger(__name__)

# Every environment variable the platform reads, with its meaning (docs/guide/configuration.md, compose test).
ENVIRONMENT = {
    "TIDEGATE_HOME": "root of the embedded defaults: event log, control database, region storage (default ./var)",
    "TIDEGATE_CONFIG": "YAML file with control_db, event_log and regions (optional)",
    "TIDEGATE_CONTROL_DB": "SQLAlchemy URL of the control database (default sqlite:///$TIDEGATE_HOME/control.db)",
    "TIDEGATE_EVENT_LOG": "the default event log directory (default $TIDEGATE_HOME/event-log, or an existing "
    "$TIDEGATE_HOME/hub while event-log does not exist); TIDEGATE_HUB, its old name, is read until 0.9",
    "TIDEGATE_REGIONS": "comma-separated region names (default east,west)",
    "TIDEGATE_KAFKA_BOOTSTRAP": "the brokers of the Kafka connection 'default', which jobs whose source.kafka "
    "names neither connection nor brokers read, host:port,… (optional)",
    "TIDEGATE_KAFKA_SECURITY_PROTOCOL": "security protocol of the connection 'default': PLAINTEXT, SSL, "
    "SASL_PLAINTEXT or SASL_SSL (default SASL_SSL with a SASL user, else PLAINTEXT) (optional)",
    "TIDEGATE_KAFKA_SASL_MECHANISM": "SASL mechanism of the connection 'default': PLAIN, SCRAM-SHA-256 or "
    "SCRAM-SHA-512 (default PLAIN) (optional)",
    "TIDEGATE_KAFKA_SASL_USERNAME": "SASL user of the connection 'default', sent only to its brokers (optional)",
    "TIDEGATE_KAFKA_SASL_PASSWORD": "SASL password of the connection 'default' (Event Hubs: its connection "
    "string), read only when a client connects (optional)",
    "TIDEGATE_KAFKA_SASL_PASSWORD_FILE": "a file holding that password instead (optional)",
    "TIDEGATE_KAFKA_HOSTS": "Kafka brokers a job spec may name besides those of the Kafka connections, host:port "
    "patterns (*.domain:port, host:*), comma-separated; replaces kafka_hosts of $TIDEGATE_CONFIG (default none) "
    "(optional)",
    "TIDEGATE_KAFKA_MAX_CLOCK_SKEW": "how far the Kafka brokers' clocks may lag this host's, 0s to 1h: a silent "
    "topic's clock is this host's less it, so its windows still close (default 5s) (optional)",
    "TIDEGATE_LIMIT_<LIMIT>": "a limit on what one job spec may cost, read where specs load: SPEC_VALUES, "
    "EXPRESSION_CHARS, BUILT_PER_CALL, BUILT_PER_EXPRESSION, COPIES_OF_THE_EVENT, EDIT_DISTANCE_CELLS, "
    "WINDOWS_PER_EVENT, OPEN_WINDOWS_PER_KEY; defaults in docs/reference/jobspec.md#limits (optional)",
    "TIDEGATE_REGION_<NAME>_MASTER": "Spark master of a region (default local[2])",
    "TIDEGATE_REGION_<NAME>_STORAGE": "storage root of a region: a folder or s3a://bucket/prefix "
    "(default $TIDEGATE_HOME/regions/<name>)",
    "TIDEGATE_REGION_<NAME>_WORK": "local folder of a region's driver logs and supervisor log (default: its storage "
    "root when that is a folder, else $TIDEGATE_HOME/regions/<name>) (optional)",
    "TIDEGATE_S3_<NAME>_<KEY>": "how region <name> reaches its s3a:// storage root; KEY is ENDPOINT, REGION, "
    "PATH_STYLE, ACCESS_KEY_ID, SECRET_ACCESS_KEY, SESSION_TOKEN, CONNECT_TIMEOUT_S, REQUEST_TIMEOUT_S or ATTEMPTS; "
    "TIDEGATE_S3_<KEY> applies to every region, then AWS_*, then the instance role (optional)",
    "TIDEGATE_REGION_<NAME>_LAUNCHER": "local (controller starts drivers) or supervisor (default local)",
    "TIDEGATE_REGION_<NAME>_SPARK_CONF": "extra Spark settings of a region, k=v,k=v (optional)",
    "TIDEGATE_EXPECTATIONS": "the Great Expectations project directory (default ./expectations)",
    "TIDEGATE_JOBS_DIR": "where Airflow finds the spark-submit entry points (default: the checkout's jobs/)",
    "TIDEGATE_SPEC_DIRS": "the folders, separated by ':', a DAG (or the Tidegate page) may deploy job specs from; "
    "a spec path outside them, through a symlink or with '..' is refused (default: the checkout's jobs/) (optional)",
    "TIDEGATE_LOG_DIRS": "the folders, separated by ':', an event log a job spec names (source.event_log, "
    "inputs.<name>.source.event_log) may lie in; a log outside them, also through a symlink or '..', is refused "
    "when the "
    "spec is loaded and when the log is opened (default: $TIDEGATE_HOME) (optional)",
    "TIDEGATE_REFERENCE_DIRS": "the folders, separated by ':', a job spec's reference.path may name; a path "
    "outside them, also through a symlink, is refused; an s3a://bucket/prefix item is an S3 prefix, reached with "
    "TIDEGATE_S3_REFERENCE_<KEY>, else TIDEGATE_S3_<KEY> (default: jobs/ and $TIDEGATE_HOME/reference of the "
    "working directory) (optional)",
    "TIDEGATE_REFERENCE_CAPTURE_SCHEDULE": "when the tidegate_reference_capture DAG captures the reference_captures "
    "of the config file, a cron expression or preset, read when the DAG is parsed (default */15 * * * *) (optional)",
    "TIDEGATE_DRILL_SCHEDULE_ACTIVE": "true: Airflow creates the weekly tidegate_drill DAG unpaused, so its schedule "
    "breaks a region every week; false: created paused, it runs once unpaused or triggered; read when the DAG is "
    "first parsed (default false) (optional)",
    "TIDEGATE_LEASE_TTL_S": "seconds a driver's lease lasts without renewal; a driver that cannot renew it in "
    "that time stops itself, and another may take over after it default 15 (optional)",
    "TIDEGATE_TRIGGER_INTERVAL": "how often a driver starts a micro-batch while input is waiting, a duration such "
    "as 1s or 10s: longer means fewer, larger batches and less CPU per event, later output; default 1s (optional)",
    "TIDEGATE_TRIGGER_STRETCH": "the longest a caught-up tumbling or hopping window job's driver goes without a "
    "micro-batch while no window can close, a duration up to 60s; 0s reads at every trigger; default 0s (optional)",
    "TIDEGATE_RETAIN_AUDIT": "how long a job's audit hours are kept, a duration or off (default 7d) (optional)",
    "TIDEGATE_RETAIN_QUARANTINE": "how long quarantine hours are kept, a duration or off (default 30d) (optional)",
    "TIDEGATE_RETAIN_METRICS": "how long metrics days are kept, a duration or off (default 30d) (optional)",
    "TIDEGATE_RETAIN_LINEAGES": "how long a retired lineage is kept after its span ended (default 7d) (optional)",
    "TIDEGATE_COMPACTION_GRACE": "how long merged batch folders stay for readers that listed them (default 1h) "
    "(optional)",
    "TIDEGATE_COMPACTION_EVERY": "how often a running driver compacts its outputs, a duration or off (default 15m) "
    "(optional)",
    "TIDEGATE_CHECK_SERVICE": "how long the warm check service waits idle before it exits, a duration, or off: "
    "every completeness check runs as its own spark-submit (default 15m) (optional)",
    "TIDEGATE_CHECK_REQUEST_LIMIT_S": "seconds one check or batch reference may run in the warm check service "
    "before it is cancelled and fails naming its job (default 600) (optional)",
    "TIDEGATE_SOURCE_READER": "how jobs read the event log or a Kafka topic: auto (the JVM reader when its jar is "
    "built, for Kafka with Kafka's client jars; else the Python source), jvm or python (optional)",
    "TIDEGATE_POLICY_RUNNER": "where the per-event time policy runs: auto (on the JVM when the jar is built, else "
    "in Python workers), jvm, or python (the numpy core in Python workers, the reference) (optional)",
    "TIDEGATE_CLASS_ARCHIVE": "auto: every Spark JVM maps the class archive setup built (python -m "
    "tidegate.spark.class_archive), which halves a JVM's start; off: never (optional)",
    "TIDEGATE_CLASS_ARCHIVE_DIR": "where the class archive lives (default the environment's share/tidegate) (optional)",
    "TIDEGATE_JVM_OPTIONS": "Java options added to every Spark JVM Tidegate starts; quick: the C1 compiler only "
    "and a serial GC, for short runs such as tests (optional)",
    "TIDEGATE_DRIVER_JVM": "a job driver's JVM: auto (quick on a local master with at most 2 cores, where C2's "
    "compiler falls minutes behind), quick (the C1 compiler only and a serial GC) or full (the JVM's own) (optional)",
}


@dataclass(frozen=True)
class Region:
    """One region. ``storage`` is its root (a folder or ``s3a://bucket/prefix``; a ``Path`` or
    string is parsed); ``work`` the local folder of what must stay on this host's disk (driver
    logs), by default the storage folder itself when that is local."""

    name: str
    spark_master: str = "local[2]"
    storage: StorageRoot | Path | str = Path("var/regions/east")
    launcher: str = "local"
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    work: Path | None = None

    def __post_init__(self) -> None:
        if not _REGION_NAME.fullmatch(self.name):
            raise ConfigError(
                f"region name {self.name!r} is not a plain name",
                "use lower-case letters, digits and '-', starting with a letter (e.g. east)",
            )
        if self.launcher not in LAUNCHERS:
            raise ConfigError(
                f"region {self.name}: launcher {self.launcher!r} is unknown",
                "use 'local' (drivers started by the controller) or 'supervisor'",
            )
        if not isinstance(self.storage, StorageRoot):
            object.__setattr__(self, "storage", _storage_root(self.storage, None))
        if self.work is None:
            if not self._root.is_local:
                raise ConfigError(
                    f"region {self.name}: an s3a:// storage root needs a local work folder",
                    "load the configuration with load_config, which puts it under the platform home",
                )
            object.__setattr__(self, "work", self._root.path)

    @property
    def _root(self) -> StorageRoot:
        """``storage`` as the StorageRoot __post_init__ made of whatever form it was given in."""
        assert isinstance(self.storage, StorageRoot), "Region.__post_init__ parses storage"
        return self.storage

    @property
    def _work(self) -> Path:
        """``work`` as the folder __post_init__ set when none was given."""
        assert self.work is not None, "Region.__post_init__ sets work"
        return self.work

    @property
    def on_object_store(self) -> bool:
        return not self._root.is_local

    def job_dir(self, job: str) -> Path:
        """The job's local folder in this region: its driver logs (and, on a local root, its lineages)."""
        return self._work / "jobs" / job

    def job_root(self, job: str) -> StorageRoot:
        """The job's place in the region's storage: its lineages and rehearsals."""
        return self._root.child("jobs", job)

    def lineage_root(self, job: str, kind: str, lineage_id: str) -> str:
        """Where a lineage (``kind`` ``lineages``) or a rehearsal (``rehearsals``) of ``job`` lives, as
        the control database records it: a folder, or an ``s3a://`` URI (see :meth:`JobPaths.at`)."""
        root = self.job_root(job).child(kind, lineage_id)
        return str(root.path) if root.is_local else root.uri

    def s3_settings(self, environ: Mapping[str, str] | None = None) -> S3Settings | None:
        """How this region reaches its S3 store (``TIDEGATE_S3_<NAME>_*``, then ``TIDEGATE_S3_*``,
        ``AWS_*``, the instance role); None for a local root."""
        return None if self._root.is_local else S3Settings.from_env(self.name, environ)

    def store(self):
        """The :class:`~tidegate.storage.store.Store` holding this region's root."""
        from tidegate.storage.store import open_store

        return open_store(self.storage, self.s3_settings())

    def spark_session_conf(self) -> dict[str, str]:
        """The region's Spark settings, with what reaches its S3 store on an ``s3a://`` root."""
        if self._root.is_local:
            return dict(self.spark_conf)
        from tidegate.storage.spark import session_conf

        return session_conf({self._root.bucket: self._store_settings()}, base=self.spark_conf)

    def _store_settings(self) -> S3Settings:
        """:meth:`s3_settings` of a region on an object store, where there always are some."""
        settings = self.s3_settings()
        assert settings is not None, "s3_settings is None only for a local root"
        return settings


@dataclass(frozen=True)
class PlatformConfig:
    home: Path
    control_db: str
    event_log: Path
    regions: Mapping[str, Region]
    gx_project: Path
    kafka_bootstrap: str | None = None  # brokers of the Kafka connection 'default'
    # the operator's Kafka connections (no passwords: where they are); None: this process's environment
    kafka_connections: Mapping[str, KafkaConnection] | None = None
    # the other brokers a spec may name, host:port patterns; None: this process's environment
    kafka_hosts: tuple[str, ...] | None = None
    # the operator's database connections for reference tables: name → where its URL is read
    reference_connections: Mapping[str, Mapping[str, str]] | None = None
    reference_captures: tuple[Mapping[str, Any], ...] = ()  # what tidegate_reference_capture captures
    # the folders an event log a spec names may lie in (TIDEGATE_LOG_DIRS, default the home); none: no log
    log_dirs: tuple[Path, ...] = ()
    # the folders a spec's reference folder may lie in (TIDEGATE_REFERENCE_DIRS, default jobs/ and <home>/reference)
    reference_dirs: tuple[Path | StorageRoot, ...] = ()  # an s3a:// one is an S3 prefix

    def region(self, name: str) -> Region:
        try:
            return self.regions[name]
        except KeyError:
            raise ConfigError(
                f"region {name!r} is not configured",
                f"use one of {', '.join(self.regions)} (or add it to TIDEGATE_REGIONS)",
            ) from None

    def partner(self, name: str) -> Region:
        """The other region of the pair a job runs in."""
        self.region(name)
        others = [r for r in self.regions.values() if r.name != name]
        if len(others) != 1:
            raise ConfigError(
                f"region {name} has {len(others)} partners; duplicates run in a pair of regions",
                "configure exactly two regions",
            )
        return others[0]

    def storage_spark_conf(self) -> dict[str, str]:
        """Spark settings that reach every region's S3 store (each bucket its own settings), for
        a session that reads both regions (a completeness check); empty when no region is on S3."""
        stores = {r._root.bucket: r._store_settings() for r in self.regions.values() if r.on_object_store}
        if not stores:
            return {}
        from tidegate.storage.spark import session_conf

        return session_conf(stores)

    def driver_environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a process this platform launches (a driver, a supervisor):
        what it needs of ``base`` (default this process's: see :func:`launched_environment`)
        with these settings, so it finds the same control database, event log and regions as
        its launcher — whatever file or defaults those came from."""
        source = os.environ if base is None else base
        env = launched_environment(source)
        for connection in (self.kafka_connections or {}).values():  # a password the operator keeps elsewhere
            if connection.password_env and connection.password_env in source:
                env[connection.password_env] = source[connection.password_env]
        env["TIDEGATE_CONTROL_DB"] = self.control_db
        env["TIDEGATE_HOME"] = str(self.home)
        env["TIDEGATE_EVENT_LOG"] = str(self.event_log)
        env["TIDEGATE_LOG_DIRS"] = os.pathsep.join(str(folder) for folder in self.log_dirs)
        if self.reference_dirs:
            env["TIDEGATE_REFERENCE_DIRS"] = os.pathsep.join(str(folder) for folder in self.reference_dirs)
        env["TIDEGATE_REGIONS"] = ",".join(self.regions)
        if self.kafka_bootstrap:
            env["TIDEGATE_KAFKA_BOOTSTRAP"] = self.kafka_bootstrap
        if self.kafka_hosts:
            env[HOSTS_ENV] = ",".join(self.kafka_hosts)
        for r in self.regions.values():
            prefix = f"TIDEGATE_REGION_{r.name.upper().replace('-', '_')}_"
            env[prefix + "MASTER"] = r.spark_master
            env[prefix + "STORAGE"] = str(r._root.path) if r._root.is_local else r._root.uri
            env[prefix + "WORK"] = str(r.work)
            env[prefix + "LAUNCHER"] = r.launcher
            if r.spark_conf:
                env[prefix + "SPARK_CONF"] = ",".join(f"{k}={v}" for k, v in r.spark_conf.items())
        return env


# What a launched process keeps of its launcher's environment. A driver runs job authors'
# expressions in its Spark session, so it gets what running a job needs — the platform's
# own settings, Python, Java, Spark, Hadoop and object-store credentials — and nothing else
# of an Airflow worker's or an operator's shell (Airflow's database URL, other services'
# tokens). docs/concepts/threat-model.md
_KEPT_PREFIXES = ("TIDEGATE_", "PYSPARK_", "SPARK_", "JAVA_", "HADOOP_", "PYTHON", "LC_", "AWS_")
_KEPT_NAMES = frozenset(
    "PATH HOME USER LOGNAME LANG LANGUAGE TZ TMPDIR TEMP TMP VIRTUAL_ENV LD_LIBRARY_PATH SHELL TERM CI".split()
)
# settings a driver reads into its own objects and then drops, before Spark starts: its
# JVM and Python workers never hold them (tidegate.runtime.jobs.driver)
DRIVER_SECRETS = ("TIDEGATE_CONTROL_DB",)


def forget_driver_secrets(environ: MutableMapping[str, str]) -> None:
    """Drop what a driver has read into its own objects from ``environ`` (its process's
    environment), so the Spark JVM and Python workers it starts next never hold it."""
    for name in DRIVER_SECRETS:
        environ.pop(name, None)


def launched_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The part of ``base`` a process Tidegate launches may see."""
    return {k: v for k, v in base.items() if k in _KEPT_NAMES or k.startswith(_KEPT_PREFIXES)}


def _event_log(env: Mapping[str, str], file_settings: Mapping[str, Any], home: Path, cwd: Path) -> Path:
    """The platform's default event log: ``TIDEGATE_EVENT_LOG``, else the settings file's
    ``event_log``, else ``<home>/event-log`` (:func:`~tidegate.jobspec.source.default_event_log`).
    The old names, ``TIDEGATE_HUB`` and the file's ``hub``, are read until 0.9, with a warning."""
    if env.get("TIDEGATE_HUB"):
        if env.get("TIDEGATE_EVENT_LOG"):
            logger.warning(
                "TIDEGATE_HUB is deprecated and ignored beside TIDEGATE_EVENT_LOG; unset it (removed in 0.9)"
            )
        else:
            logger.warning("TIDEGATE_HUB is deprecated; rename it to TIDEGATE_EVENT_LOG (removed in 0.9)")
            return _path(env["TIDEGATE_HUB"], cwd)
    if env.get("TIDEGATE_EVENT_LOG"):
        return _path(env["TIDEGATE_EVENT_LOG"], cwd)
    if file_settings.get("hub") is not None:
        if file_settings.get("event_log") is not None:
            raise ConfigError(f"{env.get(CONFIG_ENV)}: both event_log and hub (its old name) are set",
                              "keep event_log and remove hub")  # fmt: skip
        logger.warning("%s: hub is deprecated; rename it to event_log (removed in 0.9)", env.get(CONFIG_ENV))
        return _path(file_settings["hub"], cwd)
    if file_settings.get("event_log"):
        return _path(file_settings["event_log"], cwd)
    return default_event_log(home)


def load_config(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> PlatformConfig:
    """The platform's settings from the defaults, ``$TIDEGATE_CONFIG`` and ``TIDEGATE_*``."""
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    file_settings = read_config_file(env, cwd)
    home = _path(env.get("TIDEGATE_HOME") or file_settings.get("home") or "var", cwd)
    control_db = env.get("TIDEGATE_CONTROL_DB") or file_settings.get("control_db") or f"sqlite:///{home / 'control.db'}"
    event_log = _event_log(env, file_settings, home, cwd)
    gx = _path(env.get("TIDEGATE_EXPECTATIONS") or file_settings.get("gx_project") or "expectations", cwd)

    given_regions = file_regions(file_settings)
    regions = {}
    for name in region_names(env, settings=file_settings):
        given = given_regions.get(name) or {}
        prefix = f"TIDEGATE_REGION_{name.upper().replace('-', '_')}_"
        storage = _storage_root(env.get(prefix + "STORAGE") or given.get("storage") or home / "regions" / name, cwd)
        work = env.get(prefix + "WORK") or given.get("work")
        conf = dict(given.get("spark_conf") or {}) | _pairs(env.get(prefix + "SPARK_CONF"), prefix + "SPARK_CONF")
        regions[name] = Region(
            name=name,
            spark_master=env.get(prefix + "MASTER") or given.get("spark_master") or "local[2]",
            storage=storage,
            work=_path(work, cwd) if work else storage.path if storage.is_local else home / "regions" / name,
            launcher=env.get(prefix + "LAUNCHER") or given.get("launcher") or "local",
            spark_conf={str(k): str(v) for k, v in conf.items()},
        )
    return PlatformConfig(
        home=home,
        control_db=control_db,
        event_log=event_log,
        regions=regions,
        gx_project=gx,
        kafka_bootstrap=env.get("TIDEGATE_KAFKA_BOOTSTRAP") or file_settings.get("kafka_bootstrap"),
        kafka_connections=load_connections(env, file_settings, cwd),
        kafka_hosts=load_allowed_hosts(env, file_settings, cwd),
        reference_connections=reference_connections(file_settings),
        reference_captures=reference_captures(file_settings, cwd),
        log_dirs=log_dirs(env, home, cwd),
        reference_dirs=reference_dirs(env, cwd, home),
    )


def _pairs(text: str | None, where: str) -> dict[str, str]:
    if not text:
        return {}
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{where}: {item!r} is not key=value", "e.g. spark.executor.memory=2g,spark.cores.max=2")
        out[key.strip()] = value.strip()
    return out


def _storage_root(value: str | Path, cwd: Path | None) -> StorageRoot:
    """A region's storage root: a URI (``s3a://``, ``file://``) parsed, a folder kept as given
    (relative to ``cwd`` when one is)."""
    if isinstance(value, str) and "://" in value:
        return parse_root(value)
    return StorageRoot(LOCAL_SCHEME, path=_path(value, cwd) if cwd else Path(value))


def _path(value: str | Path, cwd: Path) -> Path:
    path = Path(value)
    return path if path.is_absolute() else cwd / path
