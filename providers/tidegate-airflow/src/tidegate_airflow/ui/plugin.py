"""The Airflow plugin: the FastAPI app under ``/tidegate`` and a "Tidegate" entry in the nav.

The nav entry is an external view with a ``url_route``: Airflow's UI shows the page at
``/plugin/tidegate`` inside its own frame (same origin, so the login cookie applies).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from airflow.configuration import conf
from airflow.plugins_manager import AirflowPlugin

from tidegate_airflow.ui.app import create_app

URL_PREFIX = "/tidegate"


def _root_path() -> str:
    """The path Airflow is served under (``[api] base_url``), without a trailing slash."""
    return urlsplit(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")


class TidegatePlugin(AirflowPlugin):
    name = "tidegate_ui"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Tidegate"}]
    external_views = [
        {
            "name": "Tidegate",
            "href": f"{_root_path()}{URL_PREFIX}/",
            "icon": f"{_root_path()}{URL_PREFIX}/icon.svg",
            "destination": "nav",
            "url_route": "tidegate",
            "nav_top_level": True,
        }
    ]
