"""What every Tidegate DAG declares alike: its start, no catch-up, one retry, whether it is created
paused, templates rendered as native objects, and the common params.

A DAG file spreads :func:`dag_defaults` into ``@dag(...)`` and builds its ``job`` and
region params with :func:`job_param` and :func:`region_param`, so the forms in the UI and
the scheduling rules read the same in every DAG (``tests/dags`` holds them to it).

The region choices are the platform's configured regions
(:func:`tidegate.runtime.jobs.config_file.region_names`: ``TIDEGATE_REGIONS``, else
``$TIDEGATE_CONFIG``'s, else the defaults), read from the environment the dag processor
parses the DAG files in; the job and spec defaults are the demo's
(:mod:`tidegate.examples`). Both modules import nothing heavy: this runs at every parse.

Whether the weekly drill's schedule runs is the operator's to say: ``TIDEGATE_DRILL_SCHEDULE_ACTIVE``
(:func:`drill_schedule_active`), read from the same environment when the DAG is parsed; so
is how often the health watch looks (``TIDEGATE_HEALTH_WATCH_EVERY``, :func:`health_watch_every`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import Param

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import duration
from tidegate.examples import DEMO_JOB, DEMO_SPEC
from tidegate.runtime.jobs.config_file import region_names

START_DATE = datetime(2026, 1, 1)  # before any run: every DAG is manual or on a schedule from now on
JOB = DEMO_JOB
SPEC = f"jobs/{DEMO_SPEC}"  # relative to the checkout, as the deploy and planned-stop forms take it


def dag_defaults(
    *, retry_delay: timedelta = timedelta(seconds=30), paused: bool = False, start_date: datetime | None = START_DATE
) -> dict[str, Any]:
    """The ``@dag`` keywords every DAG shares: one retry of a failed task after ``retry_delay``
    (a task that must not retry says ``retries=0`` itself), no catch-up of missed runs — a
    procedure runs for the state of the platform now, never for a past interval — and on from
    the start unless ``paused``. A fresh Airflow creates DAGs paused, and a run triggered on a
    paused DAG waits queued: the failover the health watch asks for would never run, nor a
    deploy triggered from the command line. A DAG without a schedule runs only when triggered,
    so on is safe; a DAG whose schedule breaks things on purpose (the drill) passes ``paused``,
    and ``start_date`` None: Airflow runs the latest tick a scheduled DAG with a start date
    missed as soon as it is unpaused, so unpausing the weekly drill to run one by hand would
    also break a region at once with the form's defaults; without one, its first run waits
    for its next tick.

    Templated fields render as native objects: ``"{{ params.timeout_s }}"`` is the int the form
    holds, ``"{{ params.version or None }}"`` None for an empty field, so operators take typed
    values, as they do from XComArgs (``start.output["run_id"]``)."""
    return {
        "start_date": start_date,
        "catchup": False,
        "is_paused_upon_creation": paused,
        "render_template_as_native_obj": True,
        "default_args": {"retries": 1, "retry_delay": retry_delay},
    }


DRILL_SCHEDULE_ACTIVE = "TIDEGATE_DRILL_SCHEDULE_ACTIVE"
DRILL_KIND = "TIDEGATE_DRILL_KIND"
# tidegate.runtime.procedures.drills.KINDS and control_drill.KIND, without importing the
# runtime at every parse (tests/dags/test_dagbag.py holds them equal)
DRILL_KINDS = ("node-failure", "upgrade", "region-loss", "control-region-loss")
_YES, _NO = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def drill_schedule_active(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the weekly drill is created unpaused, so its schedule breaks a region every week
    without anyone unpausing it: ``TIDEGATE_DRILL_SCHEDULE_ACTIVE`` true (or 1, yes, on); unset
    or false, it is created paused and runs when unpaused or triggered. Only a DAG Airflow has
    not seen yet takes it: an existing DAG keeps the paused state it has."""
    value = env.get(DRILL_SCHEDULE_ACTIVE, "").strip().lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    raise ConfigError(
        f"{DRILL_SCHEDULE_ACTIVE}={env[DRILL_SCHEDULE_ACTIVE]!r} is neither true nor false",
        "set it to true to create the weekly drill unpaused, or false (the default) to create it paused",
    )


HEALTH_WATCH_EVERY = "TIDEGATE_HEALTH_WATCH_EVERY"
HEALTH_WATCH_DEFAULT = timedelta(minutes=5)
HEALTH_WATCH_SHORTEST = timedelta(seconds=10)


def health_watch_every(env: Mapping[str, str] = os.environ) -> timedelta:
    """How often the health watch assesses every job's active region: ``TIDEGATE_HEALTH_WATCH_EVERY``
    (a duration: ``30s``, ``2m``), five minutes when unset. A lost region is failed over at most
    this long after its loss is visible, so it bounds the time consumers read a dead region.
    Shorter than ten seconds is refused: each look is a DAG run, and Airflow queues a run per
    interval behind a slow one."""
    text = env.get(HEALTH_WATCH_EVERY, "").strip()
    if not text:
        return HEALTH_WATCH_DEFAULT
    every = duration(text, field=HEALTH_WATCH_EVERY)
    if every < HEALTH_WATCH_SHORTEST:
        raise ConfigError(
            f"{HEALTH_WATCH_EVERY}={text!r} is shorter than {HEALTH_WATCH_SHORTEST.seconds} s",
            f"give a duration of at least {HEALTH_WATCH_SHORTEST.seconds}s (the default is 5m)",
        )
    return every


def job_param() -> Param:
    return Param(JOB, type="string", title="Job name")


def region_param(
    title: str = "Region", *, default: str | None = None, first: tuple[str, ...] = (), description: str | None = None
) -> Param:
    """One of the configured regions, or one of the choices in ``first`` (``pair``,
    ``active``, …) that the DAG resolves itself; ``default`` None is the first region."""
    regions = region_names()
    return Param(default or regions[0], enum=[*first, *regions], title=title, description=description)


def regions_param() -> Param:
    """Some of the configured regions, all of them by default (a deploy's)."""
    regions = list(region_names())
    return Param(
        regions,
        type="array",
        items={"type": "string", "enum": regions},
        title="Regions",
        description="Where to start the job (both, for a paired job)",
    )


def drill_kind(env: Mapping[str, str] = os.environ) -> str:
    """The drill the weekly schedule runs (and the form offers first): ``TIDEGATE_DRILL_KIND``,
    ``node-failure`` when unset. A value that is no drill makes the DAG file fail to import,
    naming the drills there are."""
    value = env.get(DRILL_KIND, "").strip() or DRILL_KINDS[0]
    if value not in DRILL_KINDS:
        raise ConfigError(f"{DRILL_KIND}={value!r} is not a drill", f"use one of {', '.join(DRILL_KINDS)}")
    return value
