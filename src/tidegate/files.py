"""Small file helpers: atomic replace, directory fsync, advisory locks, the tail of a log."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def fsync_dir(path: Path) -> None:
    """Make a create, rename or unlink inside ``path`` survive a power cut."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Readers see the old content or the new one, never a mix: write a temp file, fsync, rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def flocked(path: Path, exclusive: bool) -> Iterator[None]:
    """Hold an advisory ``flock`` on ``path`` (created if missing) for the ``with`` block.

    flock locks belong to the open file description, so two threads of one process that
    each open the file exclude each other just as two processes do.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def flocked_all(paths: list[Path], exclusive: bool) -> Iterator[None]:
    """Lock several files, always in the given order, so two multi-lockers cannot deadlock."""
    with contextlib.ExitStack() as stack:
        for path in paths:
            stack.enter_context(flocked(path, exclusive))
        yield


def tail(path: Path | str | None, lines: int = 30) -> str:
    """The last ``lines`` lines of a log, for an error message; says so when there is none."""
    try:
        text = Path(path).read_text(errors="replace").splitlines() if path else None
    except OSError:
        text = None
    if text is None:
        return "(no log written)"
    return "\n".join(text[-lines:]) or "(log empty)"
