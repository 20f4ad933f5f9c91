"""What producers hand to ``append``, turned into the columns a frame stores — or refused.

Keys and payloads are stored as UTF-8 text. A Python string holding a lone surrogate
(``"\\ud800"``, e.g. from ``surrogateescape``-decoded bytes) has no UTF-8 form: it is
refused with the event's position, never stored altered. (Storing it losslessly would
take ``surrogatepass`` bytes, which are not UTF-8 and which Spark and the JVM reader
would read back as replacement characters: lossless in the log, lossy for every job.)
JSON producers never hit this: ``json.dumps`` escapes such a character as ``\\ud800``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from tidegate.inputs.event_log.errors import EventLogError


def text_columns(partition: int, keys: Sequence[str | None], payloads: Sequence[str]) -> tuple[pa.Array, pa.Array]:
    """``keys`` and ``payloads`` as Arrow string arrays."""
    if len(keys) != len(payloads):
        raise EventLogError(
            f"append to partition {partition}: {len(keys)} keys but {len(payloads)} payloads",
            "pass one key (or None) per payload",
        )
    try:
        return pa.array(keys, type=pa.string()), pa.array(payloads, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise EventLogError(
            f"append to partition {partition}: keys and payloads must be text: {exc}",
            "encode payloads as strings (JSON text); keys are strings or None",
        ) from None
    except UnicodeEncodeError:
        raise _not_unicode(partition, keys, payloads) from None


def _not_unicode(partition: int, keys: Sequence[str | None], payloads: Sequence[str]) -> EventLogError:
    for name, values in (("keys", keys), ("payloads", payloads)):
        for i, text in enumerate(values):
            if not isinstance(text, str):
                continue
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                char = text[exc.start]
                return EventLogError(
                    f"append to partition {partition}: {name}[{i}] holds a lone surrogate U+{ord(char):04X} at "
                    f"character {exc.start}, which is not valid Unicode text and cannot be stored; nothing was written",
                    "fix the producer's decoding (bytes that are not UTF-8 decoded with surrogateescape), or send the "
                    'text escaped as JSON does (json.dumps writes it as "\\ud800")',
                )
    return EventLogError(f"append to partition {partition}: text is not valid Unicode", "send UTF-8 text")


def table_columns(partition: int, table: pa.Table) -> tuple[pa.Array, pa.Array, np.ndarray | None]:
    """Columns ``key``, ``payload`` and optional ``arrival_time`` (int64 µs or timestamp) of ``table``."""
    missing = {"key", "payload"} - set(table.column_names)
    if missing:
        raise EventLogError(
            f"append_table to partition {partition}: table lacks column(s) {sorted(missing)}",
            "give columns key, payload and optionally arrival_time",
        )
    try:
        keys = table.column("key").cast(pa.string()).combine_chunks()
        payloads = table.column("payload").cast(pa.string()).combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise EventLogError(
            f"append_table to partition {partition}: key and payload must be text: {exc}",
            "give string columns",
        ) from None
    arrivals = None
    if "arrival_time" in table.column_names:
        column = table.column("arrival_time")
        if pa.types.is_timestamp(column.type):
            column = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
        if column.null_count:
            raise EventLogError(
                f"append_table to partition {partition}: arrival_time has {column.null_count} nulls",
                "give every event an arrival time, or drop the column to let the log stamp them",
            )
        arrivals = column.to_numpy().astype(np.int64, copy=False)
    return keys, payloads, arrivals
