"""Two real S3-compatible stores, one per region: pyarrow reads and writes each, a conditional
put is refused the second time, and a lost store fails fast and comes back with what it held."""

from __future__ import annotations

import os
import subprocess
import time

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from platform_support import REPO
from s3 import BUCKETS, require_weed
from tidegate.storage import aws, seaweedfs
from tidegate.storage.aws import arrow_filesystem
from tidegate.storage.store import S3Store
from tidegate.storage.uri import parse_root


def test_each_region_s_store_writes_reads_and_lists_on_its_own(s3_stores):
    for region, store in s3_stores.items():
        fs = arrow_filesystem(store.settings())
        root = parse_root(f"s3a://{BUCKETS[region]}/lineages/{region}")
        table = pa.table({"region": [region] * 3, "n": [1, 2, 3]})
        pq.write_table(table, f"{root.arrow_path}/part-0.parquet", filesystem=fs)
        with fs.open_output_stream(f"{root.arrow_path}/_committed.json") as out:
            out.write(b'{"batch": 0}')
        assert pq.read_table(f"{root.arrow_path}/part-0.parquet", filesystem=fs).equals(table)
        listed = fs.get_file_info(pafs.FileSelector(root.arrow_path, recursive=True))
        assert sorted(i.base_name for i in listed) == ["_committed.json", "part-0.parquet"]
    # independent stores: east's bucket is not on west's server
    west = arrow_filesystem(s3_stores["west"].settings())
    assert west.get_file_info(BUCKETS["east"]).type == pafs.FileType.NotFound


def test_a_conditional_put_is_refused_once_the_object_exists(s3_stores):
    from botocore.exceptions import ClientError

    s3 = aws.client(s3_stores["east"].settings(), attempts=1)
    key = f"commits/{time.time_ns()}.json"
    s3.put_object(Bucket=BUCKETS["east"], Key=key, Body=b'{"epoch": 1}', IfNoneMatch="*")
    with pytest.raises(ClientError) as second:
        s3.put_object(Bucket=BUCKETS["east"], Key=key, Body=b'{"epoch": 2}', IfNoneMatch="*")
    assert second.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert second.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.get_object(Bucket=BUCKETS["east"], Key=key)["Body"].read() == b'{"epoch": 1}'


def test_keys_the_store_does_not_know_are_refused(s3_stores):
    from tidegate.storage.s3 import S3Credentials, S3Settings

    store = s3_stores["west"]
    stranger = S3Settings(endpoint=store.endpoint, credentials=S3Credentials(store.credentials.access_key_id, "wrong"))
    with pytest.raises(OSError) as refused:
        S3Store(stranger).put_if_absent(f"{BUCKETS['west']}/nope", b"x")
    assert "403" in str(refused.value) and "SignatureDoesNotMatch" in str(refused.value)


def test_a_lost_store_fails_fast_and_comes_back_with_what_it_held(s3_stores):
    east, west = s3_stores["east"], s3_stores["west"]
    path = f"{BUCKETS['east']}/kept/{time.time_ns()}"
    with arrow_filesystem(east.settings()).open_output_stream(path) as out:
        out.write(b"before the loss")
    east.stop()
    lost = arrow_filesystem(east.settings(attempts=2, connect_timeout_s=1))
    started = time.monotonic()
    with pytest.raises(OSError) as failed:
        lost.get_file_info(path)
    assert time.monotonic() - started < 15
    assert "127.0.0.1" in str(failed.value) or "connect" in str(failed.value).lower()
    # the other region's store is untouched
    assert arrow_filesystem(west.settings()).get_file_info(BUCKETS["west"]).type == pafs.FileType.Directory
    east.start()
    with arrow_filesystem(east.settings()).open_input_stream(path) as back:
        assert back.read() == b"before the loss"


def test_setup_built_the_pinned_server_and_a_second_run_is_offline_and_instant():
    weed = require_weed()
    script = REPO / "scripts" / "seaweedfs.sh"
    where = subprocess.run(["bash", str(script), "--path"], capture_output=True, text=True, timeout=30)
    assert where.stdout.strip() == str(weed)
    assert seaweedfs.pinned_version() in str(weed) and not weed.is_relative_to(REPO)
    # without Go on PATH: a built server needs neither the toolchain nor the network
    env = {k: v for k, v in os.environ.items() if k in ("HOME", "XDG_CACHE_HOME", "TIDEGATE_CACHE")}
    started = time.monotonic()
    again = subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, timeout=60, env=env | {"PATH": "/usr/bin:/bin"}
    )
    assert again.returncode == 0 and again.stderr == "" and time.monotonic() - started < 5
