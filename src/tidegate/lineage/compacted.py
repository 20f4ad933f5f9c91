"""What one compaction of an output did, on a local folder or an object store."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath


@dataclass(frozen=True)
class Compacted:
    """What one compaction of an output did."""

    output: PurePath
    through_batch: int | None  # the published boundary after it (None: nothing ever compacted)
    files_written: int = 0
    folders_merged: int = 0
    folders_removed: int = 0
    hours: list[int] = field(default_factory=list)  # the hours that got a compacted file

    def describe(self) -> str:
        if self.through_batch is None:
            return f"{self.output}: nothing to compact"
        return (
            f"{self.output}: through batch {self.through_batch}, {self.folders_merged} batch folders merged "
            f"into {self.files_written} files, {self.folders_removed} merged folders removed"
        )
