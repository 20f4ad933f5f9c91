"""Great Expectations Data Docs served over HTTP: ``file://`` links do not open from a page.

A check (or procedure) records the path of its Data Docs page. The site it belongs to is
the nearest folder above it holding ``index.html`` (GX's ``local_site``): the page links
to the site's index and static files relatively, so the whole site is served under one
URL per recorded check. Only files inside a site that the control database names are
served — the route is no general file reader.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse


def recorded_path(value: str | None) -> Path | None:
    """The file a ``data_docs`` column names (a path or a ``file://`` URL)."""
    if not value:
        return None
    if value.startswith("file:"):
        value = unquote(urlparse(value).path)
    path = Path(value)
    return path if path.is_absolute() else None


def site_root(page: Path) -> Path:
    """The Data Docs site a page belongs to: the nearest folder above it with an index.html."""
    for folder in page.parents:
        if (folder / "index.html").is_file():
            return folder
        if folder.name == "data_docs" or folder == folder.parent:
            break
    return page.parent


def site_file(root: Path, relative: str) -> Path | None:
    """``relative`` inside ``root``, or None when it is missing or would leave the site."""
    base = root.resolve()
    try:
        target = (base / relative).resolve()
        target.relative_to(base)
    except (ValueError, OSError):
        return None
    if target.is_dir():
        target = target / "index.html"
    return target if target.is_file() else None
