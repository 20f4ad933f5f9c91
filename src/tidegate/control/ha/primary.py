"""Which region holds the control database's primary, and which region's standby is synchronous.

A client of the multi-host URL reaches whichever server accepts writes without knowing where
it is. A procedure that loses a region on purpose must know: the control-region-loss drill
takes down the region that holds the primary, and only while the other region's standby is
synchronous (else commits acknowledged by the primary alone would go with it). Each region's
PostgreSQL names its region in :data:`~tidegate.control.ha.topology.REGION_SETTING`, and
Patroni names the synchronous standby in ``synchronous_standby_names``; both are settings any
user may read, so the platform's own login needs no monitoring role.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import text

from tidegate.control.ha.topology import REGION_SETTING

_KEYWORDS = {"FIRST", "ANY"}


@dataclass(frozen=True)
class Primary:
    """``region``: the region whose server accepted this connection, None when the control
    database is not the replicated one (SQLite, or a PostgreSQL without the setting);
    ``sync_standbys``: the members Patroni made synchronous, empty when none is."""

    region: str | None
    sync_standbys: tuple[str, ...] = ()


def primary_of(engine) -> Primary:
    """Ask the server ``engine`` writes to (the multi-host URL's primary)."""
    if engine.dialect.name != "postgresql":
        return Primary(None)
    with engine.connect() as c:
        region = c.execute(text("SELECT current_setting(:name, true)"), {"name": REGION_SETTING}).scalar()
        names = c.execute(text("SELECT current_setting('synchronous_standby_names')")).scalar()
    return Primary(region or None, standby_names(names or ""))


def standby_names(setting: str) -> tuple[str, ...]:
    """The member names in a ``synchronous_standby_names`` value: ``"west"``, ``west``,
    ``FIRST 1 ("west")``, ``ANY 1 (east, "west")``; ``*`` (any standby) names none."""
    names = []
    for quoted, bare in re.findall(r'"((?:[^"]|"")*)"|([A-Za-z_][A-Za-z0-9_$-]*)', setting):
        name = quoted.replace('""', '"') if quoted else bare
        if quoted or name.upper() not in _KEYWORDS:
            names.append(name)
    return tuple(names)
