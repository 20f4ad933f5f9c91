"""A writer for the crash and concurrency tests: appends forever, acknowledging each append.

    python event_log_writer_loop.py ROOT SEED [loop|tear|fast|paced] [LIMIT]

or :func:`run` in a forked child. After each ``append`` returns it writes
``OFFSET COUNT``. Every event's key and payload are a function of its offset
(:func:`expected`), so a reader can check every event. Mode ``tear`` writes part of a
frame by hand and kills itself, as a writer dying inside ``write`` would; ``fast``
skips fsync; ``paced`` also pauses 3 ms between appends; ``LIMIT`` stops once the log holds that many events.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from typing import TextIO

import pyarrow as pa

from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.frames import STORED_SCHEMA, encode_frame
from tidegate.inputs.event_log.segments import partition_dir_name, segment_name


def expected(offset: int) -> tuple[str | None, str]:
    key = None if offset % 5 == 0 else f"k{offset % 13}"
    return key, f'{{"offset": {offset}, "pad": "{"x" * (offset * 7919 % 300)}"}}'


def events(first: int, n: int) -> tuple[list[str | None], list[str]]:
    keys, payloads = zip(*(expected(o) for o in range(first, first + n)), strict=True)
    return list(keys), list(payloads)


def run(root: str, seed: int, mode: str, out: TextIO, limit: int | None = None) -> None:
    log = EventLog.open(root)
    rng = random.Random(seed)
    if mode == "tear":
        tear(log, rng)
    while limit is None or log.end_offset(0) < limit:
        first = log.end_offset(0)  # single writer: the next append starts here
        r = log.append(0, *events(first, rng.randint(1, 400)), fsync=mode == "loop")
        assert r.first_offset == first, (r, first)
        out.write(f"{r.first_offset} {r.count}\n")
        out.flush()
        if mode == "paced":
            time.sleep(0.003)


def tear(log: EventLog, rng: random.Random) -> None:
    """Write a prefix of the next frame at the end of the last segment, then die."""
    first = log.end_offset(0)
    keys, payloads = events(first, rng.randint(1, 400))
    batch = pa.RecordBatch.from_arrays(
        [pa.array([log.clock_now_us()] * len(keys), pa.int64()), pa.array(keys, pa.string()), pa.array(payloads)],
        schema=STORED_SCHEMA,
    )
    data, _ = encode_frame(batch, first)
    pdir = log.root / partition_dir_name(0)
    segments = sorted(pdir.glob("*.seg")) or [pdir / segment_name(first)]
    with open(segments[-1], "ab") as f:
        f.write(data[: rng.randint(1, len(data) - 1)])
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    run(
        sys.argv[1],
        int(sys.argv[2]),
        sys.argv[3] if len(sys.argv) > 3 else "loop",
        sys.stdout,
        int(sys.argv[4]) if len(sys.argv) > 4 else None,
    )
