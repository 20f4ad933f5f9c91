"""The package as Airflow finds it: its provider metadata through the ``apache_airflow_provider``
entry point (valid, listed by Airflow's ProvidersManager with its hook, connection type, sensor
and trigger), and the Tidegate page through the ``airflow.plugins`` entry point — loaded once,
whether providers are discovered lazily or not."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import distributions, entry_points, version
from pathlib import Path

import pytest

from airflow_support import REPO

PROVIDER = REPO / "providers" / "tidegate-airflow"
PROVIDER_INFO = "tidegate_airflow.get_provider_info:get_provider_info"


def test_the_package_is_installed_once_with_the_root_projects_version():
    found = [d for d in distributions() if (d.metadata["Name"] or "").lower() == "tidegate-airflow"]
    # a second copy on the import path (a build's providers/tidegate-airflow/src/tidegate_airflow.egg-info)
    # makes Airflow load the plugin twice: bootstrap removes it
    assert len(found) == 1, f"tidegate-airflow found {len(found)} times: {[str(d.locate_file('')) for d in found]}"
    root = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    ours = tomllib.loads((PROVIDER / "pyproject.toml").read_text())["project"]
    assert ours["version"] == root == version("tidegate-airflow"), "rerun bash scripts/bootstrap.sh"
    assert {"tidegate", "apache-airflow"} <= set(ours["dependencies"])


def test_the_provider_entry_point_gives_metadata_airflows_schema_accepts():
    import jsonschema

    (found,) = [e for e in entry_points(group="apache_airflow_provider") if e.value == PROVIDER_INFO]
    info = found.load()()
    jsonschema.validate(info, _schema())
    assert info["package-name"] == "tidegate-airflow" and info["versions"] == [version("tidegate-airflow")]
    assert info["connection-types"] == [
        {
            "connection-type": "tidegate",
            "hook-class-name": "tidegate_airflow.hooks.tidegate.TidegateHook",
            "hook-name": "Tidegate",
        }
    ]
    assert "plugins" not in info  # the page loads by its own entry point; named here too, it would load twice


def _schema() -> dict:
    """The schema Airflow's ProvidersManager validates provider metadata against."""
    import airflow

    return json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())


KINDS = {
    "hooks": "airflow.sdk.BaseHook",
    "operators": "airflow.sdk.BaseOperator",
    "sensors": "airflow.sdk.BaseSensorOperator",
    "triggers": "airflow.triggers.base.BaseTrigger",
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_module_the_metadata_lists_holds_what_it_says(kind):
    from tidegate_airflow.get_provider_info import get_provider_info

    module_name, _, class_name = KINDS[kind].rpartition(".")
    base = getattr(importlib.import_module(module_name), class_name)
    (entry,) = get_provider_info()[kind]
    for name in entry["python-modules"]:
        module = importlib.import_module(name)
        ours = [
            v for v in vars(module).values() if isinstance(v, type) and issubclass(v, base) and v.__module__ == name
        ]
        assert ours, f"{name} is listed under {kind} but defines none"


# run in a fresh interpreter: Airflow caches what it discovered for the life of the process
DISCOVER = """
import json
from airflow.providers_manager import ProvidersManager
from airflow import plugins_manager

manager = ProvidersManager()
provider = manager.providers["tidegate-airflow"]
hook = manager.hooks["tidegate"]
plugins, errors = plugins_manager._get_plugins()
print(json.dumps({
    "version": provider.version,
    "hook": [hook.hook_class_name, hook.connection_type, hook.hook_name],
    "triggers": sorted(t.trigger_class_name for t in manager.trigger if "tidegate" in t.trigger_class_name),
    "plugins": [[p.name, str(p.source)] for p in plugins if "tidegate" in (p.name or "")],
    "errors": {k: v for k, v in errors.items() if "tidegate" in k or "tidegate" in v},
}))
"""


@pytest.mark.parametrize("lazy", ["True", "False"])
def test_airflow_lists_the_provider_and_loads_the_page_once_from_its_entry_point(tmp_path, lazy):
    env = os.environ | {
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(tmp_path / "plugins"),  # empty: no plugins folder involved
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": lazy,
    }
    done = subprocess.run([sys.executable, "-c", DISCOVER], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["version"] == version("tidegate-airflow")
    assert found["hook"] == ["tidegate_airflow.hooks.tidegate.TidegateHook", "tidegate", "Tidegate"]
    assert found["triggers"] == ["tidegate_airflow.triggers.job_state"]
    ((name, source),) = found["plugins"]
    assert name == "tidegate_ui" and source.startswith("tidegate-airflow==") and "airflow.plugins" in source
    assert found["errors"] == {}
