"""Versioned engine state: what batch N−1 left for batch N, committed through the sink's rename
— or, on an object store, by creating the version's ``_committed.json`` once."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path, PurePath

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from tidegate.lineage.committed import committed_versions
from tidegate.lineage.fence import NO_FENCE
from tidegate.lineage.layout import COMMITTED_FILE, staging_dir
from tidegate.spark.pipeline.sink.files import publish
from tidegate.storage.store import LOCAL, Store


class StateStore:
    """Versioned engine state: version N is written by batch N and valid once committed.

    A version holds Parquet frames (``policy``: unit and partition states; ``buffer``:
    events open windows still need; ``frontiers``: per-key watermarks) and
    ``_committed.json``, written last and renamed into place with the rest.

    On an object store a version's frames stay where they were written, in an attempt
    folder (``N/<attempt>/``), and ``N/_committed.json`` — created once, naming the attempt —
    commits it; a later attempt of the same batch (same input, same state) is refused and
    its frames are garbage (:func:`tidegate.lineage.commits.clear_state_attempts`).
    """

    def __init__(self, spark: SparkSession, root: PurePath, fence=NO_FENCE, store: Store = LOCAL) -> None:
        self.spark = spark
        self.root = root
        self.fence = fence
        self.store = store
        self._metas: dict[int, dict] = {}  # committed versions never change

    def latest_before(self, batch_id: int) -> int | None:
        earlier = [v for v in committed_versions(self.root, self.store, known=self._metas) if v < batch_id]
        return max(earlier) if earlier else None

    def path(self, version: int, frame: str) -> PurePath:
        if self.store.is_local:
            return self.root / str(version) / frame
        return self.root / str(version) / self.meta(version)["attempt"] / frame

    def meta(self, version: int | None) -> dict:
        if version is None:
            return {}
        if version not in self._metas:
            self._metas[version] = json.loads(self.store.read_bytes(self.root / str(version) / COMMITTED_FILE))
        return self._metas[version]

    def frame(self, version: int | None, name: str, schema: StructType | None = None) -> DataFrame | None:
        """A frame of a version; with its ``schema`` known, without reading any footer."""
        if version is None or not self.store.exists(self.path(version, name)):
            return None
        reader = self.spark.read if schema is None else self.spark.read.schema(schema)
        return reader.parquet(self.store.uri(self.path(version, name)))

    def document(self, version: int | None, name: str) -> dict:
        if version is None:
            return {}
        return self.store.read_json(self.path(version, f"{name}.json"), {})

    def staging(self, batch_id: int) -> PurePath:
        """A fresh directory the frames of version ``batch_id`` are written into."""
        if self.store.is_local:
            return staging_dir(self.root, str(batch_id))
        return self.root / str(batch_id) / uuid.uuid4().hex

    def commit(self, batch_id: int, staged: PurePath, meta: dict, documents: dict) -> None:
        """Make the staged frames version ``batch_id``: documents, ``_committed.json``, rename.
        An earlier attempt's version of this batch (same input, same state) is replaced —
        kept, on an object store."""
        if not self.store.is_local:
            for name, doc in documents.items():
                self.store.write_json(staged / f"{name}.json", doc)
            mine = meta | {"attempt": staged.name}
            with self.fence.commit(f"state version {batch_id}"):
                won = self.store.put_json_if_absent(self.root / str(batch_id) / COMMITTED_FILE, mine)
            if won:  # the next batch starts from it: no need to read back what was just created
                self._metas[batch_id] = mine
            self._forget_before(batch_id - 1)
            return
        local = Path(staged)  # a local store's paths are local paths
        local.mkdir(parents=True, exist_ok=True)
        for name, doc in documents.items():
            (local / f"{name}.json").write_text(json.dumps(doc, sort_keys=True))
        (local / COMMITTED_FILE).write_text(json.dumps(meta, sort_keys=True))
        publish(local, Path(self.root) / str(batch_id), fence=self.fence, replace=True)
        self._forget_before(batch_id - 1)

    def _forget_before(self, keep_from: int) -> None:
        # keep the previous version: a re-run of this batch needs it
        for entry in self.store.list(self.root):
            if entry.name.isdigit() and int(entry.name) < keep_from:
                self._metas.pop(int(entry.name), None)
                if self.store.is_local:
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    self.store.delete(entry.path)
