"""Mergeable aggregates: the window aggregates whose value can be kept as parts and merged.

A window's aggregates are Spark SQL (any aggregate on the job spec's allowlist,
:mod:`tidegate.jobspec.functions`), computed over the events a window holds. Some of them
can instead be kept per open (window, group) as a few **parts** that merge however the
stream is cut — a count, a sum, a minimum, a maximum — so the window stage keeps one row
per window rather than its events (:mod:`tidegate.spark.pipeline.window_partials`).

Each such aggregate is declared once here, as a :class:`Mergeable` under :func:`register`:
its name, the parts it keeps, how its value reads them, and what it may be called on. The
window stage reads the declaration to recognise a call, build each event's parts, merge
them and compute the value in Spark SQL; the functions below are the same rules over
plain Python values — the pure core the tests hold Spark to. Nothing here imports pyspark.

Parts (:data:`PART_KINDS`), each of one event and how many merge:

* ``n``: 1 per event whose value is not NULL (every event for ``count(*)``); merged by sum;
* ``sum``: the value in the type the sum adds in; merged by sum (NULLs skipped);
* ``min`` / ``max``: the value; merged by min / max (NULLs skipped).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PART_KINDS = ("n", "sum", "min", "max")
MERGE = {"n": "sum", "sum": "sum", "min": "min", "max": "max"}  # each part kind's merge, a Spark SQL aggregate


@dataclass(frozen=True)
class Mergeable:
    """One mergeable aggregate, ``name(column)`` (or ``name(*)`` when ``star``)."""

    name: str  # lower case, as Spark SQL names it: count, sum, …
    parts: tuple[str, ...]  # the part kinds it keeps, in the state's column order
    value: tuple[str, ...]  # (part,): that part; ("sum", "n"): their ratio, NULL when n is 0
    star: bool = False  # may be called on * (every event counts)
    sum_type: str | None = None  # the type its sum part adds in; None: the column's (int → bigint)

    def __post_init__(self) -> None:
        assert set(self.parts) <= set(PART_KINDS) and set(self.value) <= set(self.parts), self
        assert len(self.value) == 1 or self.value == ("sum", "n"), self

    @property
    def needs_sum_type(self) -> bool:
        """Its column must be a number that adds up exactly enough (see window_partials)."""
        return "sum" in self.parts


_REGISTRY: dict[str, Mergeable] = {}


def register(aggregate: Mergeable) -> Mergeable:
    if aggregate.name in _REGISTRY and _REGISTRY[aggregate.name] != aggregate:
        raise ValueError(f"mergeable aggregate {aggregate.name} is registered already")
    _REGISTRY[aggregate.name] = aggregate
    return aggregate


def unregister(name: str) -> None:
    _REGISTRY.pop(name.lower(), None)


def lookup(name: str) -> Mergeable | None:
    """The mergeable aggregate Spark SQL calls ``name`` (any case), or None."""
    return _REGISTRY.get(name.lower())


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


# -- the same rules over plain values (one window's events) ------------------------------
_FOLDS: dict[str, Callable[[list[Any]], Any]] = {"sum": sum, "min": min, "max": max}  # a part of non-NULL values


def parts_of(aggregate: Mergeable, values: Sequence[Any], star: bool = False) -> dict[str, Any]:
    """The parts of some events' values; ``star``: called on ``*``, every event counts."""
    given = [v for v in values if v is not None]
    out: dict[str, Any] = {}
    for kind in aggregate.parts:
        if kind == "n":
            out[kind] = len(values) if star else len(given)
        elif not given:
            out[kind] = None
        else:
            out[kind] = _FOLDS[kind](given)
    return out


def merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two sets of parts of one aggregate merged: as if their events had been one."""
    out = {}
    for kind in a:
        x, y = a[kind], b[kind]
        out[kind] = (
            x if y is None else y if x is None else {"sum": x + y, "min": min(x, y), "max": max(x, y)}[MERGE[kind]]
        )
    return out


def value_of(aggregate: Mergeable, parts: Mapping[str, Any]) -> Any:
    """The aggregate's value from merged parts."""
    if aggregate.value == ("sum", "n"):
        return parts["sum"] / float(parts["n"]) if parts["n"] > 0 else None
    return parts[aggregate.value[0]]


# -- the built-in ones ---------------------------------------------------------------------
register(Mergeable("count", parts=("n",), value=("n",), star=True))
register(Mergeable("sum", parts=("sum",), value=("sum",)))
register(Mergeable("min", parts=("min",), value=("min",)))
register(Mergeable("max", parts=("max",), value=("max",)))
register(Mergeable("avg", parts=("sum", "n"), value=("sum", "n"), sum_type="double"))
