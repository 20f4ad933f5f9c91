"""When a (re)started job has caught up: one rule for the driver that records it, the
rehearsal that stops on it and the model that predicts it, so a measured catch-up and its
estimates end at the same point (semantics §6).

After each micro-batch the driver counts the input it left unread (the log's end past the
batch's end). The job has caught up after the first batch that

* leaves less than ``rate × slack`` unread: it runs within a few seconds of its input; or
* leaves at least :data:`SETTLED` of what the batch before it left, where the per-batch
  limit did not cut it short: the backlog is gone. A batch reads everything that arrived
  before it began, so what it leaves is what arrived while it ran; once that stops
  shrinking, reading less no longer makes a batch shorter — it takes what its fixed cost
  takes under the machine's load, not what a backlog takes.

The slack alone is not enough on a loaded machine: a freshly started job's batches can run
longer than the slack for minutes while it keeps up with its input, and the slack would count
it caught up only when a batch first ran shorter — long after its backlog was read.
"""

from __future__ import annotations

CAUGHT_UP_SLACK_S = 5.0  # what arrives in this long may be left unread
SETTLED = 0.9  # a batch that leaves this much of what the one before left did not read a backlog


def caught_up(
    left: float, left_before: float | None, rate_eps: float, *, capped: bool = False, slack_s: float = CAUGHT_UP_SLACK_S
) -> str | None:
    """Why the batch that left ``left`` events unread ends the catch-up, or None if it does not.

    ``left_before``: what the run's batch before it left (None for a run's first batch);
    ``capped``: the batch read as many events as the per-batch limit allows, so it may have
    left a backlog behind whatever its size."""
    if left <= rate_eps * slack_s:
        return f"{left:,.0f} events left unread, within {slack_s:g} s of input"
    if capped or left_before is None or left < SETTLED * left_before:
        return None
    return (
        f"the backlog is gone: {left:,.0f} events left unread, what arrived while the batch ran, "
        f"no fewer than the {left_before:,.0f} the batch before left"
    )
