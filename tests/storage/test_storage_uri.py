"""A region's storage root: local folders and s3a:// roots parse; the rest is refused with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.storage.uri import parse_root


def test_a_local_path_is_a_local_root_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_root("var/east").path == tmp_path / "var" / "east"
    assert parse_root("/srv/tidegate/./east//").path == Path("/srv/tidegate/east")
    assert parse_root(Path("west"), base=Path("/data")).path == Path("/data/west")
    root = parse_root("/srv/tidegate/east")
    assert root.is_local and root.uri == "file:///srv/tidegate/east" and root.arrow_path == "/srv/tidegate/east"


def test_a_file_uri_is_the_same_local_root():
    assert parse_root("file:///srv/tidegate/east") == parse_root("/srv/tidegate/east")
    assert parse_root("file://localhost/srv/a%20b").path == Path("/srv/a b")


def test_an_s3a_root_is_a_bucket_and_a_prefix():
    root = parse_root("s3a://tidegate-east/lineages/prod/")
    assert not root.is_local
    assert (root.bucket, root.prefix) == ("tidegate-east", "lineages/prod")
    assert root.uri == "s3a://tidegate-east/lineages/prod"
    assert root.arrow_path == "tidegate-east/lineages/prod"
    assert str(root.child("job-a", "output")) == "s3a://tidegate-east/lineages/prod/job-a/output"
    top = parse_root("s3a://tidegate-east")
    assert top.prefix == "" and top.uri == "s3a://tidegate-east" and top.child("x").uri == "s3a://tidegate-east/x"


def test_a_local_root_has_children_too(tmp_path):
    assert parse_root(tmp_path).child("a", "b").path == tmp_path / "a" / "b"


@pytest.mark.parametrize(
    "text, says",
    [
        (
            "abfss://container@account.dfs.core.windows.net/x",
            "Azure Data Lake Storage (ADLS Gen2) (abfss://) is not supported yet",
        ),
        ("gs://bucket/x", "Google Cloud Storage (gs://) is not supported yet"),
        ("hdfs://namenode/x", "HDFS (hdfs://) is not supported yet"),
        ("s3://bucket/x", "write s3a://bucket/x"),
        ("ftp://host/x", "unknown scheme ftp://"),
        ("", "empty"),
        ("   ", "empty"),
        ("s3a:///prefix", "names no bucket"),
        ("s3a://Bucket_Upper/x", "not a valid bucket name"),
        ("s3a://ab/x", "not a valid bucket name"),
        ("s3a://192.168.1.1/x", "IP address"),
        ("s3a://bucket/a//b", "not a plain name"),
        ("s3a://bucket/a/../b", "not a plain name"),
        ("s3a://bucket/x?versionId=1", "query"),
        ("file://otherhost/x", "names host"),
        ("/srv/../etc", "'..'"),
    ],
)
def test_what_is_not_a_root_is_refused_with_what_to_write(text, says):
    with pytest.raises(ConfigError) as refused:
        parse_root(text)
    assert says in str(refused.value)


def test_a_root_never_carries_keys_and_the_message_does_not_repeat_them():
    with pytest.raises(ConfigError) as refused:
        parse_root("s3a://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/prefix")
    message = str(refused.value)
    assert "carries credentials" in message and "instance role" in message
    assert "wJalrXUtnFEMI" not in message and "AKIAEXAMPLE" not in message


def test_a_child_is_a_plain_name():
    root = parse_root("s3a://bucket/p")
    for bad in ("", "..", "a/b"):
        with pytest.raises(ConfigError):
            root.child(bad)
