"""The DuckDB consumer view over lineages on a real S3 store (tidegate.runtime.outputs.duckdb_view):
the same rows as the same batches on a local root, each lineage over its span; a batch is in
it whole once its commit record is there and not before, however many attempts wrote files;
and no key is in anything the view leaves behind.

Timeline of the two lineages (three hours from H0; every batch has rows in each hour)::

    l1  batches 0-2 ──────────── T ┐
    l2                              └─ batches 0-1 ───────────▶   T = H0 + 1h: l1's rows with
                                                                  window_end ≤ T, l2's after it
"""

from __future__ import annotations

import json
import time
from datetime import date
from types import SimpleNamespace as NS

import pyarrow as pa
import pytest

from s3 import BUCKETS, region_env
from tidegate.lineage import commits
from tidegate.lineage.layout import BATCH_COLUMN, HOUR_US, JobPaths
from tidegate.runtime.outputs.duckdb_session import connect
from tidegate.runtime.outputs.reader import publish_view
from tidegate.spark.pipeline.sink.files import HOUR_KEY, write_batch_table
from tidegate.spark.pipeline.sink.objects import hour_parts, parquet_rows

H0 = 1_767_225_600_000_000 // HOUR_US  # 2026-01-01T00:00Z in hours
T = (H0 + 1) * HOUR_US
ROWS = 6  # per batch: two in each of three hours


def batch_rows(lineage: int, batch_id: int) -> pa.Table:
    """Window rows of one batch, two per hour of H0..H0+2, with the columns the driver adds;
    ``id`` says which lineage and batch wrote the row (``id // 100``)."""
    ids = [(lineage * 10 + batch_id) * 100 + i for i in range(ROWS)]
    ends = [(H0 + i % 3) * HOUR_US + (batch_id + 1) * 60_000_000 for i in range(ROWS)]
    return pa.table(
        {
            "window_end": pa.array(ends, pa.timestamp("us", tz="UTC")),
            "id": ids,
            BATCH_COLUMN: pa.array([batch_id] * ROWS, pa.int64()),
            HOUR_KEY: [end // HOUR_US for end in ends],
        }
    )


def expected(lineage: int, batches, after_us=None, through_us=None) -> list[int]:
    ids = []
    for batch_id in batches:
        rows = batch_rows(lineage, batch_id).to_pylist()
        ids += [
            r["id"]
            for r in rows
            if (after_us is None or r["window_end"].timestamp() * 1e6 > after_us)
            and (through_us is None or r["window_end"].timestamp() * 1e6 <= through_us)
        ]
    return sorted(ids)


@pytest.fixture
def region(s3_stores, monkeypatch, tmp_path):
    """The east region's lineages l1 and l2 on its store (handed over at T), its keys in
    ``TIDEGATE_S3_EAST_*`` as an operator sets them, and a controller whose database holds them."""
    for name, value in region_env("east", s3_stores["east"]).items():
        monkeypatch.setenv(name, value)
    prefix = f"s3a://{BUCKETS['east']}/views-{time.time_ns()}"
    rows = [
        NS(id="l1", root=f"{prefix}/l1", output_from_us=None, output_until_us=T, windowed=True, created_by_run=None),
        NS(id="l2", root=f"{prefix}/l2", output_from_us=T, output_until_us=None, windowed=True, created_by_run=None),
    ]
    db = NS(
        active_region=lambda job: NS(region="east", since=0.0, reason="first start"),
        lineages=lambda job, region: rows,
    )
    paths = [JobPaths.at(row.root, region="east") for row in rows]
    return NS(controller=NS(db=db, config=NS(home=tmp_path)), paths=paths, store=s3_stores["east"])


def view_ids(controller, job: str = "job") -> list[int]:
    con = connect(controller, job)
    try:
        return sorted(r[0] for r in con.execute('SELECT id FROM "job"').fetchall())
    finally:
        con.close()


def test_the_view_over_s3_lineages_reads_each_over_its_span_as_the_same_batches_on_a_local_root(region, tmp_path):
    l1, l2 = region.paths
    for batch_id in range(3):
        write_batch_table(batch_rows(1, batch_id), l1.output, batch_id, store=l1.store)
    for batch_id in range(2):
        write_batch_table(batch_rows(2, batch_id), l2.output, batch_id, store=l2.store)

    ids = view_ids(region.controller)
    assert ids == sorted(expected(1, range(3), through_us=T) + expected(2, range(2), after_us=T))
    con = connect(region.controller, "job")  # date and hour as the local view has them from its folders
    hours = con.execute('SELECT DISTINCT date, hour FROM "job" ORDER BY hour').fetchall()
    assert hours == [(date(2026, 1, 1), "00"), (date(2026, 1, 1), "01"), (date(2026, 1, 1), "02")]
    con.close()

    # the same batches on a local root: the glob over folders and the list by record agree
    local = [JobPaths(tmp_path / name) for name in ("l1", "l2")]
    for paths, lineage, batches in ((local[0], 1, range(3)), (local[1], 2, range(2))):
        paths.output.mkdir(parents=True)
        for batch_id in batches:
            write_batch_table(batch_rows(lineage, batch_id), paths.output, batch_id)
    for row, paths in zip(region.controller.db.lineages("job", "east"), local, strict=True):
        row.root = str(paths.root)
    assert view_ids(region.controller) == ids


def test_a_reader_sees_a_batch_being_committed_whole_once_its_record_is_there_never_part_or_twice(region):
    """Batch 1 of l2 is written by two attempts, hour by hour, and one record decides. Between
    every step the view is made afresh and read, as a consumer polling it would."""
    _, l2 = region.paths
    store = l2.store
    write_batch_table(batch_rows(2, 0), l2.output, 0, store=store)
    committed = expected(2, [0], after_us=T)
    seen = []

    def read() -> None:
        ids = view_ids(region.controller)
        seen.append(ids)
        assert ids == committed  # whatever files are on the store, the view holds committed batches only

    read()
    attempts = {"winner": [], "loser": []}
    for attempt in ("winner", "loser"):  # each writes its files of batch 1, one hour at a time
        for hour, part in hour_parts(batch_rows(2, 1), l2.output, 1):
            path = commits.part_path(l2.output, hour, 1, attempt)
            store.write_parquet(part, path)
            attempts[attempt].append(commits.CommittedFile(hour, str(path.relative_to(l2.output)), part.num_rows))
            read()
    # a glob would have read both attempts' files: the hazard the list by record removes
    con = connect(region.controller, "job")
    glob = f"s3://{l2.output}/date=*/hour=*/batch-1/*.parquet"
    assert con.execute(f"SELECT count(*) FROM read_parquet('{glob}')").fetchone()[0] == 2 * ROWS
    con.close()

    assert commits.commit_batch(store, l2.output, 1, attempts["winner"], epoch=1, attempt="winner")
    committed = sorted(committed + expected(2, [1], after_us=T))
    read()  # the loser's files are still there: the record names the winner's
    assert not commits.commit_batch(store, l2.output, 1, attempts["loser"], epoch=1, attempt="loser")
    read()
    assert sum(parquet_rows(store, l2.output / f.path) for f in attempts["winner"]) == ROWS
    assert len(seen) == 1 + 2 * 3 + 2


def test_the_view_file_and_manifest_name_the_secret_to_create_and_hold_no_key(region):
    l1, _ = region.paths
    write_batch_table(batch_rows(1, 0), l1.output, 0, store=l1.store)
    sql_path = publish_view(region.controller, "job")
    assert sql_path is not None
    sql, manifest = sql_path.read_text(), sql_path.with_suffix(".json").read_text()
    keys = region.store.settings().credentials
    for text in (sql, manifest):  # (the test store's key id is its bucket's name: that one is in them)
        assert keys.secret_access_key not in text and "KEY_ID '" not in text and "SECRET '" not in text
    assert "CREATE TEMPORARY SECRET tidegate_tidegate_east (TYPE 's3'" in sql
    assert "KEY_ID …, SECRET …" in sql and f"s3://{l1.output}/" in sql
    doc = json.loads(manifest)
    assert [lineage["lineage"] for lineage in doc["lineages"]] == ["l1"] and doc["not_in_view"] == []
    assert all(f.startswith("s3://") for f in doc["lineages"][0]["files"])
