"""The driver records a run caught up at the batch the one rule names (tidegate.runtime.estimates.caught_up):
a driver reduced to its per-batch report, fed batches on a clock the test sets."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace as NS

import pytest

from tidegate.lineage.offsets import SourceOffset
from tidegate.runtime.jobs.driver import Driver, _Rate
from tidegate.spark.pipeline.sink.metrics import BatchReport


class OnePartitionLog:
    partitions = 1

    def __init__(self) -> None:
        self.end = 0

    def end_offset(self, partition: int) -> int:
        return self.end


class ControlDB:
    def __init__(self) -> None:
        self.row = NS(requested_at=1_000.0, first_batch_at=None, first_output_at=None, caught_up_at=None)

    def record_batch(self, **fields) -> None:
        pass

    def run(self, run_id):
        return self.row

    def update_run(self, run_id, **fields) -> None:
        self.row = NS(**{**vars(self.row), **fields})

    def update_lineage(self, lineage_id, **fields) -> None:
        pass


def reporting_driver(max_events_per_batch=None) -> Driver:
    d = Driver.__new__(Driver)
    d.db, d.run_id, d.log = ControlDB(), 7, OnePartitionLog()
    d.run, d.lineage = NS(job="x", region="east"), NS(id=1)
    d.spec = NS(source=NS(max_events_per_batch=max_events_per_batch), needs_lookback=False)
    d.fence = NS(commit=lambda what: contextlib.nullcontext())
    d.rate, d.totals, d.last_output_us = _Rate(), {"input_events": 0, "rows_emitted": 0}, None
    d.caught_up, d.last_end, d.last_left, d.gate = False, {0: 0}, None, None
    d._say = lambda message: None
    return d


def feed(d: Driver, batches) -> None:
    """Each batch: (wall clock when it ended, the offset it read to, the log's end by then)."""
    for batch_id, (at, read_to, log_end) in enumerate(batches):
        d.wall = lambda at=at: at
        d.log.end = log_end
        report = BatchReport(
            job="x",
            version=1,
            batch_id=batch_id,
            input_events=read_to - d.last_end[0],
            quarantined=0,
            rows_emitted=0,
            job_watermark_us=0,
            clock_us=None,
            counts={},
            seconds=1.0,
            processed_at_us=0,
        )
        d._on_batch(report, SourceOffset({0: read_to}, clock_us=0))


# 100 ev/s arriving; a replay's first batch ends 30 s after the request, then batches of 8 s
# and 7.6 s each read what arrived during the one before
REPLAY = [(1_030.0, 100, 3_000), (1_038.0, 3_000, 3_800), (1_045.6, 3_800, 4_560)]


def test_a_run_is_caught_up_once_a_batch_leaves_about_what_the_one_before_left():
    d = reporting_driver()
    feed(d, REPLAY[:2])
    assert d.db.row.caught_up_at is None  # 800 left where 2,900 were: still reading the backlog
    feed(d, REPLAY[2:])
    # 760 left (7.6 s of input, past the 5 s slack), as the batch before left 800
    assert d.caught_up and d.db.row.caught_up_at == 1_045.6 and d.db.row.catch_up_s == pytest.approx(45.6)


def test_a_batch_that_read_the_whole_per_batch_limit_does_not_end_the_catch_up():
    d = reporting_driver(max_events_per_batch=800)
    feed(d, REPLAY)  # the third batch read 800 events, the limit: more may wait behind them
    assert not d.caught_up and d.db.row.caught_up_at is None
