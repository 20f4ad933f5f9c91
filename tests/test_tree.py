"""The repository as a whole: what no tracked file may hold."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFLICT = re.compile(r"^(<{7}|>{7})( |$)", re.MULTILINE)


def test_no_tracked_file_holds_a_merge_conflict_marker():
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    marked = []
    for name in filter(None, tracked.decode().split("\0")):
        path = REPO / name
        if not path.is_file() or path.suffix in (".parquet", ".jar", ".png", ".db"):
            continue
        text = path.read_bytes()[:2_000_000].decode("utf-8", errors="ignore")
        marked += [f"{name}:{text.count(chr(10), 0, m.start()) + 1}" for m in CONFLICT.finditer(text)]
    assert not marked, f"unresolved merge conflicts, resolve them: {marked}"
