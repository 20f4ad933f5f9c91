"""Which snapshot an event joins: the golden transcript through the pure core, and the edges.

Snapshots are valid from their time until the next one's, ``[valid_from_i, valid_from_(i+1))``::

    snapshot      12:00 ─────────── 12:30 ─────────── 13:00 ──────────→
    event  11:59 │12:00        12:29│12:30        12:59│13:00
    joins  none  │12:00        12:00│12:30        12:30│13:00
"""

from __future__ import annotations

import pytest
import yaml

from support import TRANSCRIPTS
from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us
from tidegate.eventtime.reference import (
    NO_SNAPSHOT,
    effective_start_us,
    snapshot_folder_name,
    snapshot_index,
    snapshot_time_us,
)

GOLDEN = yaml.safe_load((TRANSCRIPTS / "reference_golden.yaml").read_text())


def at(hhmm: str) -> int:
    return parse_time_us(f"{GOLDEN['date']}T{hhmm}:00Z")


def golden_left_rows() -> list[list]:
    """The left outer join of the transcript, computed by the core: [event, site, snapshot]."""
    starts = sorted(GOLDEN["snapshots"], key=at)
    events = sorted(GOLDEN["events"], key=lambda e: (e[3], at(e[2])))  # log partition, then offset
    rows = []
    for event_id, device, time, _ in events:
        index = snapshot_index([at(s) for s in starts], [at(time)])[0]
        snapshot = None if index == NO_SNAPSHOT else starts[index]
        sites = sorted(site for d, site in GOLDEN["snapshots"][snapshot] if d == device) if snapshot else []
        rows += [[event_id, site, snapshot] for site in sites] or [[event_id, None, snapshot]]
    return rows


def test_the_core_gives_the_golden_transcripts_rows():
    assert golden_left_rows() == GOLDEN["left"]


@pytest.mark.parametrize("time, expected", [
    ("11:59", NO_SNAPSHOT),  # before the first snapshot
    ("12:00", 0),            # exactly on a valid-from time: that snapshot, not the one before
    ("12:29", 0),
    ("12:30", 1),
    ("12:59", 1),
    ("13:00", 2),
    ("23:59", 2),            # the last snapshot has no end
])  # fmt: skip
def test_an_event_joins_the_snapshot_whose_validity_holds_its_time(time, expected):
    assert snapshot_index([at("12:00"), at("12:30"), at("13:00")], [at(time)])[0] == expected


def test_a_microsecond_before_a_boundary_is_still_the_earlier_snapshot():
    assert list(snapshot_index([at("12:00"), at("12:30")], [at("12:30") - 1, at("12:30")])) == [0, 1]


def test_no_snapshot_at_all_covers_nothing_and_unordered_times_are_refused():
    assert list(snapshot_index([], [at("12:00")])) == [NO_SNAPSHOT]
    with pytest.raises(ValueError, match="ascending"):
        snapshot_index([at("12:30"), at("12:00")], [at("12:10")])


def test_snapshot_folders_are_named_by_their_valid_from_time():
    name = snapshot_folder_name(at("12:30"))
    assert name == "valid_from=2026-03-01T12:30:00Z"
    assert snapshot_time_us(name) == at("12:30")
    assert snapshot_time_us("README.md") is None
    with pytest.raises(ConfigError, match="valid_from=<ISO-8601 time>"):
        snapshot_time_us("valid_from=yesterday")


def test_a_snapshot_that_came_late_joins_from_its_effective_start_and_the_ones_before_keep_their_events():
    """12:30's snapshot was first read after events up to 12:40 were processed: it starts at
    12:40 and a microsecond; before that, events keep 12:00's. 13:00's is on time.

        snapshot   12:00 ──────────── (12:30, in effect from 12:40:00.000001) ── 13:00 ──→
        event      12:29 12:30 12:40 │12:41                                     │13:00
        joins      12:00 12:00 12:00 │12:30                                     │13:00
    """
    starts = [at("12:00"), at("12:30"), at("13:00")]
    effective = [at("12:00"), effective_start_us(at("12:30"), at("12:40"), at("12:10")), at("13:00")]
    assert effective[1] == at("12:40") + 1
    events = [at(t) for t in ("11:59", "12:29", "12:30", "12:40", "12:41", "13:00")]
    assert list(snapshot_index(starts, events, effective)) == [NO_SNAPSHOT, 0, 0, 0, 1, 2]
    assert list(snapshot_index(starts, events, starts)) == list(snapshot_index(starts, events))  # all on time


def test_a_snapshot_back_dated_behind_a_later_one_never_replaces_it():
    """11:00's snapshot published after 12:00's was in effect, read when 12:30 was processed:
    from then on both are in effect, and the later valid-from time wins — 11:00's only ever
    covered what no other did."""
    starts, effective = [at("11:00"), at("12:00")], [at("12:30") + 1, at("12:00")]
    events = [at(t) for t in ("11:30", "12:10", "12:40")]
    assert list(snapshot_index(starts, events, effective)) == [NO_SNAPSHOT, 1, 1]


def test_the_effective_start_is_the_latest_of_valid_from_the_watermark_and_just_after_what_was_processed():
    assert effective_start_us(at("12:30"), None, None) == at("12:30")  # nothing processed yet
    assert effective_start_us(at("12:30"), at("12:10"), at("12:05")) == at("12:30")  # on time
    assert effective_start_us(at("12:30"), at("12:29"), at("12:40")) == at("12:40")  # the watermark is later
    with pytest.raises(ValueError, match="effective start at or after its valid-from"):
        snapshot_index([at("12:00")], [at("12:00")], [at("11:00")])
