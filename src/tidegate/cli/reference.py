"""``tidegate reference capture``: a database table published as a reference snapshot.

One capture per call (:mod:`tidegate.inputs.reference_capture`); run it on the schedule the
table should be refreshed on (cron, an Airflow task). The folder is the one a job's
``reference.path`` names, with ``format: parquet``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reference", help="reference tables: capture a database table as a snapshot")
    rsub = p.add_subparsers(dest="reference_command", metavar="ACTION", required=True)
    c = rsub.add_parser("capture", help="read a table through a configured connection into a new snapshot")
    c.add_argument("--connection", required=True, help="a name under reference_connections in $TIDEGATE_CONFIG")
    c.add_argument("--table", required=True, help="the table, name or schema.name")
    c.add_argument(
        "--to", required=True, help="the snapshot folder a job's reference.path names, or s3a://bucket/prefix"
    )
    c.set_defaults(func=_capture)


def _capture(args, now_us=lambda: time.time_ns() // 1000) -> int:
    from tidegate.inputs.reference_capture import capture_folder, connection_url, publish_snapshot, read_table
    from tidegate.runtime.jobs.config import load_config

    to = capture_folder(str(args.to), Path.cwd())
    connections = load_config().reference_connections or {}
    rows = read_table(connection_url(args.connection, connections, os.environ), args.table)
    published = publish_snapshot(rows, to, now_us())
    if published is None:
        print(f"{args.table}: unchanged since the newest snapshot in {args.to}; nothing published")
    else:
        print(f"{args.table}: {rows.num_rows} rows published as {published}")
    return 0
