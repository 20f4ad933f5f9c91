"""What a micro-batch reports: its counts, watermarks and timings, and the numbers read back
from what it wrote.

:class:`BatchReport` is the one account of a batch. The engine returns it — the driver
records it in the control database from there — and writes :meth:`BatchReport.record` to
``metrics/date=D/batch_id=N.json`` beside the outputs, for whoever reads the lineage's files.

Times are µs on the broker's clock; ``NONE`` is the policy core's "no watermark yet".
Plain data and pyarrow only: reading a report needs no Spark.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath

from tidegate.eventtime.policy import NONE
from tidegate.jobspec import JobSpec
from tidegate.storage.store import LOCAL, Store


@dataclass(frozen=True, kw_only=True)
class BatchReport:
    job: str
    version: int
    batch_id: int
    input_events: int  # judged + quarantined: nothing silently lost (semantics §5, §9)
    quarantined: int
    rows_emitted: int
    job_watermark_us: int  # the engine's frontier: the job watermark, or the arrival floor with ``over``; NONE
    clock_us: int | None  # the broker clock the batch was judged with: the processing-time watermark
    counts: dict  # per log partition: outcomes, input, and its own watermark (semantics §5)
    seconds: float  # from the batch's start to its rows being visible
    processed_at_us: int  # the broker clock once the batch was done
    last_output_us: int | None = None  # the largest window end emitted in this batch
    stages: dict | None = None  # semantics §4: per stage input/output watermark and event-time lag
    substreams: dict | None = None  # with per-key watermarks: how many, and their spread
    phase_seconds: dict = field(default_factory=dict)  # wall seconds of each part of the batch
    write_seconds: dict = field(default_factory=dict)  # each concurrent write of the "writes" phase
    # how far the nearest unit's watermark is from the next window end, when only window ends
    # release rows (tidegate.spark.pipeline.release_gate); None otherwise
    next_close_in_us: int | None = None

    @property
    def watermark_us(self) -> int | None:
        """``job_watermark_us``, None while there is none."""
        return None if self.job_watermark_us == NONE else self.job_watermark_us

    @property
    def watermark_delay_us(self) -> int | None:
        """How far the job watermark trails the broker clock when the batch was done."""
        return None if self.watermark_us is None else self.processed_at_us - self.watermark_us

    @property
    def processing_time_lag_us(self) -> int | None:
        """How far the clock the batch was judged with trails the broker clock when it was done."""
        return None if self.clock_us is None else self.processed_at_us - self.clock_us

    def record(self) -> dict:
        """The JSON document of ``metrics/date=D/batch_id=N.json``."""
        return {
            "job": self.job,
            "version": self.version,
            "batch_id": self.batch_id,
            "processed_at_us": self.processed_at_us,
            "input_events": self.input_events,
            "quarantined": self.quarantined,
            "rows_emitted": self.rows_emitted,
            "job_watermark_us": self.watermark_us,
            "watermark_delay_us": self.watermark_delay_us,
            "processing_time_watermark_us": self.clock_us,
            "processing_time_lag_us": self.processing_time_lag_us,
            "partitions": {str(p): c for p, c in sorted(self.counts.items())},
            "last_output_us": self.last_output_us,
            "stages": self.stages,
            "substreams": self.substreams,
            "batch_seconds": round(self.seconds, 3),
            "phase_seconds": {k: round(v, 3) for k, v in self.phase_seconds.items()},
            "write_seconds": self.write_seconds,
            "next_close_in_us": self.next_close_in_us,
        }


def stage_watermarks(spec: JobSpec, frontier_us: int, clock_us: int | None, buffered_from_us: int | None) -> dict:
    """semantics §4 per stage of ``spec``'s query: input watermark (min over its inputs), output
    watermark (min of the input and the oldest data it still buffers) and the event-time lag
    it adds.

    The policy stage buffers nothing: its output watermark is the job watermark (the
    minimum over partitions of the unit watermarks, which follow the broker clock).
    The window stage holds the events of open windows, so its output watermark stops at
    the oldest of them. Values are µs; None while unknown."""
    wm = None if frontier_us == NONE else int(frontier_us)
    clock_term = None if clock_us is None else clock_us - spec.late_arrival_tolerance_us
    stages = {"policy": _stage(clock_term, wm)}
    if spec.window is not None:
        held = wm if buffered_from_us is None or wm is None else min(wm, buffered_from_us)
        stages["window"] = _stage(wm, held)
    return stages


def _stage(input_us: int | None, output_us: int | None) -> dict:
    lag = None if input_us is None or output_us is None else input_us - output_us
    return {"input_watermark_us": input_us, "output_watermark_us": output_us, "event_time_lag_us": lag}


def substream_summary(frontiers: Mapping[str | None, int]) -> dict:
    """With per-key watermarks: how many substreams, and the spread of their watermarks."""
    known = [w for w in frontiers.values() if w != NONE]
    return {
        "count": len(frontiers),
        "min_watermark_us": min(known) if known else None,
        "max_watermark_us": max(known) if known else None,
    }


class Phases:
    """Wall time of each part of a batch, for the metrics an operator reads."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.monotonic()

    def tick(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self._last
        self._last = now


# -- read back from what the batch wrote -------------------------------------------------
def _files(written: list[PurePath], store: Store) -> list[PurePath]:
    """The Parquet files among ``written``: files as they are (an object store's batch), the
    files in folders (a local batch's hour folders)."""
    return [
        f
        for p in written
        for f in ([p] if p.suffix == ".parquet" else [e.path for e in store.list(p) if e.name.endswith(".parquet")])
    ]


def rows_written(written: list[PurePath], store: Store = LOCAL) -> int:
    """Row count from the Parquet footers of the folders (or files) just written: no Spark job."""
    import pyarrow.parquet as pq

    total = 0
    for f in _files(written, store):
        filesystem, where = store.parquet(f)
        total += pq.read_metadata(where, filesystem=filesystem).num_rows
    return total


def last_window_end(written: list[PurePath], column: str = "window_end", store: Store = LOCAL) -> int | None:
    """The largest ``window_end`` (or another time ``column``) in the rows just written (µs),
    read from the files."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ends = []
    for f in _files(written, store):
        times = store.read_parquet(f, columns=[column]).column(column)
        # Spark may write INT96 (read as ns): normalise to µs before taking the integer
        micros = times.cast(pa.timestamp("us", tz=times.type.tz)).cast(pa.int64())
        top = pc.max(micros).as_py()
        if top is not None:
            ends.append(int(top))
    return max(ends) if ends else None


def min_buffered_us(directory: PurePath, store: Store = LOCAL) -> int | None:
    """The oldest system time the window stage still buffers, from the Parquet statistics."""
    import pyarrow.parquet as pq

    lows = []
    for f in _files([directory], store):
        filesystem, where = store.parquet(f)
        meta = pq.read_metadata(where, filesystem=filesystem)
        col = meta.schema.names.index("system_us") if "system_us" in meta.schema.names else None
        if col is None:
            continue
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(col).statistics
            if stats is not None and stats.has_min_max and meta.row_group(g).num_rows:
                lows.append(int(stats.min))
    return min(lows) if lows else None
