"""A window as a spec writes it: its fields per kind, its normal form and its one-line text.

:func:`window_dict` is what ``to_dict`` writes back (``us=False``: durations in their shortest
form) and what the fingerprint hashes (``us=True``: microseconds, an offset modulo its period);
:func:`window_text` is how ``describe()`` names a window. The job (:mod:`tidegate.jobspec.model`)
and its steps (:mod:`tidegate.jobspec.step_spec`) write their windows through them alike.
"""

from __future__ import annotations

from typing import Any

from tidegate.eventtime.durations import format_duration
from tidegate.eventtime.sessions import EVERY_CHECK_POINT
from tidegate.eventtime.windows import START_INCLUSIVE, HoppingWindow, SessionWindow, TumblingWindow, Window

# The durations each window kind takes, as a spec writes them (``window.size``…) and as
# ``to_dict`` and the fingerprint write them back.
WINDOW_FIELDS = {
    "tumbling": ("size", "offset"),
    "hopping": ("size", "hop", "offset"),
    "sliding": ("size",),
    "session": ("gap", "max_duration"),
}
# The other settings each window kind takes: ``edges`` (semantics §3) and a session's ``cut``,
# written out by ``to_dict`` and hashed by the fingerprint, so a changed convention is a
# changed query.
WINDOW_OPTIONS = {"tumbling": ("edges",), "hopping": ("edges",), "sliding": (), "session": ("edges", "cut")}


def window_text(window: Window) -> str:
    """The window in a few words: ``tumbling 1h``, ``hopping 5m every 1m offset 30s``, ``session (gap 2m, max 30m)``."""
    if isinstance(window, SessionWindow):
        cut = ", cut at every check point" if window.cut == EVERY_CHECK_POINT else ""
        return f"session (gap {format_duration(window.gap_us)}, max {format_duration(window.max_duration_us)}{cut})"
    text = f"{window.kind} {format_duration(window.span_us)}"
    text += f" every {format_duration(window.hop_us)}" if isinstance(window, HoppingWindow) else ""
    offset_us = getattr(window, "offset_us", 0)  # tumbling and hopping windows have one
    text += f" offset {format_duration(offset_us)}" if offset_us else ""
    return text + (" [start, end)" if window.edges == START_INCLUSIVE else "")


def window_dict(window: Window | None, *, us: bool) -> dict[str, Any] | None:
    """The window's fields: ``us=True`` as the fingerprint hashes them, else as a spec writes them."""
    if window is None:
        return None
    fields: dict[str, Any] = {"kind": window.kind}
    for name in WINDOW_FIELDS[window.kind]:
        value = getattr(window, f"{name}_us")
        if us and name == "offset":  # offsets one period apart give the same windows
            assert isinstance(window, (TumblingWindow, HoppingWindow))  # the kinds with an offset (WINDOW_FIELDS)
            value %= window.hop_us if isinstance(window, HoppingWindow) else window.size_us
        fields[name] = value if us else format_duration(value)
    for name in WINDOW_OPTIONS[window.kind]:
        fields[name] = getattr(window, name)
    if us and fields.get("cut") == EVERY_CHECK_POINT:
        # hashed as before sessions had a cut: the rule they all followed, so a job that keeps it
        # keeps its fingerprint (and its checkpoint); the new default changes every other one's
        del fields["cut"]
    return fields
