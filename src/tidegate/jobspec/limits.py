"""The load-time limits on what one job spec may make the platform do, and the operator's say.

A spec is written by a job author, not an administrator, so what it may cost is bounded when
it loads: how much one expression builds for one event (:mod:`tidegate.jobspec.expression_cost`),
how much work a regular expression or an edit distance may take
(:mod:`tidegate.jobspec.regex_cost`), how many windows one event falls in and how many stay
open per key (:mod:`tidegate.jobspec.window_cost`). Each limit has a default that every example
job keeps well within; an operator raises or lowers one with ``TIDEGATE_LIMIT_<NAME>`` (e.g.
``TIDEGATE_LIMIT_WINDOWS_PER_EVENT=5000``), read where the spec is loaded. A job author can not
change them: they are the platform's settings, never a spec's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from tidegate.jobspec.numbers import whole_number

ENV_PREFIX = "TIDEGATE_LIMIT_"
_LARGEST = 10**15  # beyond any machine: an operator who means "no limit" writes a large number


@dataclass(frozen=True)
class SpecLimits:
    """Every limit, in the units its name says (see docs/reference/jobspec.md, 'Limits')."""

    # keys and values in one spec, all sections together (the examples hold at most a few hundred)
    spec_values: int = 5_000
    # characters of one expression (a long CASE over every device type is a few thousand)
    expression_chars: int = 20_000
    # characters or elements one call of a size-bearing builder (repeat, lpad, array_repeat,
    # sequence, a format width) may make from its literal count
    built_per_call: int = 10_000
    # characters or elements an expression may build beyond what the event brings, all nesting
    # composed (repeat(repeat('a', 10000), 16) is 160,000)
    built_per_expression: int = 1_000_000
    # times an expression may copy the event's own text (concat(x, x) is 2, to_json(x) up to 6)
    copies_of_the_event: int = 64
    # cells of an edit distance (levenshtein of texts of n and m characters costs n·m)
    edit_distance_cells: int = 10_000_000
    # rows one event may give through cross_apply (an event with more goes to quarantine)
    rows_per_event: int = 10_000
    # windows one event falls in (a hopping window's size / hop)
    windows_per_event: int = 1_000
    # windows one key may hold open at once: (size + the lateness the policy waits for) / hop
    open_windows_per_key: int = 100_000


def spec_limits(env: Mapping[str, str] | None = None) -> SpecLimits:
    """The limits in force: the defaults, with each ``TIDEGATE_LIMIT_<NAME>`` the operator set."""
    env = os.environ if env is None else env
    given: dict[str, int] = {}
    for f in fields(SpecLimits):
        key = ENV_PREFIX + f.name.upper()
        text = env.get(key)
        if text is None or not text.strip():
            continue
        given[f.name] = whole_number(text.replace("_", ""), key, 1, _LARGEST, f.name.replace("_", " "))
    return SpecLimits(**given)


def limit_fix(name: str) -> str:
    """What an operator sets to change the limit ``name`` (a field of :class:`SpecLimits`)."""
    return f"the platform's operator can change the limit with {ENV_PREFIX}{name.upper()}"
