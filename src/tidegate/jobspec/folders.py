"""Where a job spec, and each place a spec names, may be: folders the operator configures.

A spec path that reaches the platform through a DAG's parameter (the deploy and planned
stop DAGs, and the Tidegate page, which triggers them) is chosen by whoever may trigger
that DAG, and it is read by the Airflow worker with the platform's rights. So it must
name a ``.yaml``/``.yml`` file inside one of the spec folders — ``TIDEGATE_SPEC_DIRS``
(folders separated by ``:``), by default the checkout's ``jobs/`` — after symlinks are
resolved: a link inside a folder that points outside it is refused, and so is any ``..``.

The command line (``tidegate job deploy PATH``) does not go through here: its operator
runs it with their own rights and could read the file anyway.

A spec is its author's, and what it names is read with the platform's rights, so each place
must resolve — symlinks and ``..`` followed — inside folders of the operator's:

* an event log it names (``source.event_log``, ``inputs.<name>.source.event_log``): inside the
  **event-log folders**, ``TIDEGATE_LOG_DIRS``, by default ``$TIDEGATE_HOME`` (:func:`log_dirs`);
* its reference folder (``reference.path``), each snapshot folder in it and each file of
  those: inside the **reference folders**, ``TIDEGATE_REFERENCE_DIRS``, by default ``jobs/``
  and ``$TIDEGATE_HOME/reference`` (:func:`reference_dirs`). A symlink that stays inside them
  is followed; one that leaves is refused, named within ``reference.path``. A reference folder
  may also be an S3 prefix, ``s3a://bucket/prefix``: a ``reference.path`` on S3 must then lie
  under one, in the same bucket, segment by segment (:func:`confined_s3_reference`) — S3 has
  no symlinks, so what is listed under the prefix is inside it.

:func:`check_places` checks both when a spec is loaded (:func:`~tidegate.jobspec.load_spec`);
they are checked again where they are read, since a folder may change in between: the log
where it is opened (:func:`tidegate.inputs.log.input_location`, the driver), each reference
file as it is read (:mod:`tidegate.inputs.reference`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tidegate.errors import PATH_CHARS, ConfigError, excerpt
from tidegate.eventtime.reference import snapshot_time_us
from tidegate.jobspec.reference_prefix import S3_REFERENCE, s3_reference_root
from tidegate.jobspec.source import tidegate_home
from tidegate.storage.uri import StorageRoot

if TYPE_CHECKING:
    from tidegate.jobspec.model import JobSpec

SPEC_DIRS_ENV = "TIDEGATE_SPEC_DIRS"
LOG_DIRS_ENV = "TIDEGATE_LOG_DIRS"
REFERENCE_DIRS_ENV = "TIDEGATE_REFERENCE_DIRS"
SPEC_SUFFIXES = (".yaml", ".yml")
MAX_SPEC_BYTES = 262_144  # 256 KiB: a spec is a page or two of YAML; YAML reads 256 KiB in about a second
SNAPSHOT_SUFFIX = {"csv": ".csv", "parquet": ".parquet"}  # the files a snapshot folder holds, by format
ReferenceFolder = Path | StorageRoot  # a local folder, or an S3 prefix (``StorageRoot`` of scheme s3a)
_SCHEME_ONLY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")


def spec_dirs(env: Mapping[str, str], default: Path, base: Path) -> tuple[Path, ...]:
    """The spec folders ``env`` configures (relative ones against ``base``), else ``default``."""
    return _folders(env, SPEC_DIRS_ENV, (default,), base, "e.g. /opt/tidegate/jobs:/srv/specs")


def log_dirs(env: Mapping[str, str], home: Path, base: Path) -> tuple[Path, ...]:
    """The event-log folders ``env`` configures (relative ones against ``base``), else the
    platform's own: ``home`` (``$TIDEGATE_HOME``), taken from ``base`` when relative."""
    return _folders(env, LOG_DIRS_ENV, (base / home,), base, "e.g. /var/tidegate:/srv/logs")


def reference_dirs(env: Mapping[str, str], base: Path, home: Path | None = None) -> tuple[ReferenceFolder, ...]:
    """The reference folders ``env`` configures (relative ones against ``base``; an
    ``s3a://bucket/prefix`` item is an S3 prefix), else ``base/jobs`` and ``<home>/reference``
    (``home``: the platform's, default ``$TIDEGATE_HOME`` of ``env``, ``var``)."""
    home = home if home is not None else tidegate_home(env)
    text = (env.get(REFERENCE_DIRS_ENV) or "").strip()
    if not text:
        return (base / "jobs", base / home / "reference")
    folders: list[ReferenceFolder] = []
    for item in _items(text):
        if item.lower().startswith(S3_REFERENCE):
            folders.append(s3_reference_root(item, REFERENCE_DIRS_ENV))
        elif "://" in item:
            raise ConfigError(
                f"{REFERENCE_DIRS_ENV}: {excerpt(item, PATH_CHARS)} is a URI reference snapshots cannot be read from",
                "give local folders and s3a://bucket/prefix prefixes",
            )
        else:
            folders.append(base / item)
    if not folders:
        raise ConfigError(f"{REFERENCE_DIRS_ENV}={excerpt(text)} names no folder",
                          "e.g. /opt/tidegate/jobs:/var/tidegate/reference:s3a://bucket/reference")  # fmt: skip
    return tuple(folders)


def _items(text: str) -> list[str]:
    """``text`` split at ``:`` (os.pathsep), an ``s3a://…`` kept whole: its scheme's colon is no separator."""
    items: list[str] = []
    for part in (p.strip() for p in text.split(os.pathsep)):
        if items and part.startswith("//") and _SCHEME_ONLY.fullmatch(items[-1]):
            items[-1] += ":" + part
        else:
            items.append(part)
    return [item for item in items if item]


def _folders(env: Mapping[str, str], name: str, default: tuple[Path, ...], base: Path,
             example: str) -> tuple[Path, ...]:  # fmt: skip
    text = (env.get(name) or "").strip()
    if not text:
        return default
    folders = tuple(base / item for item in (part.strip() for part in text.split(os.pathsep)) if item)
    if not folders:
        raise ConfigError(f"{name}={excerpt(text)} names no folder", example)
    return folders


def inside(real: Path, folders: Sequence[ReferenceFolder]) -> bool:
    """Whether ``real`` (a path with its symlinks resolved) lies in one of the local ``folders``
    (theirs resolved too); an S3 prefix among them holds no local path."""
    return any(real.is_relative_to(os.path.realpath(f)) for f in folders if isinstance(f, Path))


def confined_spec_path(given: object, folders: Sequence[Path], base: Path) -> Path:
    """The real path of the spec ``given`` names, when it is a YAML file in one of
    ``folders``; a relative path is taken from ``base`` (the checkout), then from each
    folder. Raises :class:`ConfigError` otherwise. Never reads the file."""
    return confined_file(given, folders, base)


@dataclass(frozen=True)
class FileKind:
    """What a file named by a parameter is, for :func:`confined_file` and its errors."""

    what: str  # "spec", "query", "side file": the word in "the <what> path …"
    noun: str  # "job spec": in "no such <noun> file", "a <noun> is a … file"
    suffixes: tuple[str, ...]
    example: str


SPEC_FILE = FileKind("spec", "job spec", SPEC_SUFFIXES, "jobs/device_fleet.yaml")


def confined_file(given: object, folders: Sequence[Path], base: Path, kind: FileKind = SPEC_FILE) -> Path:
    """The real path of the file of ``kind`` (a spec by default) that ``given`` names, when it
    lies in one of the spec ``folders``, symlinks resolved; a relative path is taken from
    ``base`` (the checkout), then from each folder. No ``..``, no control characters, a regular
    file with one of the kind's suffixes, at most :data:`MAX_SPEC_BYTES`. Raises
    :class:`ConfigError` otherwise. Never reads the file."""
    what = kind.what
    if not isinstance(given, str) or not given.strip():
        raise ConfigError(
            f"the {what} path is empty or not text",
            f"give the path of a {kind.noun} under the spec folders, e.g. {kind.example}",
        )
    where = " or ".join(str(folder) for folder in folders)
    allowed = f"put the {what} under {where}, or add its folder to {SPEC_DIRS_ENV}"
    if "\0" in given or any(ord(c) < 32 for c in given):
        raise ConfigError(f"the {what} path holds control characters", allowed)
    path = Path(given.strip())
    if ".." in path.parts:
        raise ConfigError(
            f"the {what} path {excerpt(given, PATH_CHARS)} contains '..'", f"name the file itself; {allowed}"
        )
    candidates = [path] if path.is_absolute() else [base / path, *(folder / path for folder in folders)]
    found = next((c for c in candidates if os.path.lexists(c)), None)
    if found is None:
        raise ConfigError(f"{excerpt(given, PATH_CHARS)}: no such {kind.noun} file", f"check the path; {allowed}")
    try:
        real = found.resolve(strict=True)
    except (OSError, RuntimeError):  # a dangling or looping link
        raise ConfigError(f"{excerpt(given, PATH_CHARS)}: a link that leads nowhere", allowed) from None
    if not inside(real, folders):
        via = " (through a symlink)" if real != found.absolute() else ""
        raise ConfigError(f"the {what} path {excerpt(given, PATH_CHARS)} is outside the spec folders{via}", allowed)
    if not real.is_file():
        raise ConfigError(f"{excerpt(given, PATH_CHARS)}: not a regular file", f"give the {kind.noun}'s own file")
    if real.suffix not in kind.suffixes:
        raise ConfigError(
            f"{excerpt(given, PATH_CHARS)}: a {kind.noun} is a {' or '.join(kind.suffixes)} file",
            f"rename it, or give the {kind.noun}'s own file (e.g. {kind.example})",
        )
    if real.stat().st_size > MAX_SPEC_BYTES:
        raise ConfigError(
            f"{excerpt(given, PATH_CHARS)}: larger than {MAX_SPEC_BYTES >> 10} KiB, far beyond any {kind.noun}",
            f"give the {kind.noun}'s own file",
        )
    return real


# -- event logs -------------------------------------------------------------------------------
def confined_log(given: str, where: str, folders: Sequence[Path], base: Path) -> Path:
    """The real path of the event log the spec's field ``where`` names (``given``), when it lies
    inside one of ``folders``; a relative path is taken from ``base`` (the working directory,
    decision 0009). The log need not exist yet: what of its path exists is resolved."""
    allowed = (
        f"name an event log under {' or '.join(str(f) for f in folders)}, the event-log folders "
        f"({LOG_DIRS_ENV}, default $TIDEGATE_HOME; the operator sets them)"
    )
    if any(ord(c) < 32 for c in given):
        raise ConfigError(f"{where} holds control characters", allowed)
    path = base / given
    real = Path(os.path.realpath(path))
    if not inside(real, folders):
        via = " (through a symlink)" if real != Path(os.path.normpath(path)) else ""
        raise ConfigError(f"{where} {excerpt(given, PATH_CHARS)} is outside the event-log folders{via}", allowed)
    return real


def named_logs(spec: JobSpec) -> Iterator[tuple[str, str]]:
    """(field, path) of every event log ``spec`` names; the platform's default log is not one."""
    if spec.source.event_log is not None:
        yield "source.event_log", spec.source.event_log
    for i in spec.inputs:
        if i.own is not None and i.own.source.event_log is not None:
            yield f"inputs.{i.name}.source.event_log", i.own.source.event_log


# -- reference folders ------------------------------------------------------------------------
def _allowed_references(folders: Sequence[ReferenceFolder]) -> str:
    return (
        f"put the snapshots under {' or '.join(str(f) for f in folders)}, or add their folder to {REFERENCE_DIRS_ENV}"
    )


def confined_reference_folder(given: str, folders: Sequence[ReferenceFolder], base: Path) -> ReferenceFolder:
    """The real path of the folder ``reference.path`` names, when it lies inside one of
    ``folders``; a relative path is taken from ``base`` (the working directory, decision 0009).
    An ``s3a://`` path: its prefix, when it lies under an S3 one of ``folders``."""
    if given.lower().startswith(S3_REFERENCE):
        return confined_s3_reference(given, folders)
    return _confined_local_reference(given, folders, base)


def _confined_local_reference(given: str, folders: Sequence[ReferenceFolder], base: Path) -> Path:
    allowed = _allowed_references(folders)
    path = base / given
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ConfigError(
            f"reference.path {excerpt(given, PATH_CHARS)}: no such folder",
            f"create it with its snapshot folders; {allowed}",
        ) from None
    if not inside(real, folders):
        via = " (through a symlink)" if real != path.absolute() else ""
        raise ConfigError(f"reference.path {excerpt(given, PATH_CHARS)} is outside the reference folders{via}", allowed)
    if not real.is_dir():
        raise ConfigError(
            f"reference.path {excerpt(given, PATH_CHARS)} is not a folder",
            "name the folder that holds the valid_from=<time>/ snapshot folders",
        )
    return real


def confined_s3_reference(given: str, folders: Sequence[ReferenceFolder]) -> StorageRoot:
    """The S3 prefix ``reference.path`` names (``given``, an ``s3a://`` URI), when it lies under
    one of the S3 prefixes among ``folders``: the same bucket, and the folder's segments first —
    ``s3a://b/ref`` holds ``s3a://b/ref/devices``, not ``s3a://b/reference``."""
    root = s3_reference_root(given)
    for folder in folders:
        if isinstance(folder, StorageRoot) and folder.bucket == root.bucket:
            if not folder.prefix or root.prefix == folder.prefix or root.prefix.startswith(folder.prefix + "/"):
                return root
    prefixes = [str(f) for f in folders if isinstance(f, StorageRoot)]
    raise ConfigError(
        f"reference.path {excerpt(given, PATH_CHARS)} is outside the reference folders"
        + ("" if prefixes else ": none of them is on S3"),
        f"put the snapshots under {' or '.join(prefixes)}" if prefixes
        else f"the operator adds the S3 prefix (s3a://bucket/prefix) to {REFERENCE_DIRS_ENV}",
    )  # fmt: skip


def confined_entry(path: Path, folder: Path, roots: Sequence[ReferenceFolder]) -> Path:
    """The real path of ``path`` — a snapshot folder of the reference folder ``folder``, or a
    file in one — when it lies inside ``roots`` (the reference folders). The error names it
    within ``folder``, never what it leads to."""
    real = Path(os.path.realpath(path))
    if not inside(real, roots):
        raise ConfigError(f"reference.path: {excerpt(path.relative_to(folder).as_posix(), PATH_CHARS)} is a symlink "
                          "that leads outside the reference folders",
                          "replace it with the folder or file itself, or with a link that stays inside them; "
                          + _allowed_references(roots))  # fmt: skip
    return real


def snapshot_entries(folder: Path, fmt: str,
                     roots: Sequence[ReferenceFolder]) -> Iterator[tuple[int, Path, list[Path]]]:  # fmt: skip
    """(valid-from, snapshot folder, its ``fmt`` files in name order) of each snapshot in the
    reference folder ``folder``, oldest first, each folder and file checked to lie inside
    ``roots`` (:func:`confined_entry`); nothing is read. Names starting with ``.`` or ``_`` are
    skipped: a snapshot is written under such a name and renamed into place whole."""
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith((".", "_")) or not entry.is_dir():
            continue
        at = snapshot_time_us(entry.name, "reference.path")
        if at is None:
            continue
        confined_entry(entry, folder, roots)
        files = [f for f in sorted(entry.iterdir())
                 if not f.name.startswith((".", "_")) and f.is_file() and f.suffix == SNAPSHOT_SUFFIX[fmt]]  # fmt: skip
        for f in files:
            confined_entry(f, folder, roots)
        yield at, entry, files


def check_reference_folder(given: str, fmt: str, folders: Sequence[ReferenceFolder], base: Path) -> None:
    """``reference.path`` inside ``folders``, and so each snapshot folder and file in it so far.
    A folder not there yet is no error — its snapshots may come later, and the job checks
    again when it starts — but where it would be must lie inside ``folders``. An S3 prefix is
    checked without asking the store: what is listed under it lies inside it."""
    if given.lower().startswith(S3_REFERENCE):
        confined_s3_reference(given, folders)
        return
    path = base / given
    if not os.path.lexists(path):
        if not inside(Path(os.path.realpath(path)), folders):
            raise ConfigError(
                f"reference.path {excerpt(given, PATH_CHARS)} is outside the reference folders",
                _allowed_references(folders),
            )
        return
    for _ in snapshot_entries(_confined_local_reference(given, folders, base), fmt, folders):
        pass  # each entry is checked as it is listed


# -- when a spec is loaded --------------------------------------------------------------------
def check_places(spec: JobSpec, logs: Sequence[Path] | None = None, env: Mapping[str, str] | None = None,
                 base: Path | None = None, references: Sequence[ReferenceFolder] | None = None) -> None:  # fmt: skip
    """What ``spec`` names to read lies where it may: each event log inside ``logs`` (default
    :func:`log_dirs` of ``env``), its reference folder — with every snapshot folder and file in
    it so far — inside ``references`` (default :func:`reference_dirs` of ``env``; ``env``:
    default this process's environment). Relative paths are taken from ``base``, default the
    working directory."""
    env = os.environ if env is None else env
    base = base or Path.cwd()
    folders = log_dirs(env, tidegate_home(env), base) if logs is None else logs
    for where, event_log in named_logs(spec):
        confined_log(event_log, where, folders, base)
    for ref in spec.reference_tables:  # the first step's and every later step's
        check_reference_folder(ref.path, ref.format, reference_dirs(env, base) if references is None else references,
                               base)  # fmt: skip
