"""How much windowed work one spec may ask for: windows per event and windows held open.

A hopping window of ``size: 7d, hop: 1us`` puts each event in 6·10¹¹ windows, and a tumbling
window of one second with a week of out-of-order tolerance keeps 600,000 windows open per
key. Neither is a mistake Spark would report: the job would simply never keep up, or run its
executors out of memory. So a loaded spec is held to :class:`~tidegate.jobspec.limits.SpecLimits`:

* **windows per event** — ``⌈size / hop⌉`` of a hopping window (a tumbling window is 1);
* **open windows per key** — ``⌈(size + the lateness the job waits for) / step⌉``, the lateness
  being its out-of-order and late-arrival tolerances together (semantics §2), the step
  its hop (tumbling: its size). Sliding and session windows open one window per event or per
  burst, bounded by the events themselves.

Each error names the field, the figure and the limit; an operator can change each limit
(:func:`~tidegate.jobspec.limits.limit_fix`). How long an interval may be is the semantics',
not a limit of the operator's: every window, session (gap and ``max_duration``), analytic span
(``LIMIT DURATION``, the ``ISFIRST`` period) and join bound at most 7 days
(:data:`tidegate.eventtime.windows.MAX_WINDOW_US`, checked where each is read), the
tolerances at most 20 days (:mod:`tidegate.eventtime.policy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_duration
from tidegate.eventtime.windows import HoppingWindow, TumblingWindow, Window
from tidegate.jobspec.limits import SpecLimits, limit_fix

if TYPE_CHECKING:
    from tidegate.eventtime.policy import TimePolicy
    from tidegate.jobspec.model import JobSpec


def check_window_cost(spec: JobSpec, limits: SpecLimits) -> None:
    """Refuse ``spec`` where its windows pass ``limits``."""
    if spec.window is not None:
        _window(spec.window, "window", spec.policy, limits)
    for step in spec.steps:
        if step.window is not None:  # a per-event step has none
            _window(step.window, f"steps.{step.name}.window", None, limits)


def _window(window: Window, where: str, policy: TimePolicy | None, limits: SpecLimits) -> None:
    if isinstance(window, HoppingWindow):
        size, step = window.size_us, window.hop_us
    elif isinstance(window, TumblingWindow):
        size, step = window.size_us, window.size_us
    else:  # sliding and session windows: one per event or per burst, bounded by the events
        return
    per_event = -(-size // step)
    if per_event > limits.windows_per_event:
        raise ConfigError(
            f"{where}: each event falls in {per_event:,} windows (size {format_duration(size)} / hop"
            f" {format_duration(step)}), more than {limits.windows_per_event:,}",
            f"make the hop at least {format_duration(-(-size // limits.windows_per_event))}, or the window"
            f" smaller; " + limit_fix("windows_per_event"),
        )
    if policy is None:
        return
    waits = policy.out_of_order_tolerance_us + policy.late_arrival_tolerance_us
    held = -(-(size + waits) // step)
    if held > limits.open_windows_per_key:
        raise ConfigError(
            f"{where}: each key could hold {held:,} windows open at once (size {format_duration(size)} plus the"
            f" {format_duration(waits)} the policy waits for late and out-of-order events, every"
            f" {format_duration(step)}), more than {limits.open_windows_per_key:,}",
            "make the window or its hop larger, or the policy's tolerances shorter; "
            + limit_fix("open_windows_per_key"),
        )
