"""Fixtures of the provider's tests (the package is installed: bootstrap installs it editable).

``hook``: a :class:`TidegateHook` whose controller uses a fresh SQLite control database
under tmp_path and the test's ``clock`` (a fake one, moved by ``advance``).
"""

import pytest

from support import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def hook(tmp_path, clock):
    from tidegate.control.db import ControlDB
    from tidegate.runtime.jobs.config import load_config
    from tidegate.runtime.jobs.controller import Controller
    from tidegate_airflow.hooks.tidegate import TidegateHook

    config = load_config(env={"TIDEGATE_HOME": str(tmp_path)})
    hook = TidegateHook(tidegate_conn_id=None, actor="test")
    hook.controller = Controller(config, ControlDB(config.control_db, now=clock), actor="test", now=clock)
    return hook
