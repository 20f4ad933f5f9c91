"""Test helpers for whole-platform tests: two regions, a control database, a filled event log, real drivers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import yaml

from tidegate.eventtime.durations import format_time_us
from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.generator import GeneratorConfig, generate
from tidegate.runtime.jobs import process
from tidegate.runtime.jobs.config import load_config
from tidegate.runtime.jobs.controller import Controller

REPO = Path(__file__).resolve().parents[1]
MIN = 60_000_000


def fill(
    event_log: Path,
    events: int,
    seed: int,
    partitions: int = 3,
    start_us: int | None = None,
    segment_bytes: int | None = None,
    chunk_events: int = 50_000,
) -> EventLog:
    if EventLog.exists(event_log):
        log = EventLog.open(event_log)
    else:
        sizes = {} if segment_bytes is None else {"segment_bytes": segment_bytes}
        log = EventLog.create(event_log, partitions=partitions, clock="manual", **sizes)
    generate(
        log,
        GeneratorConfig(
            devices=8,
            partitions=partitions,
            events=events,
            seed=seed,
            mode="backfill",
            rate_per_s=2.0,
            idle_partitions=1,
            late_fraction=0.03,
            early_fraction=0.01,
            malformed_fraction=0.01,
            start_us=start_us,
            chunk_events=chunk_events,
        ),
    )
    return log


def fill_orders(event_log: Path, orders: int, seed: int, start_us: int) -> int:
    """For jobs/order_payments.yaml: orders and their payments on 3 partitions, arriving in
    time order with some disorder: most orders paid once within 15 min, some twice, some late
    or never; returns the last arrival."""
    rng = np.random.default_rng(seed)
    log = (
        EventLog.open(event_log)
        if EventLog.exists(event_log)
        else EventLog.create(event_log, partitions=3, clock="manual")
    )
    events = []
    for n in range(orders):
        at = start_us + n * 20_000_000 + int(rng.integers(0, 10)) * 1_000_000
        order_id = f"s{seed}-o{n % (orders // 3)}"  # ids repeat: duplicate orders
        events.append((at, {"kind": "order", "orderId": order_id, "amount": 10.0 + n % 7}))
        for _ in range(int(rng.choice([0, 1, 1, 1, 2]))):
            paid = at + int(rng.integers(-2, 20)) * MIN  # some before the order, some past 15 min
            events.append((paid, {"kind": "payment", "orderId": order_id, "amount": 10.0}))
    events.sort(key=lambda e: e[0])
    for partition in range(3):
        mine = [e for i, e in enumerate(events) if i % 3 == partition]
        late = rng.integers(0, 90, len(mine)) * 1_000_000  # arrival up to 90 s after the event
        arrivals = np.maximum.accumulate(np.array([t for t, _ in mine]) + late)
        payloads = [json.dumps(p | {"eventTime": format_time_us(t)}) for t, p in mine]
        log.append(partition, [None] * len(mine), payloads, arrivals.tolist())
    return max(t for t, _ in events) + 90_000_000


def fill_two_logs(orders_event_log: Path, payments_event_log: Path, orders: int, seed: int, start_us: int) -> int:
    """For jobs/orders_payments_two_logs.yaml: orders on a 2-partition log, their payments on a
    1-partition log with its own fields and time format; payments up to 2 min late, orders up
    to 3 min (some beyond each input's tolerance), some paid twice, late or never, and the
    odd payment that is not JSON. Returns the last arrival."""
    rng = np.random.default_rng(seed)
    logs = [EventLog.open(h) if EventLog.exists(h) else EventLog.create(h, partitions=n, clock="manual")
            for h, n in ((orders_event_log, 2), (payments_event_log, 1))]  # fmt: skip
    placed: list[list] = [[[], []], [[]]]  # per log, per partition: (event time, payload)
    for n in range(orders):
        at = start_us + n * 20_000_000 + int(rng.integers(0, 10)) * 1_000_000
        order_id = f"s{seed}-o{n % (orders // 3)}"  # ids repeat: duplicate orders
        placed[0][n % 2].append((at, {"orderId": order_id, "amount": 10.0 + n % 7, "orderedAt": format_time_us(at)}))
        for _ in range(int(rng.choice([0, 1, 1, 1, 2]))):
            paid = at + int(rng.integers(-2, 20)) * MIN  # some before the order, some past 15 min
            text = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(paid // 1_000_000))
            placed[1][0].append((paid, {"orderId": order_id, "paid": 10.0, "paidAt": text}))
    last = 0
    for log, lateness, parts in zip(logs, (180, 120), placed, strict=True):
        for partition, events in enumerate(parts):
            events.sort(key=lambda e: e[0])
            late = rng.integers(0, lateness, len(events)) * 1_000_000
            floor = log.describe()[partition].last_arrival_us or 0  # after what the log holds
            arrivals = np.maximum.accumulate(np.maximum(np.array([t for t, _ in events]) + late, floor))
            payloads = [json.dumps(p) if rng.random() > 0.01 else "{not json" for _, p in events]
            log.append(partition, [None] * len(events), payloads, arrivals.tolist())
            last = max(last, int(arrivals[-1]))
    return last


def first_arrival(log: EventLog) -> int:
    return min(i.first_arrival_us for i in log.describe() if i.first_arrival_us is not None)


class Platform:
    """Config, controller and spec files for one test; drivers it started are killed at the end."""

    def __init__(
        self, root: Path, event_log: Path, control_url: str | None = None, env: dict[str, str] | None = None
    ) -> None:
        self.root = root
        self.event_log = event_log
        # a copy of the GX project: results and Data Docs of the test stay under tmp
        expectations = root / "expectations"
        shutil.copytree(REPO / "expectations", expectations, ignore=shutil.ignore_patterns("uncommitted"))
        self.env = {
            "TIDEGATE_EXPECTATIONS": str(expectations),
            "TIDEGATE_HOME": str(root),
            "TIDEGATE_EVENT_LOG": str(event_log),
            "TIDEGATE_CONTROL_DB": control_url or f"sqlite:///{root / 'control.db'}",
            "TIDEGATE_REGIONS": "east,west",
            "TIDEGATE_CHECK_SERVICE": "3m",  # stop_everything stops it; a platform left behind frees it soon
            "TIDEGATE_SPEC_DIRS": f"{root}{os.pathsep}{REPO / 'jobs'}",  # the DAGs deploy spec_file()'s specs
            # spec_file()'s specs name the test's log, beside which a test keeps its other logs
            "TIDEGATE_LOG_DIRS": f"{root}{os.pathsep}{Path(event_log).parent}",
            # its reference folders: its own, and the examples' snapshots under jobs/
            "TIDEGATE_REFERENCE_DIRS": f"{root}{os.pathsep}{REPO / 'jobs'}",
        } | (env or {})  # e.g. a region's storage root
        self.config = load_config(env=self.env, cwd=root)
        self.controller = Controller(self.config, actor="test")

    def spec_file(self, name: str = "device_fleet.yaml", **changes) -> Path:
        data = yaml.safe_load((REPO / "jobs" / name).read_text())
        data["source"] = {"event_log": str(self.event_log), "max_events_per_batch": 600}
        data.update(changes)
        path = self.root / f"{data['name']}-v{data['version']}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def cli_env(self) -> dict[str, str]:
        return dict(os.environ) | self.env

    def wait_batches(self, job: str, region: str, at_least: int, timeout_s: float = 240) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            run = self.controller.db.latest_run(job, region)
            if run is not None and run.last_batch_id is not None and run.last_batch_id >= at_least:
                return
            if run is not None and run.status in ("failed", "lost", "stopped"):
                raise AssertionError(f"run {run.id} {run.status}: {run.status_detail}")
            time.sleep(0.2)
        raise AssertionError(f"{job}@{region} did not reach batch {at_least} in {timeout_s} s")

    def wait_caught_up(self, job: str, region: str, timeout_s: float = 300):
        return self.controller.wait_for(
            job, region, lambda s: s.state == "running" and s.caught_up, timeout_s, "caught up"
        )

    def start_pair(self, job: str) -> int:
        """Deploy the spec and start ``job`` in east, then west, at T — its look-back reaching the
        log's first event, so every window counts — and wait until both caught up; T. East was
        started first: consumers read it."""
        self.controller.deploy(self.spec_file())
        t = first_arrival(EventLog.open(self.event_log)) + 8 * MIN
        for region in ("east", "west"):
            self.controller.start(job, region, mode="custom", at=t)
        for region in ("east", "west"):
            self.wait_caught_up(job, region)
        return t

    def kill_driver(self, job: str, region: str) -> int:
        run = self.controller.db.latest_run(job, region)
        driver = process.driver(run)
        assert driver is not None and driver.alive(), f"run {run.id} has no driver here to kill"
        os.kill(driver.pid, signal.SIGKILL)  # the driver alone: its JVM notices and follows
        deadline = time.monotonic() + 10
        while driver.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        return driver.pid

    def stop_everything(self) -> None:
        """Kill every driver and supervisor this platform started, and its check service."""
        from tidegate.runtime.checks import check_service

        check_service.stop(self.config.home, grace_s=2.0)
        for run in self.controller.db.runs(kind=None):
            if (driver := process.driver(run)) is not None:
                driver.signal_group(signal.SIGKILL)  # nothing when its PID is another process's by now
        for region in self.config.regions:
            lease = self.controller.db.lease(process.supervisor_lease(region))
            if lease is not None and (holder := process.lease_holder(lease)) is not None:
                holder.signal_group(signal.SIGKILL)
