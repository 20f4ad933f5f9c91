"""Reference snapshots on S3, against a real S3-compatible server: the layout and the fingerprint
of a local folder, a snapshot seen only once its ``_published`` marker is there, a file changed
after it was listed or recorded refused, ``reference.path`` held under the operator's S3
prefixes, and ``tidegate reference capture`` publishing into an S3 folder."""

from __future__ import annotations

import hashlib
import io
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from s3 import BUCKETS, region_env
from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us
from tidegate.inputs.reference import list_snapshots, read_snapshot
from tidegate.inputs.reference_capture import publish_snapshot
from tidegate.inputs.reference_s3 import PUBLISHED
from tidegate.jobspec.folders import confined_reference_folder, confined_s3_reference, reference_dirs
from tidegate.jobspec.reference import ReferenceSpec
from tidegate.lineage.layout import JobPaths
from tidegate.lineage.reference_records import record_snapshots
from tidegate.storage import aws
from tidegate.storage.uri import parse_root

NOON = parse_time_us("2026-03-01T12:00:00Z")
COLUMNS = {"deviceId": "string", "site": "string"}
CSV = ReferenceSpec("devices", "ref", "csv", COLUMNS, (("deviceId", "deviceId"),))
PARQUET = ReferenceSpec("devices", "ref", "parquet", COLUMNS, (("deviceId", "deviceId"),))
BUCKET = BUCKETS["east"]


@pytest.fixture
def s3(s3_stores, monkeypatch):
    """The east store as the reference store (``TIDEGATE_S3_REFERENCE_*``): (client, root of a
    fresh prefix, the reference folders ``TIDEGATE_REFERENCE_DIRS`` names)."""
    store = s3_stores["east"]
    for name, value in region_env("reference", store).items():
        monkeypatch.setenv(name, value)
    top = f"s3a://{BUCKET}/reference-{time.time_ns()}"  # each test's own prefix
    roots = reference_dirs({"TIDEGATE_REFERENCE_DIRS": f"/nowhere:{top}"}, Path())
    return aws.client(store.settings()), parse_root(f"{top}/devices"), roots


def put(client, root, key: str, data: bytes) -> None:
    client.put_object(Bucket=root.bucket, Key=f"{root.prefix}/{key}", Body=data)


def parquet_bytes(rows: dict) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(rows), sink)
    return sink.getvalue()


def test_an_s3_prefix_among_the_reference_folders_is_kept_whole_and_normalised(tmp_path):
    env = {"TIDEGATE_REFERENCE_DIRS": "/data/ref:s3a://tidegate-east/ref/:shared"}
    assert reference_dirs(env, tmp_path) == (
        Path("/data/ref"),
        parse_root("s3a://tidegate-east/ref"),
        tmp_path / "shared",
    )
    with pytest.raises(ConfigError, match=r"TIDEGATE_REFERENCE_DIRS 's3a://tidegate-east/a/\.\./b'.*'\.\.'"):
        reference_dirs({"TIDEGATE_REFERENCE_DIRS": "s3a://tidegate-east/a/../b"}, tmp_path)
    with pytest.raises(ConfigError, match="is a URI reference snapshots cannot be read from"):
        reference_dirs({"TIDEGATE_REFERENCE_DIRS": "gs://b/ref"}, tmp_path)


@pytest.mark.parametrize("given, message", [
    ("s3a://tidegate-west/ref/devices", "outside the reference folders — put the snapshots under s3a://tidegate-east/ref"),
    ("s3a://tidegate-east/reference/devices", "outside the reference folders"),  # a sibling, not under ref/
    ("s3a://tidegate-east/ref/../secrets", r"not a plain S3 prefix.*'\.\.'"),
    ("s3a://tidegate-east/ref//devices", "not a plain S3 prefix.*'' is not a plain name"),
    ("s3a://key:secret@tidegate-east/ref/devices", "carries credentials"),
])  # fmt: skip
def test_a_reference_path_on_s3_must_lie_under_a_configured_s3_prefix(given, message, tmp_path):
    folders = reference_dirs({"TIDEGATE_REFERENCE_DIRS": f"{tmp_path}:s3a://tidegate-east/ref"}, tmp_path)
    assert confined_reference_folder("s3a://tidegate-east/ref/devices/", folders, tmp_path) == parse_root(
        "s3a://tidegate-east/ref/devices"
    )
    with pytest.raises(ConfigError, match=message):
        confined_s3_reference(given, folders)
    with pytest.raises(ConfigError, match="none of them is on S3 — the operator adds the S3 prefix"):
        confined_s3_reference("s3a://tidegate-east/ref/devices", [tmp_path])


def test_snapshots_on_s3_are_listed_and_read_as_in_a_local_folder(s3):
    client, root, roots = s3
    csv = b"deviceId,site\nd1,hall\nd2,yard\n"
    for name in ("valid_from=2026-03-01T12:30:00Z", "valid_from=2026-03-01T12:00:00Z"):
        put(client, root, f"{name}/a.csv", csv)
        put(client, root, f"{name}/.a.csv.tmp", b"junk")  # hidden: skipped
        put(client, root, f"{name}/readme.txt", b"not a table")
        put(client, root, f"{name}/{PUBLISHED}", b"")
    put(client, root, ".valid_from=2026-03-01T13:00:00Z/a.csv", csv)  # a hidden folder: skipped
    put(client, root, "notes/a.csv", csv)
    folder = confined_reference_folder(str(root), roots, Path())
    snapshots = list_snapshots(folder, "csv", roots=roots)
    assert [s.valid_from_us for s in snapshots] == [NOON, NOON + 1_800_000_000]
    assert snapshots[0].files == (("a.csv", len(csv), hashlib.sha256(csv).hexdigest()),)  # a local fingerprint
    assert read_snapshot(snapshots[0], CSV, roots=roots).to_pylist() == [
        {"deviceId": "d1", "site": "hall"},
        {"deviceId": "d2", "site": "yard"},
    ]
    data = parquet_bytes({"site": ["roof"], "deviceId": ["d3"], "extra": [1]})
    put(client, root, "valid_from=2026-03-01T14:00:00Z/b.parquet", data)
    put(client, root, f"valid_from=2026-03-01T14:00:00Z/{PUBLISHED}", b"")
    newest = list_snapshots(folder, "parquet", roots=roots)[-1]
    assert read_snapshot(newest, PARQUET, roots=roots).to_pylist() == [{"deviceId": "d3", "site": "roof"}]


def test_a_snapshot_being_written_is_not_seen_until_its_marker_is_there(s3):
    client, root, roots = s3
    put(client, root, "valid_from=2026-03-01T12:00:00Z/a.csv", b"deviceId,site\nd1,hall\n")
    put(client, root, "valid_from=2026-03-01T12:00:00Z/b.csv", b"deviceId,site\nd2,")  # still being written
    assert list_snapshots(root, "csv", roots=roots) == []
    put(client, root, "valid_from=2026-03-01T12:00:00Z/b.csv", b"deviceId,site\nd2,yard\n")
    put(client, root, f"valid_from=2026-03-01T12:00:00Z/{PUBLISHED}", b"")
    (snapshot,) = list_snapshots(root, "csv", roots=roots)
    assert [f[0] for f in snapshot.files] == ["a.csv", "b.csv"]
    assert read_snapshot(snapshot, CSV, roots=roots).num_rows == 2


def test_a_file_changed_after_it_was_listed_or_recorded_is_refused(s3, tmp_path):
    client, root, roots = s3
    put(client, root, "valid_from=2026-03-01T12:00:00Z/a.csv", b"deviceId,site\nd1,hall\n")
    put(client, root, f"valid_from=2026-03-01T12:00:00Z/{PUBLISHED}", b"")
    hashes: dict = {}
    snapshots = list_snapshots(root, "csv", hashes, roots=roots)
    paths = JobPaths(tmp_path / "run")
    record_snapshots(paths, "devices", [(s.valid_from_us, s.fingerprint) for s in snapshots], None, None)
    put(client, root, "valid_from=2026-03-01T12:00:00Z/a.csv", b"deviceId,site\nd1,vault\n")  # same size, new bytes
    with pytest.raises(ConfigError, match=r"valid_from=2026-03-01T12:00:00Z/a\.csv' changed while it was read"):
        read_snapshot(snapshots[0], CSV, roots=roots)  # read as listed (If-Match), not the new bytes
    again = list_snapshots(root, "csv", hashes, roots=roots)  # a new ETag: hashed again
    assert again[0].files != snapshots[0].files
    with pytest.raises(ConfigError, match="changed after the job joined it"):
        record_snapshots(paths, "devices", [(s.valid_from_us, s.fingerprint) for s in again], None, None)


def test_a_capture_publishes_into_an_s3_folder_whole_and_only_when_the_table_changed(s3):
    client, root, roots = s3
    rows = pa.table({"deviceId": ["d1"], "site": ["hall"]})
    # a capture of 12:00 that died after its file, before its marker: not a snapshot, and overwritten
    put(client, root, "valid_from=2026-03-01T12:00:00Z/table.parquet", b"half")
    assert list_snapshots(root, "parquet", roots=roots) == []
    first = publish_snapshot(rows, root, NOON + 123)
    assert first == root.child("valid_from=2026-03-01T12:00:00Z")
    assert publish_snapshot(rows, root, NOON + 60_000_000) is None  # unchanged: nothing
    changed = pa.table({"deviceId": ["d1", "d2"], "site": ["roof", "yard"]})
    with pytest.raises(ConfigError, match="is not older than the capture time"):
        publish_snapshot(changed, root, NOON)
    second = publish_snapshot(changed, root, NOON + 120_000_000)
    assert second == root.child("valid_from=2026-03-01T12:02:00Z")
    snapshots = list_snapshots(root, "parquet", roots=roots)
    assert [s.valid_from_us for s in snapshots] == [NOON, NOON + 120_000_000]
    assert read_snapshot(snapshots[0], PARQUET, roots=roots).to_pylist() == [{"deviceId": "d1", "site": "hall"}]
    assert read_snapshot(snapshots[1], PARQUET, roots=roots).num_rows == 2
