"""The input positions of each micro-batch, as Spark's offset log under a checkpoint records them.

A tidegate source offset, as Spark records it in ``<checkpoint>/offsets/<batch>``::

    {"v": 1, "offsets": {"0": 123, "1": 456}, "clock": 1767225600000000}

``offsets`` are each partition's next unread offset (the batch is ``[start, end)``);
``clock`` is the broker clock (µs since epoch) read together with them, with the promise
that **every event not yet read arrives at ``clock`` or later**. The engine reads it back
with :func:`batch_offsets` inside ``foreachBatch`` to advance idle partitions' watermarks
(semantics §2 "Idle units"); a replayed batch re-reads the same recorded offset, so it reuses
the same clock rather than estimating it again. The runtime reads the same entries to
know where a per-event job's last visible batch ended.

Reading them is plain file reading, so it lives here rather than beside the Spark source
(:mod:`tidegate.spark.pipeline.source`), which writes them through Spark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath

from tidegate.errors import TidegateError
from tidegate.lineage.layout import OFFSET_LOG
from tidegate.storage.store import LOCAL, Store

OFFSET_VERSION = 1


class SourceError(TidegateError):
    """The source's offsets or the checkpoint's offset log cannot be read as expected."""


@dataclass(frozen=True)
class SourceOffset:
    """Next unread offset per partition, and the broker clock read with them (None at the start)."""

    offsets: dict[int, int]
    clock_us: int | None

    def to_dict(self) -> dict:
        """The JSON form; partitions sorted, so equal offsets always serialise identically."""
        return {
            "v": OFFSET_VERSION,
            "offsets": {str(p): int(self.offsets[p]) for p in sorted(self.offsets)},
            "clock": None if self.clock_us is None else int(self.clock_us),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


def parse_offset(value: str | Mapping | SourceOffset) -> SourceOffset:
    """A source offset from its JSON text or dict (as Spark hands it back)."""
    if isinstance(value, SourceOffset):
        return value
    try:
        raw = json.loads(value) if isinstance(value, (str, bytes)) else dict(value)
        if raw.get("v") != OFFSET_VERSION:
            raise ValueError(f"version {raw.get('v')!r}, expected {OFFSET_VERSION}")
        offsets = {int(p): int(o) for p, o in raw["offsets"].items()}
        clock = raw.get("clock")
        return SourceOffset(offsets, None if clock is None else int(clock))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SourceError(
            f"not a tidegate source offset: {str(value)[:200]!r} ({exc})",
            'expected {"v": 1, "offsets": {"<partition>": <offset>, ...}, "clock": <µs or null>}; '
            "was this checkpoint written by another source or a newer Tidegate?",
        ) from None


def batch_offsets(checkpoint_dir: str | PurePath, batch_id: int, store: Store = LOCAL,
                  ) -> tuple[SourceOffset | None, SourceOffset]:  # fmt: skip
    """``(start, end)`` of micro-batch ``batch_id`` from Spark's offset log under ``checkpoint_dir``.

    ``start`` is the previous batch's end, None for batch 0 (or if Spark has purged it).
    Spark writes ``offsets/<batch_id>`` before it runs the batch, so this works inside
    ``foreachBatch``, and on a replay it returns what the first attempt recorded.
    """
    offsets_dir = (Path(checkpoint_dir) if store.is_local else PurePath(checkpoint_dir)) / OFFSET_LOG
    end = _read_offset_log_entry(offsets_dir / str(batch_id), store)
    if end is None:
        raise SourceError(
            f"{offsets_dir / str(batch_id)} does not exist: Spark has not planned batch {batch_id} in this checkpoint",
            "call batch_offsets with the query's checkpointLocation and a batch id Spark gave foreachBatch",
        )
    start = _read_offset_log_entry(offsets_dir / str(batch_id - 1), store) if batch_id > 0 else None
    return start, end


def _read_offset_log_entry(path: PurePath, store: Store) -> SourceOffset | None:
    # Spark's OffsetSeqLog entry: "v1", a line of batch metadata JSON, then one line per
    # source of the query ("-" where a source has no offset). Tidegate queries have one.
    try:
        lines = store.read_bytes(path).decode("utf-8").splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise SourceError(
            f"{path} is not a Spark offset log entry (expected a version line, metadata and one line per source)",
            "point batch_offsets at the query's checkpointLocation",
        )
    sources = [line for line in lines[2:] if line.strip()]
    if len(sources) != 1 or sources[0].strip() == "-":
        raise SourceError(
            f"{path} records {len(sources)} source offsets; Tidegate queries read exactly one tidegate source",
            "union inputs inside the event log rather than in the query, or read the offsets yourself",
        )
    return parse_offset(sources[0])
