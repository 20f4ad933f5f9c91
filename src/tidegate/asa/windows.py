"""Stream Analytics' window functions and time units in the spec's terms.

``TumblingWindow(minute, 10)`` is ``{kind: tumbling, size: 10m}``: windows ``(N·size + offset,
(N+1)·size + offset]``, as both define them. ``Offset(millisecond, -1)`` — Stream Analytics'
way to make a window hold its start — is ``edges: start_inclusive``; any other offset is the
spec's ``offset``. Each function takes its size in one unit and whole numbers, as Stream
Analytics' do, or ``Duration(unit, n)`` / ``Offset(unit, n)`` calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

# Stream Analytics' time units (and their abbreviations) as the spec's duration units
UNITS = {
    "day": "d", "dd": "d", "d": "d",
    "hour": "h", "hh": "h",
    "minute": "m", "mi": "m", "n": "m",
    "second": "s", "ss": "s", "s": "s",
    "millisecond": "ms", "ms": "ms",
    "microsecond": "us", "mcs": "us",
}  # fmt: skip
WINDOW_FUNCTIONS = ("tumblingwindow", "hoppingwindow", "slidingwindow", "sessionwindow")
UNSUPPORTED_WINDOWS = {
    "snapshotwindow": "a tumbling window of the smallest unit is not the same: it has no Tidegate form",
    "windows": "one job or step per window: import each window's query on its own",
}

Refuse = Callable[[exp.Expr, str, str], Exception]  # (node, problem, fix) → the error to raise


def window_name(node: exp.Expr) -> str | None:
    """The lower-case name of the window function ``node`` calls (``SessionWindow(…) OVER (…)``
    included), or None when it is no window function."""
    call = node.this if isinstance(node, exp.Window) else node
    if isinstance(call, exp.Anonymous):
        name = str(call.this).lower()
        if name in WINDOW_FUNCTIONS or name in UNSUPPORTED_WINDOWS:
            return name
    return None


def window_spec(node: exp.Expr, refuse: Refuse) -> dict[str, Any]:
    """The spec's ``window`` for a window function call."""
    name = window_name(node)
    call = node.this if isinstance(node, exp.Window) else node
    if name in UNSUPPORTED_WINDOWS:
        raise refuse(node, f"{call.this}(…) is not supported", UNSUPPORTED_WINDOWS[str(name)])
    args = list(call.expressions)
    if args and _call_name(args[0]) == "duration":  # TumblingWindow(Duration(hour, 1), Offset(…))
        sizes = [_duration(a, refuse) for a in args if _call_name(a) == "duration"]
        offsets = [a for a in args if _call_name(a) == "offset"]
    else:
        if not args:
            raise refuse(node, f"{call.this}() has no unit", f"write e.g. {call.this}(minute, 1)")
        unit = _unit(args[0], refuse)
        sizes = [_number(a, unit, refuse) for a in args[1:] if _call_name(a) != "offset"]
        offsets = [a for a in args[1:] if _call_name(a) == "offset"]
        if name in ("tumblingwindow", "hoppingwindow") and len(sizes) == (2 if name == "tumblingwindow" else 3):
            sizes, offsets = sizes[:-1], [sizes[-1]]  # a trailing number is the offset, in the same unit
    spec: dict[str, Any] = {"kind": str(name).removesuffix("window")}
    want = {"tumblingwindow": 1, "hoppingwindow": 2, "slidingwindow": 1, "sessionwindow": 2}[str(name)]
    if len(sizes) != want:
        forms = {
            "tumblingwindow": "TumblingWindow(unit, size[, offset])",
            "hoppingwindow": "HoppingWindow(unit, size, hop[, offset])",
            "slidingwindow": "SlidingWindow(unit, size)",
            "sessionwindow": "SessionWindow(unit, timeout, maximum duration)",
        }
        raise refuse(node, f"{call.this} takes {want} sizes here", f"write {forms[str(name)]}")
    if name == "sessionwindow":
        spec |= {"gap": sizes[0], "max_duration": sizes[1]}
    else:
        spec["size"] = sizes[0]
        if name == "hoppingwindow":
            spec["hop"] = sizes[1]
    for offset in offsets:
        if name == "slidingwindow" or name == "sessionwindow":
            raise refuse(offset, f"{call.this} takes no offset", "remove the offset")
        value = offset if isinstance(offset, str) else _duration(offset, refuse)
        if value == "-1ms":
            spec["edges"] = "start_inclusive"  # Offset(millisecond, -1): the window holds its start
        elif value not in ("0s", "0m", "0h", "0d", "0ms", "0us"):
            spec["offset"] = value
    return spec


def _call_name(node: Any) -> str | None:
    return str(node.this).lower() if isinstance(node, exp.Anonymous) else None


def _duration(node: exp.Expr, refuse: Refuse) -> str:
    """``Duration(unit, n)`` or ``Offset(unit, n)`` as a spec duration."""
    args = list(node.expressions)
    if len(args) != 2:
        raise refuse(node, f"{node.this}(…) takes a unit and a number", f"write {node.this}(minute, 5)")
    return _number(args[1], _unit(args[0], refuse), refuse)


def _unit(node: exp.Expr, refuse: Refuse) -> str:
    name = node.name.lower() if isinstance(node, (exp.Column, exp.Var, exp.Identifier)) else ""
    if name not in UNITS:
        raise refuse(
            node, f"{node.sql()!r} is not a time unit", "write day, hour, minute, second, millisecond or microsecond"
        )
    return UNITS[name]


def _number(node: exp.Expr, unit: str, refuse: Refuse) -> str:
    sign = ""
    if isinstance(node, exp.Neg):
        sign, node = "-", node.this
    if not (isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()):
        raise refuse(node, f"{node.sql()!r} is not a whole number", "sizes are whole numbers of the unit")
    return f"{sign}{int(node.this)}{unit}"
