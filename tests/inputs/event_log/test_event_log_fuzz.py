"""Bounded fuzzing of frame decoding: damaged bytes read back exactly or raise the log's own error.

A partition of six acknowledged frames is written once; each example damages its segment
file — bytes flipped, overwritten, zeroed, inserted, removed, duplicated, the file cut
short or grown — and a fresh reader opens it. Whatever the damage, reading all six
frames' events either returns exactly what was appended, or raises :class:`EventLogError`
(:class:`CorruptFrameError` for damage). Never another exception, never an event that
differs from what was written, never an acknowledged offset cut off the end. And the next append
gets the offset after the last acknowledged one: no offset is reused.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidegate.inputs.event_log import EventLog, EventLogError
from tidegate.inputs.event_log.segments import partition_dir_name

SIZES = (1, 3, 7, 2, 5, 4)  # events per frame
EVENTS = sum(SIZES)


class Pristine(tuple):
    def __repr__(self) -> str:  # hypothesis prints its arguments on failure: not the whole segment
        return f"<event log of {len(SIZES)} frames at {self[0]}>"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Pristine:
    """A one-partition event log of six frames; its segment's bytes; the events as read back."""
    root = tmp_path_factory.mktemp("fuzz") / "event-log"
    log = EventLog.create(root, partitions=1, clock="manual")
    offset = 0
    for n in SIZES:
        log.append(0, [f"k{offset + i}" if i % 2 else None for i in range(n)],
                   [json.dumps({"n": offset + i, "s": "é" * (offset + i)}) for i in range(n)],
                   arrival_times=[1_772_366_400_000_000 + (offset + i) * 1000 for i in range(n)])  # fmt: skip
        offset += n
    (segment,) = (root / partition_dir_name(0)).glob("*.seg")
    return Pristine((root, segment.read_bytes(), _events(log)))


def _events(log: EventLog) -> list:
    table = log.read(0, 0, EVENTS)
    return list(zip(*(table.column(c).to_pylist() for c in ("offset", "arrival_time", "key", "payload")), strict=True))


@st.composite
def damage(draw, data: bytes) -> bytes:
    """``data`` with one to three kinds of damage applied."""
    for _ in range(draw(st.integers(1, 3))):
        size = len(data)
        at = draw(st.integers(0, max(size - 1, 0)))
        kind = draw(st.sampled_from(["flip", "overwrite", "zero", "insert", "delete", "duplicate", "cut", "grow"]))
        length = draw(st.integers(1, 64))
        if kind == "flip" and size:
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
        elif kind == "overwrite":
            data = data[:at] + draw(st.binary(min_size=length, max_size=length)) + data[at + length :]
        elif kind == "zero":
            data = data[:at] + bytes(length) + data[at + length :]
        elif kind == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=length)) + data[at:]
        elif kind == "delete":
            data = data[:at] + data[at + length :]
        elif kind == "duplicate":
            data = data[:at] + data[at : at + 4 * length] + data[at:]
        elif kind == "cut":
            data = data[:at]
        else:  # "grow": what a writer killed mid-append leaves, or garbage
            data = data + draw(st.binary(min_size=1, max_size=4 * length))
    return data


# bounded: 200 damaged copies in a few seconds (each well under its 5 s deadline, even on a busy
# machine); a failure prints its example (no .hypothesis/ left behind)
@settings(max_examples=200, deadline=5000, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(st.data())
def test_damaged_segments_read_back_exactly_or_raise_the_logs_own_error(pristine, data):
    root, original, events = pristine
    damaged = data.draw(damage(original))
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "event-log"
        shutil.copytree(root, copy)
        (segment,) = (copy / partition_dir_name(0)).glob("*.seg")
        segment.write_bytes(damaged)
        log = EventLog.open(copy)
        try:
            end = log.end_offset(0)
        except EventLogError:
            end = None
        assert end in (None, EVENTS), f"the log ends at {end}: acknowledged offsets were cut"
        try:
            read = _events(log)
        except EventLogError:
            pass  # the log's own error: it names what is damaged
        else:
            assert read == events, "damaged bytes were read back as different events"
        try:
            appended = log.append(0, [None], ["after the damage"], fsync=False)
        except EventLogError:
            pass
        else:
            assert appended.first_offset >= EVENTS, f"offset {appended.first_offset} was reused"
