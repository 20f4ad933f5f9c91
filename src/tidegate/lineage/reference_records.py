"""What a lineage records of the reference snapshots its job joined, and the check against them.

Which snapshot an event joins is decided by its time alone (:mod:`tidegate.eventtime.reference`);
what remains for a replay or a re-run to join the same rows is that a snapshot's rows never
change. So the first time the job reads a snapshot it records the snapshot's files — names,
sizes, SHA-256 — in ``reference/<name>/valid_from=T.json`` of its lineage, created once
(put-if-absent: two drivers of one batch write the same bytes, and the first one stays); every
later read compares, and a snapshot whose files changed stops the job with what changed, rather
than joining other rows than the ones already emitted.
"""

from __future__ import annotations

from typing import Iterable

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us
from tidegate.eventtime.reference import snapshot_folder_name
from tidegate.lineage.layout import JobPaths


def record_snapshots(paths: JobPaths, name: str, snapshots: Iterable[tuple[int, list]],
                     watermark_us: int | None = None) -> int:  # fmt: skip
    """Record each (valid-from µs, fingerprint) not yet recorded, and check the recorded ones;
    how many were new. Raises :class:`ConfigError` for a snapshot whose files changed.

    ``watermark_us``: the job watermark before the batch that first read the snapshots (None:
    not known yet). A snapshot valid from before it is recorded as ``late``: events of its time
    had been processed already, and may have joined the snapshot before it — what a replay,
    which sees this one from the start, would not do."""
    new = 0
    for valid_from_us, fingerprint in snapshots:
        record = paths.reference_record(name, snapshot_folder_name(valid_from_us))
        doc = {"reference": name, "valid_from": format_time_us(valid_from_us), "files": fingerprint}
        if watermark_us is not None:
            doc |= {"first_read_at_watermark": format_time_us(watermark_us), "late": valid_from_us < watermark_us}
        if paths.store.put_json_if_absent(record, doc):
            new += 1
            continue
        recorded = paths.store.read_json(record, {}).get("files")
        if recorded != fingerprint:
            raise ConfigError(
                f"reference {name}: snapshot {snapshot_folder_name(valid_from_us)} changed after the job joined it "
                f"(recorded files {_names(recorded)}, now {_names(fingerprint)}): rows already emitted were joined "
                "with its earlier contents",
                "snapshots are immutable: restore the snapshot as it was, and publish the change as a new "
                "valid_from=<later time> folder",
            )
    return new


def recorded_snapshots(paths: JobPaths, name: str) -> list[dict]:
    """The snapshots the lineage recorded for reference ``name``, oldest first."""
    folder = paths.reference_record(name, "x").parent
    entries = sorted(e.name for e in paths.store.list(folder) if e.name.endswith(".json"))
    return [paths.store.read_json(folder / e) for e in entries]


def _names(files: list | None) -> str:
    return ", ".join(f"{f[0]} ({f[1]} bytes)" for f in files or []) or "none"
