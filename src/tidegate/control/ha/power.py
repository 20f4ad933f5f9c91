"""A region's power switch for the local topology: the fault a control-region-loss drill injects.

On hosts, taking a whole region down and bringing it back belongs to the infrastructure (a
cloud's stop and start of the region's machines, a chaos tool); the drill runs whatever
commands ``TIDEGATE_CONTROL_FAULTS`` names (:mod:`tidegate.runtime.procedures.control_drill`).
In the local topology both regions' processes run under one harness — the
:class:`~tidegate.control.ha.cluster.LocalCluster` and the
:class:`~tidegate.control.ha.airflow_regions.AirflowRegions` of a test or bench — and this
module is that harness's switch::

    python -m tidegate.control.ha.power kill east --folder DIR
    python -m tidegate.control.ha.power restore east --folder DIR

A request is a file in ``DIR``; the harness's :class:`PowerSwitch` thread carries it out — the
kill at once, every process of the region with SIGKILL — and writes the outcome beside it,
which the command waits for. A command run from a task of the region being killed dies with
it, as anything running in a lost region does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ACTIONS = ("kill", "restore")
_REGION = re.compile(r"[a-z][a-z0-9-]{0,30}")


def request(folder: Path, region: str, action: str, *, wait_s: float = 300.0, poll_s: float = 0.2) -> dict:
    """Ask the harness watching ``folder`` to ``kill`` or ``restore`` ``region``; its outcome
    (``{"state": "down"|"up", "at": …}``) once carried out. Raises RuntimeError when it
    failed or nothing carried it out within ``wait_s``."""
    _check(region, action)
    folder = Path(folder)
    if not folder.is_dir():
        raise RuntimeError(f"{folder} is not a power switch's folder: no harness watches it")
    ident = uuid.uuid4().hex
    tmp = folder / f".{region}.{ident}.tmp"
    tmp.write_text(json.dumps({"action": action, "id": ident, "asked_at": time.time()}))
    os.replace(tmp, folder / f"{region}.request")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        outcome = state(folder, region)
        if outcome.get("id") == ident:
            if outcome.get("error"):
                raise RuntimeError(f"{action} of {region} failed: {outcome['error']}")
            return outcome
        time.sleep(poll_s)
    raise RuntimeError(f"nothing carried out the {action} of {region} within {wait_s:.0f} s: is its harness running?")


def state(folder: Path, region: str) -> dict:
    """The last outcome the harness recorded for ``region`` (empty before any)."""
    try:
        found = json.loads((Path(folder) / f"{region}.state").read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


class PowerSwitch(threading.Thread):
    """The harness's side: carries out the requests written to ``folder`` with ``kill`` and
    ``restore`` (each called with the region's name) and records each outcome, the time it
    was carried out included (``events``: region, action, time.time() when done)."""

    def __init__(
        self,
        folder: Path,
        *,
        kill: Callable[[str], None],
        restore: Callable[[str], None],
        regions: tuple[str, ...] = ("east", "west"),
        poll_s: float = 0.2,
    ) -> None:
        super().__init__(daemon=True)
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.handlers = {"kill": kill, "restore": restore}
        self.regions, self.poll_s = regions, poll_s
        self.events: list[tuple[str, str, float]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.poll_s):
            for region in self.regions:
                asked = self.folder / f"{region}.request"
                try:
                    order = json.loads(asked.read_text())
                    asked.unlink()
                except (OSError, ValueError):
                    continue
                self._carry_out(region, order if isinstance(order, dict) else {})

    def _carry_out(self, region: str, order: dict) -> None:
        action = order.get("action")
        outcome: dict = {"id": order.get("id"), "action": action}
        try:
            _check(region, action)
            self.handlers[str(action)](region)
            outcome |= {"state": "down" if action == "kill" else "up", "at": time.time()}
            self.events.append((region, str(action), outcome["at"]))
        except Exception as failed:  # noqa: BLE001 — the requester reads it from the outcome
            outcome["error"] = f"{type(failed).__name__}: {failed}"[:2000]
        tmp = self.folder / f".{region}.state.tmp"
        tmp.write_text(json.dumps(outcome))
        os.replace(tmp, self.folder / f"{region}.state")

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(10)


def _check(region: str, action: object) -> None:
    if action not in ACTIONS:
        raise ValueError(f"unknown power action {action!r}: one of {', '.join(ACTIONS)}")
    if not _REGION.fullmatch(region):
        raise ValueError(f"{region!r} is not a region's name (lowercase letters, digits and -)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tidegate.control.ha.power", description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=ACTIONS)
    ap.add_argument("region")
    ap.add_argument("--folder", type=Path, required=True, help="the folder the harness's switch watches")
    ap.add_argument("--wait", type=float, default=300.0, help="seconds to wait for the outcome")
    args = ap.parse_args(argv)
    try:
        outcome = request(args.folder, args.region, args.action, wait_s=args.wait)
    except (RuntimeError, ValueError) as failed:
        print(f"power: {failed}", file=sys.stderr)
        return 1
    print(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
