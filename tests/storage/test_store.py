"""The store every lineage's I/O goes through, local and on a real S3 store: the same answers
from both — whole-object writes, put-if-absent refused the second time, lists, deletes, Parquet."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

from s3 import BUCKETS
from tidegate.errors import TidegateError
from tidegate.storage.store import LOCAL, S3Store, open_store
from tidegate.storage.uri import parse_root


@pytest.fixture(params=["local", "s3"])
def store_root(request, tmp_path):
    """(store, the path of a fresh root in it)."""
    if request.param == "local":
        return LOCAL, LOCAL.path_of(parse_root(str(tmp_path / "root")))
    stores = request.getfixturevalue("s3_stores")
    store = S3Store(stores["east"].settings())
    return store, store.path_of(parse_root(f"s3a://{BUCKETS['east']}/store-tests/{time.time_ns()}"))


def test_objects_are_written_whole_read_back_and_replaced(store_root):
    store, root = store_root
    path = root / "a" / "doc.json"
    assert not store.exists(path) and store.read_json(path, "none") == "none"
    with pytest.raises(FileNotFoundError):
        store.read_bytes(path)
    store.write_json(path, {"n": 1})
    store.write_json(path, {"n": 2})
    assert store.exists(path) and store.read_json(path) == {"n": 2}
    assert store.exists(root / "a")  # a prefix counts as a folder


def test_a_put_if_absent_is_refused_once_the_object_exists(store_root):
    store, root = store_root
    path = root / "_commits" / "7.json"
    assert store.put_json_if_absent(path, {"epoch": 1}) is True
    assert store.put_json_if_absent(path, {"epoch": 2}) is False
    assert store.read_json(path) == {"epoch": 1}
    assert [e.name for e in store.list(root / "_commits")] == ["7.json"]  # no temporary left beside it


def test_lists_one_level_or_everything_and_deletes_a_prefix(store_root):
    store, root = store_root
    for name in ("x/date=1/a.parquet", "x/date=1/b.parquet", "x/date=2/c.parquet", "x/top.json"):
        store.write_bytes(root / name, b"1")
    level = store.list(root / "x")
    assert [(e.name, e.is_dir) for e in level] == [("date=1", True), ("date=2", True), ("top.json", False)]
    deep = store.list(root / "x", recursive=True)
    assert [str(e.path.relative_to(root)) for e in deep] == [
        "x/date=1/a.parquet",
        "x/date=1/b.parquet",
        "x/date=2/c.parquet",
        "x/top.json",
    ]
    assert all(not e.is_dir and e.size == 1 for e in deep)
    store.delete(root / "x" / "date=1")
    store.delete(root / "x" / "top.json")
    store.delete(root / "nothing-here")
    assert [str(e.path.relative_to(root)) for e in store.list(root / "x", recursive=True)] == ["x/date=2/c.parquet"]
    assert store.list(root / "nothing-here") == []


def test_a_tree_moves_whole_to_a_free_name_and_never_onto_one_taken(store_root):
    store, root = store_root
    names = ("lineages/l1/_commits/0.json", "lineages/l1/output/date=1/a.parquet", "lineages/l2/lineage.json")
    for name in names:
        store.write_bytes(root / "job" / name, name.encode())
    assert store.move_tree(root / "job", root / "lost" / "job-1") == 3
    assert store.list(root / "job", recursive=True) == [] and not store.exists(root / "job" / names[0])
    moved = store.list(root / "lost" / "job-1", recursive=True)
    assert [str(e.path.relative_to(root / "lost" / "job-1")) for e in moved] == list(names)
    assert all(store.read_bytes(e.path) == str(e.path.relative_to(root / "lost" / "job-1")).encode() for e in moved)
    assert store.move_tree(root / "job", root / "lost" / "job-2") == 0  # nothing there: nothing moved
    store.write_bytes(root / "other" / "x.json", b"1")
    with pytest.raises(TidegateError, match="cannot move"):
        store.move_tree(root / "other", root / "lost" / "job-1")
    assert store.read_bytes(root / "other" / "x.json") == b"1"  # a refused move touches nothing
    assert store.move_tree(root / "lost" / "job-1", root / "job") == 3  # and back
    assert store.read_bytes(root / "job" / names[2]) == names[2].encode()


def test_on_s3_a_prefix_that_holds_only_folder_markers_is_not_there(s3_stores):
    """SeaweedFS keeps folders (a marker S3A or pyarrow made, a folder emptied a moment ago) and
    lists them as prefixes; S3 has none, so such a prefix holds nothing and does not exist."""
    store = S3Store(s3_stores["east"].settings())
    root = store.path_of(parse_root(f"s3a://{BUCKETS['east']}/store-tests/{time.time_ns()}"))
    store.filesystem.create_dir(str(root / "job" / "lineages" / "l1"))  # markers, no object
    assert [e.name for e in store.list(root / "job")] == ["lineages"]  # listed as a folder …
    assert not store.exists(root / "job") and not store.exists(root / "job" / "lineages")  # … yet nothing is there
    store.write_bytes(root / "job" / "lineages" / "l1" / "lineage.json", b"{}")
    assert store.exists(root / "job") and store.exists(root / "job" / "lineages" / "l1" / "lineage.json")
    store.delete(root / "job" / "lineages" / "l1" / "lineage.json")
    assert not store.exists(root / "job")


def test_parquet_goes_through_the_store_s_filesystem(store_root):
    store, root = store_root
    table = pa.table({"n": [1, 2, 3], "s": ["a", "b", "c"]})
    store.write_parquet(table, root / "out" / "part-0.parquet")
    assert store.read_parquet(root / "out" / "part-0.parquet").equals(table)


def test_an_s3_store_travels_by_its_settings_and_finds_its_keys_again_where_it_lands(s3_stores):
    import pickle

    store = S3Store(s3_stores["east"].settings())
    path = f"{BUCKETS['east']}/store-tests/{time.time_ns()}/doc.json"
    store.write_bytes(path, b"{}")  # its filesystem and keys are made …
    landed = pickle.loads(pickle.dumps(store))  # … and left behind
    assert landed.settings == store.settings and landed.read_bytes(path) == b"{}"


def test_uris_are_what_spark_opens():
    assert LOCAL.uri(Path("/srv/x/output")) == "/srv/x/output"
    root = parse_root("s3a://bucket-a/tidegate/east")
    assert open_store(parse_root("/srv/x")) is LOCAL
    from tidegate.storage.s3 import S3Settings

    s3 = S3Store(S3Settings(endpoint="http://127.0.0.1:1"))
    assert s3.uri(s3.path_of(root) / "output") == "s3a://bucket-a/tidegate/east/output"


def test_a_lineage_root_as_the_control_database_records_it_opens_in_its_store(tmp_path):
    from tidegate.lineage.layout import JobPaths
    from tidegate.storage.s3 import S3Settings

    local = JobPaths.at(str(tmp_path / "lineage"))
    assert local.store is LOCAL and local.root == tmp_path / "lineage" and not local.on_object_store
    remote = JobPaths.at("s3a://bucket-a/east/lineage-7", S3Settings(endpoint="http://127.0.0.1:1"))
    assert remote.on_object_store and str(remote.output) == "bucket-a/east/lineage-7/output"
    assert remote.uri(remote.checkpoint) == "s3a://bucket-a/east/lineage-7/checkpoint"
