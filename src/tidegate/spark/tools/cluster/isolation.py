"""Workers that share no disk with their driver, on one machine: a mount namespace per worker.

A claim such as "nothing a job does depends on a disk its driver and its executors share"
can only be tested where the executors really do not see the driver's files. On one machine
that is a mount namespace: the worker (and so every executor and Python worker it starts,
which inherit it) runs under ``unshare --mount --propagation private``, where

* each folder of :attr:`WorkerView.hidden` is covered by an empty ``tmpfs`` — the driver's
  home, its work folders, the test's scratch: to the worker they exist and are empty;
* each folder of :attr:`WorkerView.read_only` is bound back at its own path, read-only, even
  inside a hidden folder — what an executor host gets installed or mounted from elsewhere
  (the embedded event log's folder: its executors read the log's segment files by path).

Nothing is unmounted or changed outside the namespace, and it ends with the worker's last
process. Linux only; mounting needs root (or ``CAP_SYS_ADMIN``): :func:`check_available` says
so before anything starts. The command is built by a pure function, :func:`isolated_command`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tidegate.errors import TidegateError

TMPFS_SOURCE = "tidegate-hidden"  # the name `findmnt` shows for a covered folder


@dataclass(frozen=True)
class WorkerView:
    """What a worker's processes see of this machine's folders, beyond what everyone sees:
    ``hidden`` folders appear empty; ``read_only`` folders show their files and refuse writes.
    Paths are absolute; a read-only folder may lie inside a hidden one."""

    hidden: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        for path in (*self.hidden, *self.read_only):
            if not Path(path).is_absolute():
                raise TidegateError(f"worker view: {path} is not an absolute path",
                                    "give absolute folders: a mount needs them")  # fmt: skip
        object.__setattr__(self, "hidden", tuple(Path(p) for p in self.hidden))
        object.__setattr__(self, "read_only", tuple(Path(p) for p in self.read_only))

    def __bool__(self) -> bool:
        return bool(self.hidden or self.read_only)


def isolated_command(argv: list[str], view: WorkerView, stage: Path) -> list[str]:
    """``argv`` run in a mount namespace of its own with ``view`` applied.

    ``stage`` is an empty folder outside every hidden one: each read-only folder is bound
    there first (numbered), before the hidden folders are covered, then bound back at its own
    path and made read-only, and the stage's binding is let go. Then ``exec``: the command
    keeps the PID (and process group) ``unshare`` started with.
    """
    lines = ["set -e"]
    for i, path in enumerate(view.read_only):
        held = shlex.quote(str(stage / str(i)))
        lines += [f"mkdir -p {held}", f"mount --bind {shlex.quote(str(path))} {held}"]
    lines += [f"mount -t tmpfs -o mode=0755 {TMPFS_SOURCE} {shlex.quote(str(path))}" for path in view.hidden]
    for i, path in enumerate(view.read_only):
        held, there = shlex.quote(str(stage / str(i))), shlex.quote(str(path))
        lines += [f"mkdir -p {there}", f"mount --bind {held} {there}", f"mount -o remount,bind,ro {there}",
                  f"umount {held}"]  # fmt: skip
    lines.append('exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", "\n".join(lines), "sh", *argv]


def check_available() -> None:
    """Raise, saying why, unless this machine can run a worker in a mount namespace of its own."""
    if shutil.which("unshare") is None:
        raise TidegateError("no `unshare` on PATH: a worker cannot get a mount namespace of its own",
                            "install util-linux")  # fmt: skip
    if os.geteuid() != 0:
        raise TidegateError("mounting in a worker's own mount namespace needs root (or CAP_SYS_ADMIN)",
                            "run as root, e.g. in a container")  # fmt: skip
    tried = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                            f"mount -t tmpfs {TMPFS_SOURCE} /tmp"], capture_output=True, text=True)  # fmt: skip
    if tried.returncode != 0:
        raise TidegateError(
            f"a mount namespace with a tmpfs could not be made: {tried.stderr.strip()}",
            "run where mounting is allowed (root without a seccomp or AppArmor block on mount)",
        )
