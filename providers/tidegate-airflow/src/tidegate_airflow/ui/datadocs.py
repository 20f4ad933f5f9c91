"""Great Expectations Data Docs served over HTTP: ``file://`` links do not open from a page.

A check (or procedure) records the path of its Data Docs page. The site it belongs to is
the nearest folder above it holding ``index.html`` (GX's ``local_site``): the page links
to the site's index and static files relatively, so the whole site is served under one
URL per recorded check. Only files inside a site that the control database names are
served — the route is no general file reader.

The site is served sandboxed (an opaque origin, see ``app.DATA_DOCS_HEADERS``), and a
sandboxed document's requests carry no Airflow login cookie: its stylesheets, scripts and
links would all be sent to the login page. So the page opens a site through a **link** — a
path segment ``~<expires>.<signature>`` that grants reading that one check's (or
procedure's) site until ``expires`` — handed out only to a logged-in user; everything the
site loads relatively stays under it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path
from urllib.parse import unquote, urlparse

LINK_TTL_S = 3600  # how long a Data Docs link opens its site
LINK_MARK = "~"  # a path segment starting with it is a link, not a file of the site


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


def sign_link(secret: bytes, kind: str, item_id: int, expires: int) -> str:
    """The link segment granting ``kind``/``item_id``'s site until ``expires`` (epoch s)."""
    mac = hmac.new(secret, f"{kind}/{item_id}/{expires}".encode(), hashlib.sha256).digest()
    return f"{LINK_MARK}{expires}.{base64.urlsafe_b64encode(mac).decode().rstrip('=')}"


def link_opens(secret: bytes, kind: str, item_id: int, segment: str, now: float) -> bool:
    """True when ``segment`` was signed for this site and has not expired at ``now``."""
    expires, _, _ = segment[len(LINK_MARK) :].partition(".")
    if not segment.startswith(LINK_MARK) or not expires.isdigit() or int(expires) <= now:
        return False
    return hmac.compare_digest(segment, sign_link(secret, kind, item_id, int(expires)))
