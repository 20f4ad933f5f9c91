"""Health checks of the compose stack's containers (the image has no curl).

    python /opt/tidegate/docker/healthcheck.py http URL [--json KEY=VALUE]
        healthy when URL answers 2xx (and, with --json, its JSON object has KEY = VALUE):
        the Airflow api-server and scheduler, the Spark masters (/json/ status ALIVE) and
        workers (/json/)
    python /opt/tidegate/docker/healthcheck.py supervisor --region R
        healthy when region R's supervisor lease in the control database is unexpired and
        held by a supervisor on this host (a driver host whose supervisor is stuck, lost
        its lease or cannot reach the control database is unhealthy)

Exit status 0 when healthy, 1 when not (Docker's convention), with the reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request


def check_http(url: str, expect: str | None = None, timeout_s: float = 5.0) -> str | None:
    """None when healthy, else why not."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            body = response.read()
    except (urllib.error.URLError, OSError) as exc:
        return f"{url}: {exc}"
    if expect is None:
        return None
    key, sep, value = expect.partition("=")
    if not sep:
        return f"--json {expect!r}: expected KEY=VALUE"
    try:
        data = json.loads(body)
    except ValueError:
        return f"{url}: the answer is not JSON"
    got = data.get(key) if isinstance(data, dict) else None
    if str(got) != value:
        return f"{url}: {key} is {got!r}, expected {value!r}"
    return None


def check_supervisor(region: str) -> str | None:
    """None when this host's supervisor holds ``region``'s lease, else why not."""
    from tidegate.control.db import ControlDB
    from tidegate.errors import TidegateError
    from tidegate.runtime.jobs.config import load_config
    from tidegate.runtime.jobs.process import HOST, supervisor_lease

    try:
        config = load_config()
        config.region(region)
        db = ControlDB(config.control_db, create=False)
        try:
            lease = db.lease(supervisor_lease(region))
        finally:
            db.dispose()
    except TidegateError as exc:
        return str(exc)
    except Exception as exc:  # the control database is unreachable: not healthy
        return f"control database: {type(exc).__name__}: {exc}"
    if lease is None:
        return f"region {region} has no supervisor"
    if lease.expires_at <= time.time():
        return f"the supervisor lease of region {region} expired {time.time() - lease.expires_at:.0f} s ago"
    if lease.host != HOST:
        return f"region {region}'s supervisor runs on {lease.host} ({lease.holder}), not on this host ({HOST})"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="healthcheck.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("http", help="the URL answers 2xx")
    p.add_argument("url")
    p.add_argument("--json", metavar="KEY=VALUE", help="and its JSON object has KEY = VALUE")
    p.add_argument("--timeout", type=float, default=5.0)
    p = sub.add_parser("supervisor", help="this host's supervisor holds the region's lease")
    p.add_argument("--region", required=True)
    args = parser.parse_args(argv)
    problem = check_http(args.url, args.json, args.timeout) if args.what == "http" else check_supervisor(args.region)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
