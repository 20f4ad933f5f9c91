"""The spellings ``tidegate`` had before every command became ``tidegate <noun> <verb>``: each
still runs its command, for one more release, after one line on stderr that names the new one.

They are rewritten on the command line before it is parsed rather than registered as hidden
parsers: on Python 3.11 a sub-command registered with ``help=argparse.SUPPRESS`` is still
listed by ``--help`` (as ``==SUPPRESS==``) and in the invalid-choice error, and ``demo`` is
both an old command and a new group. So ``--help`` and docs/reference/cli.md (generated from
the parser) show one taxonomy, and an old spelling's errors and usage name the new one.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from typing import TextIO

REMOVED_IN = "0.9"

# old words → new words; a one-word new spelling renames a whole group (its verbs are unchanged)
RENAMED: Mapping[tuple[str, ...], tuple[str, ...]] = {
    ("hub",): ("event-log",),
    ("failover",): ("job", "failover"),
    ("batch-reference",): ("job", "batch-reference"),
    ("read",): ("output", "read"),
    ("compact",): ("output", "compact"),
    ("clean",): ("output", "clean"),
    ("check",): ("output", "check"),
    ("check-service",): ("output", "check-service"),
    ("test-query",): ("query", "test"),
    ("policy-check",): ("query", "policy-check"),
    ("drills",): ("drill", "history"),
    ("supervise",): ("region", "supervise"),
    ("demo",): ("demo", "run"),  # not before one of the demo group's own verbs or --help
}

_HELP = ("-h", "--help")


def modernize(argv: list[str], groups: Mapping[str, Collection[str]], err: TextIO | None = None) -> list[str]:
    """``argv`` in the current spelling; when it was an old one, one line saying so on ``err``
    (default stderr). ``groups``: each command group's verbs, which an old command spelled
    like its new group (``demo``) must not swallow."""
    for old, new in RENAMED.items():
        if tuple(argv[: len(old)]) != old:
            continue
        rest = argv[len(old) :]
        following = rest[0] if rest else None
        if new[0] == old[0] and (following in groups.get(new[0], ()) or following in _HELP):
            return argv  # `tidegate demo run`, `tidegate demo --help`: the new group itself
        renamed_group = len(new) == 1
        verb = [following] if renamed_group and following and not following.startswith("-") else []
        shown_old, shown_new = " ".join([*old, *verb]), " ".join([*new, *verb])
        print(
            f"`tidegate {shown_old}` is deprecated; use `tidegate {shown_new}` (removed in {REMOVED_IN})",
            file=err or sys.stderr,
        )
        return [*new, *rest]
    return argv
