"""Readers and writers at the same time: a reader never sees part of an append.

Every event's content is a function of its offset (event_log_writer_loop.expected), so a
reader checks each range it reads while the writer is still appending.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from event_log_writer_loop import events, expected

from tidegate.inputs.event_log import EventLog

WRITER = Path(__file__).with_name("event_log_writer_loop.py")
TOTAL = 40_000


def _check(log: EventLog, start: int, end: int) -> None:
    table = log.read(0, start, end)
    assert table.column("offset").to_pylist() == list(range(start, end))
    got = list(zip(table.column("key").to_pylist(), table.column("payload").to_pylist(), strict=True))
    assert got == [expected(o) for o in range(start, end)]


def _follow(log: EventLog, done: callable) -> int:
    """Read everything new until the writer is done and nothing more appears; the number
    of reads made while the writer was still writing."""
    seen, reads = 0, 0
    while True:
        finished = done()
        end = log.end_offset(0)
        if end > seen:
            _check(log, seen, end)
            seen, reads = end, reads + (not finished)
        elif finished:
            return reads
        else:
            time.sleep(0.001)


@pytest.mark.slow
def test_a_reader_process_follows_a_writer_process_without_seeing_partial_appends(tmp_path):
    root = tmp_path / "event-log"
    EventLog.create(root, partitions=1, segment_bytes=1 << 20)
    writer = subprocess.Popen(
        [sys.executable, str(WRITER), str(root), "7", "paced", str(TOTAL)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    reader = EventLog.open(root)
    reads = _follow(reader, lambda: writer.poll() is not None)
    assert writer.returncode == 0, writer.stderr.read()
    end = reader.end_offset(0)
    assert end >= TOTAL
    assert reads > 5  # it really read while the writer was writing
    _check(EventLog.open(root), 0, end)  # and a fresh reader agrees with the follower
    assert reader.describe()[0].segments > 1


def test_threads_sharing_one_log_object_read_while_another_appends(tmp_path):
    log = EventLog.create(tmp_path / "event-log", partitions=1, segment_bytes=64 << 10)
    finished = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for n in range(1, 150):
                log.append(0, *events(log.end_offset(0), n), fsync=False)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            finished.set()

    thread = threading.Thread(target=write)
    thread.start()
    reads = _follow(log, finished.is_set)
    thread.join()
    assert not errors
    assert log.end_offset(0) == sum(range(1, 150))
    assert reads > 1
    _check(log, 0, log.end_offset(0))
