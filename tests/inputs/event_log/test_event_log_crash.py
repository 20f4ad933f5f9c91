"""Crash safety: a writer killed with SIGKILL at random moments loses nothing it acknowledged.

A child process appends in a loop and reports each append once it has returned (and
fsynced); the test kills it at a random moment, over and over, and every fourth child
dies half way through writing a frame. After each kill, every acknowledged event must
be readable with identical content, offsets dense, no torn record visible; at the end
the log must still be appendable.

The children are forked from the test process (already past its imports), so two dozen
kills take a few seconds instead of a few dozen.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from event_log_writer_loop import events, expected, run

from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.segments import PartitionIndex, partition_dir_name

KILLS = 28  # 21 at random moments, 7 mid-frame


def _fork_writer(root: Path, seed: int, mode: str) -> tuple[int, object]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write until killed; never return into pytest
        try:
            os.close(read_fd)
            run(str(root), seed, mode, os.fdopen(write_fd, "w"))
        finally:
            os._exit(70)
    os.close(write_fd)
    return pid, os.fdopen(read_fd, "r")


def _acknowledged(output: str) -> list[tuple[int, int]]:
    lines = output.split("\n")[:-1]  # the last piece has no newline: possibly cut by the kill
    return [tuple(map(int, line.split())) for line in lines if line]


def _assert_log_holds(log: EventLog, acked: list[tuple[int, int]]) -> None:
    end = log.end_offset(0)
    acked_end = max((o + n for o, n in acked), default=0)
    assert end >= acked_end, f"acknowledged up to {acked_end} but the log ends at {end}"
    table = log.read(0, 0, end)
    assert table.column("offset").to_pylist() == list(range(end))
    want = [expected(o) for o in range(end)]
    assert list(zip(table.column("key").to_pylist(), table.column("payload").to_pylist(), strict=True)) == want


@pytest.mark.slow
def test_sigkilled_writers_lose_no_acknowledged_event_and_leave_no_torn_record(tmp_path):
    root = tmp_path / "event-log"
    EventLog.create(root, partitions=1, segment_bytes=256 << 10)
    rng = random.Random(20260301)
    acked: list[tuple[int, int]] = []
    torn_tails_found = 0
    for i in range(KILLS):
        mode = "tear" if i % 4 == 3 else "loop"
        pid, acks = _fork_writer(root, seed=i, mode=mode)
        if mode == "loop":
            first = acks.readline()  # it is writing: from here on, kill at a random moment
            assert first.endswith("\n")
            acked += _acknowledged(first)
            time.sleep(rng.uniform(0.0, 0.1))
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        acked += _acknowledged(acks.read())
        acks.close()
        index = PartitionIndex(root / partition_dir_name(0), 0)
        index.refresh()
        last = index.segments[-1]
        torn_tails_found += os.path.getsize(last.path) > last.scanned_to
        # what a reader sees between crashes: every acknowledged event, nothing torn
        _assert_log_holds(EventLog.open(root), acked)

    assert len(acked) > 2 * KILLS  # the writers did get work done between kills
    assert torn_tails_found >= KILLS // 4  # every "tear" child left one for the next writer to cut
    log = EventLog.open(root)
    assert log.describe()[0].segments > 1  # crashes also happened around segment rolls
    end = log.end_offset(0)
    r = log.append(0, *events(end, 3))
    assert r.first_offset == end
    _assert_log_holds(log, acked + [(end, 3)])
