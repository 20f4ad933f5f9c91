"""Versioned engine state: what batch N−1 left for batch N, committed through the sink's rename."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from tidegate.lineage.committed import committed_versions
from tidegate.lineage.fence import NO_FENCE
from tidegate.lineage.layout import COMMITTED_FILE, staging_dir
from tidegate.spark.pipeline.sink.files import publish


class StateStore:
    """Versioned engine state: version N is written by batch N and valid once committed.

    A version holds Parquet frames (``policy``: unit and partition states; ``buffer``:
    events open windows still need; ``frontiers``: per-key watermarks) and
    ``_committed.json``, written last and renamed into place with the rest.
    """

    def __init__(self, spark: SparkSession, root: Path, fence=NO_FENCE) -> None:
        self.spark = spark
        self.root = root
        self.fence = fence

    def latest_before(self, batch_id: int) -> int | None:
        earlier = [v for v in committed_versions(self.root) if v < batch_id]
        return max(earlier) if earlier else None

    def path(self, version: int, frame: str) -> Path:
        return self.root / str(version) / frame

    def meta(self, version: int | None) -> dict:
        if version is None:
            return {}
        return json.loads((self.root / str(version) / COMMITTED_FILE).read_text())

    def frame(self, version: int | None, name: str, schema: StructType | None = None) -> DataFrame | None:
        """A frame of a version; with its ``schema`` known, without reading any footer."""
        if version is None or not self.path(version, name).exists():
            return None
        reader = self.spark.read if schema is None else self.spark.read.schema(schema)
        return reader.parquet(str(self.path(version, name)))

    def document(self, version: int | None, name: str) -> dict:
        path = None if version is None else self.root / str(version) / f"{name}.json"
        return json.loads(path.read_text()) if path is not None and path.exists() else {}

    def staging(self, batch_id: int) -> Path:
        """A fresh directory the frames of version ``batch_id`` are written into."""
        return staging_dir(self.root, str(batch_id))

    def commit(self, batch_id: int, staged: Path, meta: dict, documents: dict) -> None:
        """Make the staged frames version ``batch_id``: documents, ``_committed.json``, rename.
        An earlier attempt's version of this batch (same input, same state) is replaced."""
        staged.mkdir(parents=True, exist_ok=True)
        for name, doc in documents.items():
            (staged / f"{name}.json").write_text(json.dumps(doc, sort_keys=True))
        (staged / COMMITTED_FILE).write_text(json.dumps(meta, sort_keys=True))
        publish(staged, self.root / str(batch_id), fence=self.fence, replace=True)
        self._forget_before(batch_id - 1)

    def _forget_before(self, keep_from: int) -> None:
        # keep the previous version: a re-run of this batch needs it
        for p in self.root.iterdir():
            if p.name.isdigit() and int(p.name) < keep_from:
                shutil.rmtree(p, ignore_errors=True)
