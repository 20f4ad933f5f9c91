"""The release gate: a caught-up windowed job reads its input when a window can close.

A live job's micro-batch costs about the same fixed CPU whether it reads one second of events
or thirty (planning, a few Spark jobs, the commit), and a tumbling or hopping window releases
rows only when a unit's watermark crosses the next window end. Between those moments a batch
every trigger only moves state forward. With a stretch set (``TIDEGATE_TRIGGER_STRETCH``), the
gate holds the input back between them:

* after each batch, the engine reports how far in event time the nearest unit's watermark
  still has to move before the next window end (:func:`~tidegate.eventtime.windows.next_close_us`);
* a watermark moves with its input's clock once the job has caught up, so that distance is
  the time until the window can close; until then the gate holds, at most ``stretch`` after the
  last batch — the bound on how late a row the prediction missed (a unit that jumps ahead, a
  new unit) is written, and on how long audit rows and metrics wait;
* when the time comes, the trigger reads everything that arrived meanwhile in one batch.

The gate sits where the source plans a batch (the JVM reader's planner): while it holds, the
query sees no new data and runs no batch. What a batch reads, does and commits is unchanged —
it only reads more — so exactly-once, fencing and replay are those of any batch. A job that is
catching up, a per-event query, a sliding or session window, later steps, a join and a
percentile watermark are never held: their rows are due as events arrive.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tidegate.eventtime.windows import HoppingWindow, TumblingWindow
from tidegate.jobspec.model import JobSpec


def release_window(spec: JobSpec) -> TumblingWindow | HoppingWindow | None:
    """The window whose ends alone release the job's rows, or None when rows are due otherwise."""
    held_only_by_window = not (
        spec.steps or spec.join or spec.analytics or spec.references or spec.watermark_percentile is not None
    )
    if held_only_by_window and isinstance(spec.window, TumblingWindow | HoppingWindow):
        return spec.window
    return None


class ReleaseGate:
    """Whether the next trigger may read new input (see the module docstring).

    ``engage`` once the job has caught up; :meth:`after_batch` after each batch with the
    engine's distance to the next close; :meth:`admits` at each trigger's planning. A batch and
    its planning come one after the other in one query, but on different threads."""

    def __init__(self, stretch_s: float, clock: Callable[[], float] = time.time) -> None:
        if stretch_s <= 0:
            raise ValueError("a release gate needs a positive stretch")
        self.stretch_s = stretch_s
        self.clock = clock
        self._lock = threading.Lock()
        self._engaged = False
        self._due = 0.0  # wall time from which the input is read again
        self.held_triggers = 0  # triggers the gate held, for the driver's log

    def engage(self) -> bool:
        """Hold from now on; True when it did not hold before."""
        with self._lock:
            newly, self._engaged = not self._engaged, True
        return newly

    def after_batch(self, next_close_in_us: int | None, batch_seconds: float) -> None:
        """A batch that began ``batch_seconds`` ago (its input read up to then) left the nearest
        window end ``next_close_in_us`` ahead of its unit's watermark (None: no unit known)."""
        now = self.clock()
        read_at = now - batch_seconds
        due = now if next_close_in_us is None else read_at + next_close_in_us / 1e6
        with self._lock:
            self._due = min(due, now + self.stretch_s)

    def admits(self) -> bool:
        with self._lock:
            if not self._engaged or self.clock() >= self._due:
                return True
            self.held_triggers += 1
            return False
