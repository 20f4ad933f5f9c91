"""How far a lineage's output is final: the cut a successor takes over from.

A replay in a fresh lineage takes over from a cut ``T``: the earlier lineage's output is
read up to ``T``, the new one's after it (:mod:`tidegate.runtime.outputs.reader`). Any ``T`` at or
before the point where the earlier lineage's output is final gives a gapless, duplicate-
free union; the highest such point is the lineage's last committed frontier: every window
ending at or before it is final (with per-substream watermarks, the frontier is their
floor, the arrival term, so it holds for every key).

A window is final once the watermark reaches its close (:mod:`tidegate.eventtime.windows`):
``end + 1 µs`` for windows that include their end — sliding ones, and by default tumbling,
hopping and session ones (Stream Analytics' edges) — and the end itself for ``[start, end)``
ones (``edges: start_inclusive``). So at frontier ``W`` output is final through
``W − 1 µs``, or through ``W`` for ``[start, end)`` windows (:func:`final_through_us`).

An analytic row (LAG, LAST, ISFIRST) is final once the watermark passes its event's time,
like a sliding window ending there: through ``W − 1 µs``; so is every per-event row. Jobs
with neither windows nor analytic functions still hand over by input position — the end
offsets of the last batch whose output is visible — but their rows below the cut are final
too, so a completeness check compares them by time as it does analytic rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from tidegate.errors import TidegateError
from tidegate.eventtime.windows import Window, close_delay_us
from tidegate.jobspec import JobSpec
from tidegate.lineage.committed import last_output_batch, last_state
from tidegate.lineage.layout import JobPaths
from tidegate.lineage.offsets import batch_offsets
from tidegate.storage.store import LOCAL, Store


@dataclass(frozen=True)
class EmittedCut:
    """Windows ending at or before ``through_us`` were emitted (or had no events);
    ``None``: nothing is known to be final."""

    through_us: int | None
    batch_id: int | None = None  # the last batch whose output is visible
    end_offsets: dict[int, int] | None = None  # its end offsets: where a per-event job resumes

    def describe(self) -> str:
        from tidegate.eventtime.durations import format_time_us

        if self.through_us is None:
            return "nothing emitted yet"
        return f"output final through {format_time_us(self.through_us)}"


def final_through_us(window: Window | None, frontier_us: int, floor_us: int | None = None) -> int:
    """The latest window end whose output is final once the watermark reached ``frontier_us``.

    At frontier 12:02:00 a tumbling ``(12:01, 12:02]`` (or a sliding one) still takes an
    event at 12:02:00 and closes 1 µs later: through 12:01:59.999999. With ``edges:
    start_inclusive`` ``[12:01, 12:02)`` is final: through 12:02:00. ``window`` None (events
    emitted as judged): through the frontier.

    ``floor_us``: the lineage's own output start; its predecessors emitted everything at or
    before it, so the cut never falls below it.
    """
    through = frontier_us - (close_delay_us(window) if window is not None else 0)
    return through if floor_us is None else max(through, floor_us)


def job_final_through_us(spec: JobSpec, frontier_us: int, floor_us: int | None = None) -> int:
    """:func:`final_through_us` for ``spec``'s output: its windows, or its per-event rows —
    analytic, join or plain (a row at ``S`` is final once ``S < W``: a late event may still be
    adjusted to ``W`` itself; through ``W − 1 µs``); with steps, the emitted step's."""
    spec = spec.emitted
    if spec.window is None:  # per-event rows: a row at S is final once S < W
        through = frontier_us - 1
        return through if floor_us is None else max(through, floor_us)
    return final_through_us(spec.window, frontier_us, floor_us)


def emitted_cut(root: PurePath, spec: JobSpec, floor_us: int | None = None, store: Store = LOCAL) -> EmittedCut:
    """The cut of the lineage at ``root`` (a path of ``store``) for ``spec`` (the spec that lineage ran).

    ``floor_us``: the lineage's own output start; nothing at or before it was emitted by it,
    but it was by its predecessors, so the cut never falls below it.
    """
    paths = JobPaths(root, store)
    frontier = last_state(paths).get("frontier_us")
    through = floor_us if frontier is None else job_final_through_us(spec, int(frontier), floor_us)
    last_batch = last_output_batch(paths)
    offsets = _end_offsets(paths, last_batch) if last_batch is not None else None
    return EmittedCut(through, last_batch, offsets)


def _end_offsets(paths: JobPaths, batch_id: int) -> dict[int, int] | None:
    try:
        _, end = batch_offsets(paths.checkpoint, batch_id, paths.store)
    except TidegateError:  # the offset log was purged or never written: the caller falls back
        return None
    return dict(end.offsets)
