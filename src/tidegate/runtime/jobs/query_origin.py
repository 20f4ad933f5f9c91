"""Deploying a Stream Analytics query: translated into a job spec, then deployed as a spec is,
with where it came from recorded beside the version.

The translation is the asa package's (:func:`tidegate.asa.spec_text`), and the spec it makes is
loaded by the spec loader before it is deployed (:func:`tidegate.asa.spec_text.checked_spec`),
and again by the deploy: a query is no way around a spec's checks. A construct without a
Tidegate form is refused with the query's line and column (``query.asaql:4:13: …``).

The version records its origin (:class:`QueryOrigin`): the query's path, SHA-256 and text, and
the side file's path and SHA-256 — not its text, which may name connections.

A query and side file that reach the platform through a DAG's parameter are confined as a spec
path is (:func:`tidegate.jobspec.folders.confined_file`): a file of its kind inside the spec
folders, symlinks resolved, no ``..`` (:func:`confined_query_file`).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tidegate.errors import ConfigError
from tidegate.jobspec.folders import SPEC_SUFFIXES, FileKind, confined_file

QUERY_SUFFIX = ".asaql"


@dataclass(frozen=True)
class QueryOrigin:
    """The Stream Analytics query a job version was translated from, and its side file."""

    query_path: str
    query_sha256: str
    query_text: str
    inputs_path: str | None = None
    inputs_sha256: str | None = None

    def record(self) -> dict[str, Any]:
        """What the control database keeps (``job_versions.origin``)."""
        return asdict(self)

    def summary(self) -> dict[str, Any]:
        """What a task log or XCom shows: paths and hashes, not the text."""
        return {k: v for k, v in asdict(self).items() if k != "query_text"}


def query_origin(query: Path, inputs: Path | None) -> QueryOrigin:
    """The origin of a version translated from ``query`` with the side file ``inputs``."""
    text = _read(query, "query file", "give the path of a .asaql file")
    side = None if inputs is None else _read(inputs, "side file", "give the path of the query's side file (YAML)")
    return QueryOrigin(
        str(query),
        hashlib.sha256(text).hexdigest(),
        text.decode("utf-8", errors="replace"),
        None if inputs is None else str(inputs),
        None if side is None else hashlib.sha256(side).hexdigest(),
    )


def _read(path: Path, what: str, fix: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}", fix) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what} ({type(exc).__name__})", fix) from None


def translated_spec(query: Path, inputs: Path | None, folder: Path) -> Path:
    """The spec translated from ``query`` (with the side file ``inputs``), written in ``folder``
    once the spec loader has accepted it. Raises :class:`ConfigError` naming the query's line
    and column when a construct has no Tidegate form."""
    from tidegate.asa import spec_text
    from tidegate.asa.spec_text import checked_spec

    return checked_spec(spec_text(query, inputs), folder)


def check_query(query: Path, inputs: Path | None) -> QueryOrigin:
    """Translate ``query`` and load the spec it makes, keeping nothing: its origin, or the
    :class:`ConfigError` a deploy of it would raise."""
    origin = query_origin(query, inputs)
    with tempfile.TemporaryDirectory(prefix="tidegate-asa-") as folder:
        translated_spec(query, inputs, Path(folder))
    return origin


class QueryDeploys:
    """Mixed into :class:`~tidegate.runtime.jobs.controller.Controller`."""

    def deploy_query(self, query: str | Path, inputs: str | Path | None = None) -> Any:
        """Translate the Stream Analytics query ``query`` (with its side file ``inputs``) and
        register the spec it makes, recording the query as the version's origin: the
        controller's :class:`~tidegate.runtime.jobs.controller.DeployResult` (not imported here:
        the controller imports this module)."""
        query_path, inputs_path = Path(query).resolve(), None if inputs is None else Path(inputs).resolve()
        origin = query_origin(query_path, inputs_path)
        with tempfile.TemporaryDirectory(prefix="tidegate-asa-") as folder:
            spec = translated_spec(query_path, inputs_path, Path(folder))
            return self.deploy(spec, origin)  # type: ignore[attr-defined]


QUERY_FILE = FileKind("query", "query", (QUERY_SUFFIX,), "jobs/tumbling_counts.asaql")
SIDE_FILE = FileKind("side file", "side file", SPEC_SUFFIXES, "jobs/tumbling_counts.inputs.yaml")


def confined_query_file(given: object, folders: Sequence[Path], base: Path, *, side_file: bool = False) -> Path:
    """The real path of the query (``side_file``: the side file) ``given`` names, when it is a
    ``.asaql`` (a ``.yaml``/``.yml``) file in one of the spec ``folders``: a spec path's rule
    (:func:`~tidegate.jobspec.folders.confined_file`). Raises :class:`ConfigError` otherwise."""
    return confined_file(given, folders, base, SIDE_FILE if side_file else QUERY_FILE)
