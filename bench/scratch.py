"""The benchmarks' working directory: the one given with --work (kept), else a temporary one
removed when the benchmark ends, pass or fail."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def scratch(given: Path | None, name: str) -> Iterator[Path]:
    if given is not None:
        yield given
        return
    work = Path(tempfile.mkdtemp(prefix=f"tidegate-bench-{name}-"))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
