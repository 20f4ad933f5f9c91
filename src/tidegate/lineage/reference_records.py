"""What a lineage records of the reference snapshots its job joined, and the check against them.

Which snapshot an event joins is decided by its time alone (:mod:`tidegate.eventtime.reference`);
what remains for a replay or a re-run to join the same rows is that a snapshot's rows never
change. So the first time the job reads a snapshot it records the snapshot's files — names,
sizes, SHA-256 — in ``reference/<name>/valid_from=T.json`` of its lineage, created once
(put-if-absent: two drivers of one batch write the same bytes, and the first one stays); every
later read compares, and a snapshot whose files changed stops the job with what changed, rather
than joining other rows than the ones already emitted.

The record also fixes the snapshot's **effective start** (:func:`tidegate.eventtime.reference.
effective_start_us`): from when on events join it. Every later read takes it from the record,
never from the job's progress then, so a restarted driver, a replay into a new lineage that
keeps its predecessor's records (:func:`keep_records`) and the batch path given the lineage's
records join the same rows the first run did — also around a snapshot published late.
"""

from __future__ import annotations

from collections.abc import Iterable

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.eventtime.reference import effective_start_us, snapshot_folder_name
from tidegate.lineage.layout import JobPaths


def record_snapshots(paths: JobPaths, name: str, snapshots: Iterable[tuple[int, list]], watermark_us: int | None = None,
                     processed_through_us: int | None = None) -> dict[int, int]:  # fmt: skip
    """Record each (valid-from µs, fingerprint) not yet recorded, and check the recorded ones;
    each snapshot's effective start, valid-from → µs, as recorded. Raises :class:`ConfigError`
    for a snapshot whose files changed.

    ``watermark_us`` and ``processed_through_us``: the job watermark and the largest system
    time processed before the batch that first reads the snapshots (None: nothing yet). A
    snapshot valid from before either starts later than its valid-from time, and is recorded
    as ``late``."""
    effective = {}
    for valid_from_us, fingerprint in snapshots:
        record = paths.reference_record(name, snapshot_folder_name(valid_from_us))
        start_us = effective_start_us(valid_from_us, processed_through_us, watermark_us)
        doc = {
            "reference": name,
            "valid_from": format_time_us(valid_from_us),
            "effective_from": format_time_us(start_us),
            "late": start_us > valid_from_us,
            "files": fingerprint,
        }
        if watermark_us is not None:
            doc["first_read_at_watermark"] = format_time_us(watermark_us)
        if processed_through_us is not None:
            doc["first_read_after"] = format_time_us(processed_through_us)
        if paths.store.put_json_if_absent(record, doc):
            effective[valid_from_us] = start_us
            continue
        recorded = paths.store.read_json(record, {})
        if recorded.get("files") != fingerprint:
            raise ConfigError(
                f"reference {name}: snapshot {snapshot_folder_name(valid_from_us)} changed after the job joined it "
                f"(recorded files {_names(recorded.get('files'))}, now {_names(fingerprint)}): rows already emitted "
                "were joined with its earlier contents",
                "snapshots are immutable: restore the snapshot as it was, and publish the change as a new "
                "valid_from=<later time> folder",
            )
        effective[valid_from_us] = _effective_of(recorded, valid_from_us)
    return effective


def keep_records(source: JobPaths, target: JobPaths, name: str) -> int:
    """Copy reference ``name``'s records of lineage ``source`` into ``target`` (one not recorded
    there yet): a lineage that replays its predecessor's input joins its snapshots from the same
    effective starts. How many were copied."""
    copied = 0
    for doc in recorded_snapshots(source, name):
        at = parse_time_us(doc["valid_from"], field=f"reference record {doc['valid_from']}")
        copied += bool(target.store.put_json_if_absent(target.reference_record(name, snapshot_folder_name(at)), doc))
    return copied


def recorded_snapshots(paths: JobPaths, name: str) -> list[dict]:
    """The snapshots the lineage recorded for reference ``name``, oldest first."""
    folder = paths.reference_record(name, "x").parent
    entries = sorted(e.name for e in paths.store.list(folder) if e.name.endswith(".json"))
    return [paths.store.read_json(folder / e) for e in entries]


def _effective_of(recorded: dict, valid_from_us: int) -> int:
    text = recorded.get("effective_from")
    return valid_from_us if text is None else parse_time_us(text, field="reference record effective_from")


def _names(files: list | None) -> str:
    return ", ".join(f"{f[0]} ({f[1]} bytes)" for f in files or []) or "none"
