"""Is a run's driver still there? Decided here, once, for the controller and the Tidegate page.

A run recorded live (starting, running, stopping) is alive while the job's lease
``job:<job>:<region>`` is held by ``run-<id>`` and has not expired on the lease clock and —
when its driver runs on the asking host and has claimed the run — while that process
exists. Otherwise the driver stopped without saying so (killed, its host died, paused past
its lease): the run is *lost*. A run recorded as ended is what its row says. A start records
its run before it takes the lease for it (the lease names the run): a run starting for less
than :data:`START_GRACE_S` without the lease is still being started, not lost.

:func:`judge_run` is pure: the caller reads the rows, the clocks and the process table, and
decides whether to record a lost run (the controller's ``reconcile`` does; the page never
writes). Nothing here imports the database or looks at processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class RunState(StrEnum):
    """What a job's run in a region is; a ``str``, so ``state == "running"`` keeps working."""

    NEVER = "never"  # no run in the region yet (never recorded on a run row)
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"
    LOST = "lost"
    REFUSED = "refused"  # a start that lost the race for the job's lease: it never ran


LIVE = (RunState.STARTING, RunState.RUNNING, RunState.STOPPING)
START_GRACE_S = 30.0  # a start takes its run's lease right after recording the run


@dataclass(frozen=True)
class Verdict:
    state: RunState
    detail: str | None  # the run row's own detail, or — judged lost — why and its last heartbeat
    why: str | None = None  # judged lost: what gave it away

    @property
    def alive(self) -> bool:
        return self.state in LIVE

    @property
    def newly_lost(self) -> bool:
        """Judged lost while its row still says live: a transition someone must record."""
        return self.why is not None


def judge_run(
    run: Any, lease: Any | None, *, now: float, lease_now: float | None = None, process_alive: bool | None = None
) -> Verdict:
    """``run``: a run row (``id``, ``status``, ``status_detail``, ``heartbeat_at``); ``lease``:
    the job's lease row (``holder``, ``expires_at``) or None; ``now``: wall-clock seconds (the
    heartbeat's age); ``lease_now``: now on the clock leases expire by (default ``now``);
    ``process_alive``: whether the driver's process runs, when the asker can tell (see
    :func:`local_process_alive`), else None."""
    recorded = RunState(run.status)
    if recorded not in LIVE:
        return Verdict(recorded, run.status_detail)
    lease_now = now if lease_now is None else lease_now
    if _being_started(run, lease, lease_now):
        return Verdict(recorded, run.status_detail)
    why = _gone(run, lease, lease_now, process_alive)
    if why is None:
        return Verdict(recorded, run.status_detail)
    heartbeat = "never" if run.heartbeat_at is None else f"{now - run.heartbeat_at:.0f} s ago"
    return Verdict(RunState.LOST, f"{lost_because(why)}; last heartbeat {heartbeat}", why)


def lost_because(why: str) -> str:
    return f"the driver stopped without saying so: {why}"


def _being_started(run: Any, lease: Any | None, lease_now: float) -> bool:
    """A run just recorded by a start that has not taken its lease yet (or is being refused it)."""
    requested = getattr(run, "requested_at", None)
    mine = lease is not None and lease.holder == f"run-{run.id}"
    return (
        run.status == RunState.STARTING and not mine and requested is not None and lease_now - requested < START_GRACE_S
    )


def _gone(run: Any, lease: Any | None, lease_now: float, process_alive: bool | None) -> str | None:
    if lease is None:
        return "its lease is gone"
    if lease.holder != f"run-{run.id}":
        return f"its lease is held by {lease.holder}"
    if lease.expires_at <= lease_now:
        return f"its lease expired {lease_now - lease.expires_at:.0f} s ago"
    if process_alive is False:
        return f"its process {run.pid} on {run.host} is gone"
    return None


def local_process_alive(run: Any, host: str, driver_alive: Callable[[Any], bool]) -> bool | None:
    """Whether the driver of ``run`` still runs, asked on ``host`` — None when nobody here can
    tell: the run is not live, runs elsewhere, or its driver has not claimed it yet (the PID
    may be a launcher's). ``driver_alive(run)`` looks at the process the row records
    (:func:`tidegate.runtime.jobs.process.driver_alive`: a PID alone is not an identity)."""
    if run.status not in LIVE or run.host != host or not run.pid or run.started_at is None:
        return None
    return driver_alive(run)
