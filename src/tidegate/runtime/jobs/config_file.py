"""The platform's settings file (``$TIDEGATE_CONFIG``) and the names of its regions.

:func:`region_names` is the one answer to "which regions are there": ``$TIDEGATE_REGIONS``,
else the settings file's ``regions``, else :data:`DEFAULT_REGIONS`.
:func:`tidegate.runtime.jobs.config.load_config` builds the regions from it, and the Airflow
DAG forms offer it as their choices. It is a module of its own, importing nothing of Tidegate's
but its errors, because Airflow's dag processor parses the DAG files every few seconds: the
forms read the names from the platform's configuration without loading the rest of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tidegate.errors import ConfigError

CONFIG_ENV = "TIDEGATE_CONFIG"
REGIONS_ENV = "TIDEGATE_REGIONS"
DEFAULT_REGIONS = ("east", "west")
SETTINGS = (
    "home",
    "control_db",
    "event_log",
    "regions",
    "gx_project",
    "kafka_bootstrap",
    "kafka_connections",
    "kafka_hosts",
    "reference_connections",
    "reference_captures",
)
DEPRECATED_SETTINGS = ("hub",)  # event_log's old name, read until 0.9 (load_config warns)


def read_config_file(env: Mapping[str, str], cwd: Path) -> dict[str, Any]:
    """The settings of the YAML file ``$TIDEGATE_CONFIG`` names (relative to ``cwd``), ``{}``
    when it names none."""
    name = env.get(CONFIG_ENV)
    if not name:
        return {}
    path = Path(name) if Path(name).is_absolute() else cwd / name
    if not path.exists():
        raise ConfigError(f"{CONFIG_ENV} names {path}, which does not exist", "fix the path or unset it")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top", "see docs/guide/configuration.md")
    unknown = set(data) - set(SETTINGS) - set(DEPRECATED_SETTINGS)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {sorted(unknown)}", "use " + ", ".join(SETTINGS))
    return data


def file_regions(settings: Mapping[str, Any]) -> Mapping[str, Any]:
    """The settings file's ``regions``: region name → that region's settings."""
    regions = settings.get("regions") or {}
    if not isinstance(regions, Mapping):
        raise ConfigError(
            "config regions: expected a mapping of region name to settings", "see docs/guide/configuration.md"
        )
    return regions


def region_names(
    env: Mapping[str, str] | None = None, cwd: Path | None = None, *, settings: Mapping[str, Any] | None = None
) -> tuple[str, ...]:
    """The configured regions' names, in order. ``settings``: the settings file, when the
    caller has read it already (else it is read from ``env``)."""
    env = os.environ if env is None else env
    if settings is None:
        settings = read_config_file(env, cwd or Path.cwd())
    text = env.get(REGIONS_ENV)
    names = (
        [n.strip() for n in text.split(",") if n.strip()] if text else list(file_regions(settings) or DEFAULT_REGIONS)
    )
    if len(set(names)) != len(names) or not names:
        raise ConfigError(f"{REGIONS_ENV}={text!r} names no region or one twice", "e.g. east,west")
    return tuple(names)
