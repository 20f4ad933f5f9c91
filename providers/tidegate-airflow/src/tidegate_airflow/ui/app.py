"""The Tidegate page's FastAPI app, mounted by Airflow's API server under ``/tidegate``.

Every route but the nav icon needs an Airflow user: the same JWT Airflow's own routes
take (``Authorization: Bearer`` or the ``_token`` cookie the UI's login sets), resolved
by Airflow's ``get_user``, then the auth manager's ``is_authorized_custom_view`` for the
resource "Tidegate" (``GET``). The JSON routes answer 401 without a token and 403 with a
bad one or without the permission; the page and the Data Docs send a browser to Airflow's
login instead. Everything here only reads the control database — through ``TIDEGATE_UI_DB``
when set (a URL with a role that may only read), else the platform's ``TIDEGATE_CONTROL_DB``.
Before the first deploy there is nothing to read: the routes answer empty, and the jobs
route says how to deploy a job. The watch route reads Airflow's own metadata database
instead (whether the health watch and the drill DAGs are on), through the API server's session.

Triggering the Tidegate DAGs is not done here: the page posts to Airflow's own REST API
(``POST /api/v2/dags/{dag_id}/dagRuns``) with the user's cookie, so Airflow checks the
user's right to trigger each DAG itself.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response

from tidegate.examples import DEMO_JOB, DEMO_SPEC
from tidegate_airflow.ui.datadocs import (
    LINK_MARK,
    LINK_TTL_S,
    link_opens,
    recorded_path,
    sign_link,
    site_file,
    site_root,
)
from tidegate_airflow.ui.origins import query_of, with_origins
from tidegate_airflow.ui.read_only import ControlDBNotCreated, ControlDBUnavailable, read_only_engine
from tidegate_airflow.ui.reads import ControlReader
from tidegate_airflow.ui.watch import read_watch

RESOURCE_NAME = "Tidegate"  # the custom view an auth manager grants (GET) to see the page
HERE = Path(__file__).parent
UI_DB_VARIABLE = "TIDEGATE_UI_DB"  # the URL the page reads through; default: the control database's

# What the page says while no job is deployed (docs/guide/shell.md's first steps).
DEPLOY_DAG = "tidegate_deploy"
DEPLOY_COMMAND = f"tidegate job deploy jobs/{DEMO_SPEC}"
START_COMMAND = f"tidegate job start {DEMO_JOB} --region east"

# Data Docs are GX's HTML, with values from the checked data in them: served sandboxed (an
# opaque origin — no Airflow session, no reach into the page; scripts only for GX's tables
# and charts), loading nothing but GX's own CDN assets, framed only by this page.
GX_SCRIPT_HOSTS = (
    "https://cdn.jsdelivr.net https://code.jquery.com https://cdnjs.cloudflare.com "
    "https://stackpath.bootstrapcdn.com https://unpkg.com"
)
GX_STYLE_HOSTS = (
    "https://unpkg.com https://maxcdn.bootstrapcdn.com https://cdnjs.cloudflare.com https://cdn.jsdelivr.net"
)
DATA_DOCS_HEADERS = {
    "Content-Security-Policy": "; ".join(
        [
            "sandbox allow-scripts",
            "default-src 'none'",
            f"script-src 'self' 'unsafe-inline' {GX_SCRIPT_HOSTS}",
            f"style-src 'self' 'unsafe-inline' {GX_STYLE_HOSTS}",
            "img-src 'self' data: https://great-expectations-web-assets.s3.us-east-2.amazonaws.com",
            "font-src 'self' data: https://cdnjs.cloudflare.com https://maxcdn.bootstrapcdn.com",
            "connect-src 'none'",
            "form-action 'none'",
            "base-uri 'none'",
            "frame-ancestors 'self'",
        ]
    ),
    "X-Content-Type-Options": "nosniff",
}
_PROCESS_SECRET = os.urandom(32).hex()  # when Airflow has no [api] secret_key: links last this process

# The DAGs the page triggers, their params in form order, and what each field offers.
TRIGGERS: dict[str, dict[str, Any]] = {
    "restart": {
        "dag_id": "tidegate_restart",
        "label": "Restart",
        "params": [
            {"name": "job", "type": "string"},
            {"name": "region", "type": "region"},
            {"name": "mode", "type": "choice", "choices": ["last-stopped", "now", "custom"], "default": "last-stopped"},
        ],
    },
    "planned_stop": {
        "dag_id": "tidegate_planned_stop",
        "label": "Planned stop",
        "params": [
            {"name": "job", "type": "string"},
            {"name": "new_spec", "type": "string", "placeholder": "the new job spec: a YAML file under jobs/"},
            {"name": "allowed_delay_s", "type": "number", "default": 600},
        ],
    },
    "failover": {
        "dag_id": "tidegate_failover",
        "label": "Fail over",
        "params": [
            {"name": "job", "type": "string"},
            {"name": "to_region", "type": "region"},
            {"name": "reason", "type": "string", "default": "operator request from the Tidegate page"},
        ],
    },
    "drill": {
        "dag_id": "tidegate_drill",
        "label": "Drill",
        "params": [
            {"name": "job", "type": "string"},
            {
                "name": "kind",
                "type": "choice",
                "choices": ["node-failure", "upgrade", "region-loss", "control-region-loss"],
                "default": "node-failure",
            },
            {"name": "region", "type": "region"},
        ],
    },
}


# -- authentication ----------------------------------------------------------------------
async def _resolve_user(request: Request):
    """Airflow's own resolution (bearer token first, then the UI's cookie); raises 401/403."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    return await get_user(request, None, await bearer_scheme(request))


def _authorized(user) -> bool:
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager().is_authorized_custom_view(method="GET", resource_name=RESOURCE_NAME, user=user)


async def require_user(request: Request):
    """Dependency of the JSON routes: 401 without a token, 403 with a bad one or no right."""
    user = await _resolve_user(request)
    if not _authorized(user):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"Forbidden: the user may not see {RESOURCE_NAME}")
    return user


async def _browser_user(request: Request):
    """For pages a browser opens: the user, or a redirect to Airflow's login page."""
    try:
        user = await _resolve_user(request)
    except HTTPException:
        user = None
    if user is None:
        from airflow.api_fastapi.app import get_auth_manager

        next_url = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return None, RedirectResponse(
            get_auth_manager().get_url_login(next_url=next_url), status_code=status.HTTP_307_TEMPORARY_REDIRECT
        )
    if not _authorized(user):
        return None, HTMLResponse(f"<h1>403</h1><p>You may not see {RESOURCE_NAME}.</p>", status_code=403)
    return user, None


# -- the control database --------------------------------------------------------------
def reader() -> ControlReader:
    from tidegate.runtime.jobs.config import load_config

    try:
        config = load_config()
    except Exception as exc:  # a bad TIDEGATE_* setting: say so on the page
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, f"Tidegate configuration: {exc}") from None
    try:
        engine = read_only_engine(os.environ.get(UI_DB_VARIABLE) or config.control_db)
    except ControlDBUnavailable as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc)) from None
    return ControlReader(engine, regions=list(config.regions))


def _read(call, *args, empty: Callable[[str], Any] | None = None, **kwargs):
    """``call``'s answer; ``empty(why)`` before the first deploy; 503 when the database cannot be read."""
    try:
        return call(*args, **kwargs)
    except ControlDBNotCreated as exc:
        if empty is None:
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc)) from None
        return empty(str(exc))
    except ControlDBUnavailable as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc)) from None


def _link_secret() -> bytes:
    """The key Data Docs links are signed with: derived from Airflow's ``[api] secret_key``,
    which every API server worker shares."""
    from airflow.configuration import conf

    key = conf.get("api", "secret_key", fallback="") or _PROCESS_SECRET
    return hmac.new(key.encode(), b"tidegate data docs links", hashlib.sha256).digest()


def first_deploy(reason: str) -> dict[str, str]:
    """How to get from an empty control database to a running job."""
    return {
        "reason": reason,
        "deploy_dag": DEPLOY_DAG,
        "deploy_command": DEPLOY_COMMAND,
        "message": f"No job yet: {reason}. Deploy one by triggering the DAG {DEPLOY_DAG} in Airflow (its spec "
        f"defaults to jobs/{DEMO_SPEC}; it registers the job and starts it in both regions), or "
        f"from a shell: `{DEPLOY_COMMAND}`, then `{START_COMMAND}` (and --region west).",
    }


def _page_template() -> str:
    return (HERE / "page.html").read_text()


def create_app() -> FastAPI:
    app = FastAPI(
        title="Tidegate",
        description="Streaming jobs across regions: status, metrics, drills, checks.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page(request: Request) -> Response:
        _user, refusal = await _browser_user(request)
        if refusal is not None:
            return refusal
        settings = {"triggers": TRIGGERS, "refresh_s": 15}
        html = _page_template().replace("/*TIDEGATE_SETTINGS*/{}", json.dumps(settings))
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    @app.get("/icon.svg", include_in_schema=False)
    def icon() -> Response:  # the nav entry's icon: Airflow's nav loads it, no secret in it
        return FileResponse(HERE / "icon.svg", media_type="image/svg+xml")

    @app.get("/api/jobs", dependencies=[Depends(require_user)])
    def jobs(db: Annotated[ControlReader, Depends(reader)]) -> JSONResponse:
        data = _read(
            db.overview,
            empty=lambda why: {
                "now": db.now(),
                "regions": db.configured_regions,
                "jobs": [],
                "setup": first_deploy(why),
            },
        )
        if not data["jobs"] and "setup" not in data:
            data["setup"] = first_deploy("no job has been deployed yet")
        data["jobs"] = _read(with_origins, db, data["jobs"])
        return JSONResponse(data)

    @app.get("/api/jobs/{job}/versions/{version}/query", dependencies=[Depends(require_user)])
    def query(job: str, version: int, db: Annotated[ControlReader, Depends(reader)]) -> JSONResponse:
        """The Stream Analytics query the version was translated from: path, SHA-256 and text,
        and its side file's path and SHA-256; 404 for a version deployed from a spec."""
        found = _read(query_of, db, job, version, empty=lambda why: None)
        if found is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job} v{version} was not translated from a query")
        return JSONResponse(found)

    @app.get("/api/watch", dependencies=[Depends(require_user)])
    def watch() -> JSONResponse:
        """Whether the health watch (automatic failover) and the weekly drill will run: on,
        paused or not loaded in Airflow, with what to do when they will not."""
        return JSONResponse({"watch": read_watch()})

    @app.get("/api/jobs/{job}/metrics", dependencies=[Depends(require_user)])
    def metrics(
        job: str,
        db: Annotated[ControlReader, Depends(reader)],
        minutes: float = Query(60, ge=0, description="the last N minutes; 0: all"),
        limit: int = Query(500, ge=1, le=5000),
    ) -> JSONResponse:
        since = None if minutes == 0 else time.time() - minutes * 60
        return JSONResponse(
            _read(
                db.metrics,
                job,
                since=since,
                limit=limit,
                empty=lambda why: {
                    "job": job,
                    "now": db.now(),
                    "since": since,
                    "series": {r: [] for r in db.configured_regions},
                },
            )
        )

    @app.get("/api/procedures", dependencies=[Depends(require_user)])
    def procedures(
        db: Annotated[ControlReader, Depends(reader)],
        job: str | None = None,
        limit: int = Query(100, ge=1, le=1000),
    ) -> JSONResponse:
        return JSONResponse(
            {"procedures": _with_docs_url("procedures", _read(db.procedures, job, limit, empty=lambda why: []))}
        )

    @app.get("/api/checks", dependencies=[Depends(require_user)])
    def checks(
        db: Annotated[ControlReader, Depends(reader)],
        job: str | None = None,
        limit: int = Query(100, ge=1, le=1000),
    ) -> JSONResponse:
        return JSONResponse({"checks": _with_docs_url("checks", _read(db.checks, job, limit, empty=lambda why: []))})

    @app.get("/api/operations", dependencies=[Depends(require_user)])
    def operations(
        db: Annotated[ControlReader, Depends(reader)],
        job: str | None = None,
        limit: int = Query(50, ge=1, le=1000),
    ) -> JSONResponse:
        return JSONResponse({"operations": _read(db.operations, job, limit, empty=lambda why: [])})

    def _with_docs_url(kind: str, rows: list[dict]) -> list[dict]:
        """Each row's Data Docs as a link of this page (``docs/<kind>/<id>``), when it has any."""
        for row in rows:
            row["docs_url"] = f"docs/{kind}/{row['id']}" if row.pop("data_docs") else None
        return rows

    def _recorded_docs(db: ControlReader, kind: str, item_id: int) -> Path:
        row = _read(db.check if kind == "checks" else db.procedure, item_id)
        if row is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no {kind[:-1]} {item_id}")
        page = recorded_path(row.data_docs)
        if page is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"{kind[:-1]} {item_id} has no Data Docs")
        return page

    @app.get("/docs/{kind}/{item_id}", include_in_schema=False)
    async def docs_entry(kind: str, item_id: int, request: Request) -> Response:
        _user, refusal = await _browser_user(request)
        if refusal is not None:
            return refusal
        if kind not in ("checks", "procedures"):
            raise HTTPException(status.HTTP_404_NOT_FOUND, "no such Data Docs")
        page = await run_in_threadpool(_recorded_docs, reader(), kind, item_id)
        if not page.is_file():
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"the Data Docs page {page} is gone")
        relative = page.relative_to(site_root(page)).as_posix()
        link = sign_link(_link_secret(), kind, item_id, int(time.time()) + LINK_TTL_S)
        return RedirectResponse(f"{request.url.path.rstrip('/')}/{link}/{relative}", status_code=status.HTTP_302_FOUND)

    @app.get("/docs/{kind}/{item_id}/{path:path}", include_in_schema=False)
    async def docs_file(kind: str, item_id: int, path: str, request: Request) -> Response:
        """A file of the site: under a link (what the sandboxed site itself asks for, without
        a cookie), or directly for a logged-in browser."""
        if path.startswith(LINK_MARK):
            link, _, path = path.partition("/")
            if not link_opens(_link_secret(), kind, item_id, link, time.time()):
                raise HTTPException(
                    status.HTTP_403_FORBIDDEN,
                    "this Data Docs link is not valid or has expired: open the Data Docs again from the Tidegate page",
                )
        else:
            _user, refusal = await _browser_user(request)
            if refusal is not None:
                return refusal
        if kind not in ("checks", "procedures"):
            raise HTTPException(status.HTTP_404_NOT_FOUND, "no such Data Docs")
        page = await run_in_threadpool(_recorded_docs, reader(), kind, item_id)
        target = site_file(site_root(page), path)
        if target is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"{path} is not part of these Data Docs")
        return FileResponse(target, headers=DATA_DOCS_HEADERS)

    return app
