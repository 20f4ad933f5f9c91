"""The streaming driver: one detached process per job × region, found through the control database.

``python -m tidegate.runtime.jobs.driver --run-id N`` runs the run the controller planned:
it holds the job's lease (renewing it while it lives, and stopping the moment it loses
it), reports status and per-batch metrics to the control database, and stops gracefully
— finishing the micro-batch in flight — when the operator asks (``stop_requested_at``)
or on SIGTERM. A rehearsal run stops by itself once it has caught up.

Nothing here is owned by Airflow: the driver outlives the task that started it, and any
later task finds it again by its run row and lease.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.engine import Row

from tidegate.control.db import ControlDB
from tidegate.errors import ConfigError, TidegateError
from tidegate.eventtime.durations import parse_duration_us
from tidegate.inputs.log import input_location, open_log
from tidegate.jobspec import parse_spec
from tidegate.jobspec.folders import confined_log
from tidegate.jvm.options import quick_driver
from tidegate.lineage.fence import Fenced, LeaseClock, LineageFence
from tidegate.lineage.final import job_final_through_us
from tidegate.lineage.layout import JobPaths
from tidegate.lineage.offsets import SourceOffset
from tidegate.processes import this_process
from tidegate.runtime.estimates.caught_up import caught_up
from tidegate.runtime.jobs.config import PlatformConfig, forget_driver_secrets, load_config
from tidegate.runtime.jobs.process import HOST, job_lease, rehearsal_lease
from tidegate.runtime.outputs.upkeep import Upkeep
from tidegate.spark.pipeline.release_gate import ReleaseGate, release_window
from tidegate.spark.pipeline.sink.metrics import BatchReport

LEASE_TTL_S = float(os.environ.get("TIDEGATE_LEASE_TTL_S", "15"))
HEARTBEAT_S = 1.0
STOP_GRACE_S = 60.0
DEFAULT_TRIGGER_INTERVAL = "1s"


def trigger_interval_us(env: Mapping[str, str] | None = None) -> int:
    """The drivers' processing-time trigger, ``TIDEGATE_TRIGGER_INTERVAL`` (a duration), in µs."""
    text = (os.environ if env is None else env).get("TIDEGATE_TRIGGER_INTERVAL", DEFAULT_TRIGGER_INTERVAL)
    us = parse_duration_us(text, field="TIDEGATE_TRIGGER_INTERVAL")
    if us < 100_000:
        raise ConfigError(
            f"TIDEGATE_TRIGGER_INTERVAL is {text!r}: below 100 ms a micro-batch's own fixed cost "
            "takes the whole interval",
            "set it to a duration of at least 100ms, e.g. 1s or 10s",
        )
    return us


MAX_TRIGGER_STRETCH_US = 60_000_000  # half the health check's 120 s without a batch while input waits


def trigger_stretch_s(env: Mapping[str, str] | None = None) -> float:
    """``TIDEGATE_TRIGGER_STRETCH``: the longest a caught-up windowed job's driver goes without
    a micro-batch while no window can close (:mod:`tidegate.spark.pipeline.release_gate`), in
    seconds; 0 (the default) reads at every trigger."""
    text = (os.environ if env is None else env).get("TIDEGATE_TRIGGER_STRETCH", "0s")
    us = parse_duration_us(text, field="TIDEGATE_TRIGGER_STRETCH")
    if us and not trigger_interval_us(env) < us <= MAX_TRIGGER_STRETCH_US:
        raise ConfigError(
            f"TIDEGATE_TRIGGER_STRETCH is {text!r}: it must be longer than the trigger interval and at most 60s, "
            "since the health check calls a driver that runs no batch for 120 s while input waits stalled",
            "set it to e.g. 30s, or to 0s to read at every trigger",
        )
    return us / 1e6


def trigger_interval(env: Mapping[str, str] | None = None) -> str:
    """:func:`trigger_interval_us` as Spark's processing-time trigger takes it."""
    return f"{trigger_interval_us(env) // 1000} milliseconds"


class _Rate:
    """Input rate from the log's end offsets, sampled on the wall clock (events/s)."""

    def __init__(self, window_s: float = 60.0) -> None:
        self.samples: deque[tuple[float, int]] = deque()
        self.window_s = window_s

    def add(self, at: float, total: int) -> float:
        self.samples.append((at, total))
        while len(self.samples) > 2 and at - self.samples[0][0] > self.window_s:
            self.samples.popleft()
        (t0, n0), (t1, n1) = self.samples[0], self.samples[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0


class Driver:
    # the clocks the heartbeat reads and the pause between beats: tests drive them by hand
    monotonic = staticmethod(time.monotonic)
    wall = staticmethod(time.time)

    def __init__(self, config: PlatformConfig, db: ControlDB, run_id: int) -> None:
        self.config = config
        self.db = db
        self.run_id = run_id
        run = db.run(run_id)
        if run is None:
            raise TidegateError(
                f"run {run_id} is not in the control database {db.url}",
                "start jobs with `tidegate job start`, which plans the run first",
            )
        self.run = run
        version = db.version(run.job, run.version)
        if version is None:
            raise TidegateError(
                f"run {run_id}: version {run.version} of job {run.job} is not in the control database {db.url}",
                "deploy the job and start it again with `tidegate job start`",
            )
        self.spec = parse_spec(json.loads(version.spec_json), origin=f"{run.job} v{run.version}")
        self.region = config.region(run.region)
        lineage = db.lineage(run.lineage) if run.lineage is not None else None
        if lineage is None:
            raise TidegateError(
                f"run {run_id}: its lineage {run.lineage} is not in the control database {db.url}",
                "start jobs with `tidegate job start`, which opens the run's lineage first",
            )
        self.lineage = lineage
        self.paths = JobPaths.at(self.lineage.root, region=run.region)  # a local folder, or an s3a:// root
        self.root = self.paths.root
        # run.input describes the input for people; the spec says how to reach it (a log's path is resolved as it was)
        own = self.spec.source.kafka is not None or self.spec.own_logs
        self.input_location = (
            input_location(self.spec, config.event_log, config.kafka_connections, config.kafka_hosts, config.log_dirs)
            if own
            else Path(run.input)
        )  # fmt: skip: the brokers are checked again here
        if (
            not own and self.spec.source.event_log is not None
        ):  # the spec's own log, opened below: still in the log folders
            self.input_location = confined_log(
                run.input, f"job {run.job}: source.event_log", config.log_dirs, Path.cwd()
            )
        self.lease = rehearsal_lease(run.job, run.region) if run.kind == "rehearsal" else job_lease(run.job, run.region)
        self.holder = f"run-{run_id}"
        self.lease_clock = LeaseClock(LEASE_TTL_S, monotonic=self.monotonic)
        self.fence: LineageFence | None = None
        self.stop_event = threading.Event()  # the query should stop
        self.ended = threading.Event()  # the driver is done: the heartbeat stops renewing its lease
        self.stop_reason = ""
        self.lease_lost = False
        self.rate = _Rate()
        self.totals = {"input_events": 0, "rows_emitted": 0}
        self.last_output_us = self.lineage.last_output_us
        self.caught_up = False
        # once caught up, a windowed job reads its input when a window can close (release_gate)
        stretch = trigger_stretch_s()
        self.gate = ReleaseGate(stretch) if stretch and run.kind != "rehearsal" and release_window(self.spec) else None
        self.last_end: dict[int, int] | None = None  # end offsets of this run's last batch
        self.last_left: int | None = None  # the input this run's last batch left unread
        self.upkeep = Upkeep.from_env()
        self.compacting: threading.Thread | None = None
        self.next_compaction = self.monotonic() + (self.upkeep.compact_every_us or 0) / 1e6

    # -- lifecycle ---------------------------------------------------------------------
    def main(self) -> int:
        me = this_process()
        if not self.db.claim_run(self.run_id, me.pid, HOST, pid_started_at=me.started_at):
            self._say(f"run {self.run_id} was already started by pid {self._run_now().pid}; exiting")
            return 3
        sent = time.monotonic()
        epoch = self.db.acquire_lease(
            self.lease, self.holder, LEASE_TTL_S, host=HOST, pid=me.pid, pid_started_at=me.started_at
        )
        if not epoch:
            self._finish("failed", "the lease of this job and region is held by another run; not started")
            return 3
        self.lease_clock.renewed(sent)
        self.fence = LineageFence(
            self.root, epoch, f"run {self.run_id}", self.lease_clock, lambda: self._holds(epoch), store=self.paths.store
        )
        try:
            self.fence.claim()
        except Fenced as exc:
            self._finish("lost", str(exc))
            return 4
        from tidegate.spark.pipeline.sink.files import clear_partial_writes

        for left in clear_partial_writes(self.paths.staged_folders, self.paths.store, state=self.paths.state):
            self._say(f"removed {left}: staging left by an earlier driver that did not finish its batch")
        beat = threading.Thread(target=self._heartbeat, name="tidegate-heartbeat", daemon=True)
        beat.start()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        stream = None
        try:
            stream = self._start_stream()
            self.db.update_run(self.run_id, status="running")
            self._say(f"running: lineage {self.lineage.id} under {self.root}")
            graceful = self._wait(stream)
            failure = stream.failure()
            if failure is not None and Fenced.__name__ in str(failure):
                self.lease_lost = True
                self._finish(
                    "lost",
                    "fenced: another run holds this job's lease; this driver committed nothing "
                    f"more and stopped ({_first_line_with(str(failure), Fenced.__name__)})",
                )
                return 4
            if failure is not None and self._lease_passed():
                # a stale driver's batch can fail before any fence: its successor cleared the
                # staging it was writing into (clear_partial_writes) while it was paused
                self.lease_lost = True
                self._finish(
                    "lost",
                    "the lease passed to another run while this driver's batch failed; it "
                    f"committed nothing more and stopped ({_own_message(str(failure))})",
                )
                return 4
            if failure is not None:
                self._finish("failed", f"the streaming query failed: {failure}")
                return 1
            if self.lease_lost:
                self._finish("lost", "the lease passed to another run; this driver stopped without finishing")
                return 4
            detail = self.stop_reason or "stopped"
            self._finish(
                "stopped", detail if graceful else detail + " (batch in flight interrupted after the grace time)"
            )
            return 0
        except BaseException as exc:  # the run row must say why the driver ended
            self._finish("failed", f"{type(exc).__name__}: {exc}")
            traceback.print_exc()
            return 1
        finally:
            self.stop_event.set()
            self.ended.set()
            if stream is not None and stream.query is not None and stream.query.isActive:
                stream.stop(grace_s=0)

    def _start_stream(self):
        from tidegate.spark.pipeline.runner import StreamingRun
        from tidegate.spark.session import build_session

        info = json.loads(self.paths.store.read_bytes(self.paths.lineage_file))
        options = {}
        if info.get("starting_offsets") is not None:
            options["startingOffsets"] = json.dumps({str(p): o for p, o in info["starting_offsets"].items()})
        if self.run.partial:
            options["acceptPartial"] = "true"
        spark = build_session(
            f"tidegate-{self.spec.name}-{self.region.name}",
            master=self.region.spark_master,
            conf=self.region.spark_session_conf(),
            quick_jvm=quick_driver(self.region.spark_master),
        )
        self.log = open_log(self.input_location)
        return StreamingRun(
            spark,
            self.spec,
            self.input_location,
            self.root,
            extra_options=options,
            emit_after_us=info.get("emit_after_us"),
            emit_from_offsets={int(p): o for p, o in (info.get("emit_from_offsets") or {}).items()} or None,
            on_batch=self._on_batch,
            trigger_interval=trigger_interval(),
            fence=self.fence,
            store=self.paths.store,
            gate=self.gate,
        ).start()

    def _wait(self, stream) -> bool:
        next_idle_check = time.time() + 2.0
        while not self.stop_event.is_set():
            if not stream.query.isActive:
                return True
            if self.run.kind == "rehearsal" and self.caught_up:
                self.stop_reason = "rehearsal caught up"
                break
            if not self.caught_up and time.time() >= next_idle_check and not stream.in_batch:
                next_idle_check = time.time() + 2.0
                self._caught_up_without_a_batch()
            self._compact_now_and_then()
            time.sleep(0.2)
        self._say(f"stopping: {self.stop_reason}")
        self.db.update_run(self.run_id, status="stopping")
        return stream.stop(grace_s=0 if self.lease_lost else STOP_GRACE_S)

    def _compact_now_and_then(self) -> None:
        """Every ``TIDEGATE_COMPACTION_EVERY``, merge the lineage's batch folders beside the
        query (:mod:`tidegate.lineage.compaction`: safe while batches are written)."""
        every = self.upkeep.compact_every_us
        busy = self.compacting is not None and self.compacting.is_alive()
        if every is None or busy or self.run.kind == "rehearsal" or self.monotonic() < self.next_compaction:
            return
        self.next_compaction = self.monotonic() + every / 1e6
        self.compacting = threading.Thread(target=self._compact, name="tidegate-compaction", daemon=True)
        self.compacting.start()

    def _compact(self) -> None:
        from tidegate.lineage.compaction import compact_lineage
        from tidegate.runtime.outputs.reader import publish_view

        every_us = self.upkeep.compact_every_us
        assert every_us is not None, "_compact_now_and_then starts a compaction only on a schedule"
        try:
            done = compact_lineage(
                self.root, now_s=time.time(), grace_s=self.upkeep.grace_us / 1e6, store=self.paths.store
            )
            if any(c.files_written for c in done):
                publish_view(self, self.run.job)  # the DuckDB view reads the compacted files from now on
                self._say("; ".join(c.describe() for c in done if c.files_written))
        except Exception as exc:  # the outputs stay as they were: compaction publishes last
            self._say(
                f"compaction of {self.root} failed, outputs unchanged; it is tried again in "
                f"{every_us / 60e6:.0f} min: {type(exc).__name__}: {exc}"
            )

    def _caught_up_without_a_batch(self) -> None:
        """A start with nothing to read runs no micro-batch: it is caught up when the log
        holds nothing past where it resumes (its last batch's end, or its start position)."""
        position = self._position()
        if position is None:
            return
        backlog = sum(max(0, self.log.end_offset(p) - position.get(p, 0)) for p in range(self.log.partitions))
        if backlog == 0:
            now = time.time()
            run = self._run_now()
            if run.caught_up_at is None and run.last_batch_id is None:
                self.db.update_run(self.run_id, caught_up_at=now, catch_up_s=now - run.requested_at, backlog_events=0)
            self.caught_up = True
            self._engage_gate()

    def _position(self) -> dict[int, int] | None:
        if self.last_end is not None:
            return self.last_end
        lineage = self.db.lineage(self.lineage.id)
        if lineage is None:  # read at the start, and lineage rows are never deleted
            raise TidegateError(
                f"run {self.run_id}: its lineage {self.lineage.id} is no longer in the control database",
                "check that TIDEGATE_CONTROL_DB still names the database the run was planned in",
            )
        if self.run.checkpoint == "reused" and lineage.last_offsets:
            return {int(p): int(o) for p, o in json.loads(lineage.last_offsets).items()}
        info = json.loads(self.paths.store.read_bytes(self.paths.lineage_file))
        offsets = info.get("starting_offsets")
        return None if offsets is None else {int(p): int(o) for p, o in offsets.items()}

    def _lease_passed(self) -> bool:
        """Whether the lease was granted to another run after this one (its fencing epoch
        moved past ours); False when the database cannot be asked: the failure stands."""
        try:
            return self.fence is not None and self.db.epoch(self.lease) > self.fence.epoch
        except Exception:
            return False

    def _holds(self, epoch: int) -> bool:
        """The database's word that this run still holds its lease under ``epoch``; a
        failing database is asked again while the lease lasts (then the error stands)."""
        while True:
            try:
                return self.db.holds(self.lease, self.holder, epoch)
            except Exception:
                if self.lease_clock.remaining_s() < 1.0:
                    raise
                time.sleep(0.5)

    def _on_signal(self, signum, _frame) -> None:
        self.stop_reason = f"stopped by signal {signal.Signals(signum).name}"
        self.stop_event.set()

    def _heartbeat(self) -> None:
        """Renew the lease until the driver has ended — through a graceful stop too, which
        may outlast the lease's time to live while the batch in flight finishes."""
        me = this_process()
        while not self.ended.is_set():
            try:
                sent = self.monotonic()
                if not self.db.renew_lease(
                    self.lease, self.holder, LEASE_TTL_S, pid=me.pid, pid_started_at=me.started_at
                ):
                    self.lease_lost = True
                    self.stop_reason = "lease lost"
                    self.stop_event.set()
                    return
                self.lease_clock.renewed(sent)
                row = self._run_now()
                self.db.update_run(self.run_id, heartbeat_at=self.wall())
                if row.stop_requested_at is not None:
                    self.stop_reason = "stop requested by the operator"
                    if row.force_stop:
                        self._finish("stopped", "forced stop: exited without finishing the batch in flight")
                        os._exit(0)
                    self.stop_event.set()
            except Exception as exc:  # a control database hiccup is ridden out while the lease lasts
                self._say(f"heartbeat: {type(exc).__name__}: {exc}")
            if self.lease_clock.expired():  # commits are refused from now on: stop rather than spin
                self.lease_lost = True
                self.stop_reason = f"could not renew the lease within its {LEASE_TTL_S:.0f} s time to live"
                self.stop_event.set()
                return
            self._pause(HEARTBEAT_S)

    def _pause(self, seconds: float) -> None:
        self.ended.wait(seconds)

    def _finish(self, status: str, detail: str) -> None:
        self.ended.set()
        try:
            self.db.update_run(self.run_id, status=status, status_detail=detail, ended_at=time.time())
            if status != "lost":
                self.db.release_lease(self.lease, self.holder)
            self._say(f"{status}: {detail}")
        except Exception as exc:
            self._say(f"could not record the end of the run: {exc}")

    # -- per batch ---------------------------------------------------------------------
    def _on_batch(self, report: BatchReport, end: SourceOffset) -> None:
        """Called by the streaming query in this process after each batch's rows are visible
        and before Spark commits it: the batch's report into the control database."""
        now = self.wall()
        log_end = [self.log.end_offset(p) for p in range(self.log.partitions)]
        backlog = sum(max(0, e - end.offsets.get(p, 0)) for p, e in enumerate(log_end))
        rate = self.rate.add(now, sum(log_end))
        self.totals["input_events"] += report.input_events
        self.totals["rows_emitted"] += report.rows_emitted
        if report.last_output_us is not None:
            self.last_output_us = max(self.last_output_us or report.last_output_us, report.last_output_us)
        why = caught_up(backlog, self.last_left, rate, capped=self._capped(end))
        caught_up_now = why is not None
        if caught_up_now and not self.caught_up:
            self._say(f"caught up after batch {report.batch_id}: {why}")
        counts = _sum_counts(report.counts)
        wm = report.watermark_us
        assert self.fence is not None, "main claims the fence before the stream starts"
        try:
            with self.fence.commit(f"metrics of batch {report.batch_id}"):
                self._record(report, end, now, backlog, rate, caught_up_now, counts, wm)
        except Fenced:
            raise
        except Exception as exc:  # metrics are for people; the batch's output is already safe
            self._say(f"batch {report.batch_id}: could not record metrics: {type(exc).__name__}: {exc}")
        self.caught_up = self.caught_up or caught_up_now
        if self.caught_up:
            self._engage_gate()
        self.last_end = dict(end.offsets)
        self.last_left = backlog

    def _engage_gate(self) -> None:
        """Caught up: a job the release gate may hold reads its input when a window can close."""
        if self.gate is not None and self.gate.engage():
            self._say(
                f"caught up: reading input when the watermarks reach the next window end, at most "
                f"{self.gate.stretch_s:g} s apart (TIDEGATE_TRIGGER_STRETCH)"
            )

    def _capped(self, end: SourceOffset) -> bool:
        """Whether the batch ending at ``end`` read the source's whole per-batch limit."""
        limit = self.spec.source.max_events_per_batch
        if not limit:
            return False
        start = self._position()
        return start is not None and sum(o - start.get(p, 0) for p, o in end.offsets.items()) >= limit

    def _record(
        self,
        report: BatchReport,
        end: SourceOffset,
        now: float,
        backlog: int,
        rate: float,
        caught_up_now: bool,
        counts: dict,
        wm: int | None,
    ) -> None:
        self.db.record_batch(
            run_id=self.run_id,
            batch_id=report.batch_id,
            job=self.run.job,
            region=self.run.region,
            processed_at=now,
            batch_seconds=report.seconds,
            input_events=report.input_events,
            quarantined=report.quarantined,
            rows_emitted=report.rows_emitted,
            job_watermark_us=wm,
            watermark_delay_us=report.watermark_delay_us,
            processing_time_watermark_us=report.clock_us,
            processing_lag_us=report.processing_time_lag_us,
            last_output_us=report.last_output_us,
            backlog_events=backlog,
            end_offsets={str(p): o for p, o in end.offsets.items()},
            partitions={str(p): c for p, c in report.counts.items()},
            stages={"stages": report.stages, "substreams": report.substreams, "input_rate_eps": rate},
            **counts,
        )
        run_fields = dict(
            last_batch_id=report.batch_id,
            job_watermark_us=wm,
            last_output_us=self.last_output_us,
            backlog_events=backlog,
            **self.totals,
        )
        run = self._run_now()
        if run.first_batch_at is None:
            run_fields["first_batch_at"] = now
        if report.rows_emitted and run.first_output_at is None:
            run_fields["first_output_at"] = now
        if caught_up_now and run.caught_up_at is None:
            run_fields["caught_up_at"] = now
            run_fields["catch_up_s"] = now - run.requested_at
        self.db.update_run(self.run_id, **run_fields)
        lineage_fields = dict(
            last_output_us=self.last_output_us, last_offsets={str(p): o for p, o in end.offsets.items()}
        )
        if wm is not None:  # a per-event job's rows are final below the watermark too
            lineage_fields["emitted_through_us"] = job_final_through_us(self.spec, wm, self.lineage.output_from_us)
        self.db.update_lineage(self.lineage.id, **lineage_fields)

    def _run_now(self) -> Row:
        """The run's row as the control database has it now (it was there at the start, and
        runs are never deleted)."""
        run = self.db.run(self.run_id)
        if run is None:
            raise TidegateError(
                f"run {self.run_id} is no longer in the control database",
                "check that TIDEGATE_CONTROL_DB still names the database the run was planned in",
            )
        return run

    def _say(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        print(
            f"{stamp} tidegate driver run {self.run_id} ({self.run.job}@{self.run.region}): {message}",
            file=sys.stderr,
            flush=True,
        )


def _own_message(text: str) -> str:
    """The failure's own message: the last line of a traceback that is not Spark's query dump."""
    lines = [line.strip() for line in text.split("=== Streaming Query ===")[0].splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _first_line_with(text: str, word: str) -> str:
    return next((line.strip() for line in text.splitlines() if word in line), text.splitlines()[0] if text else "")


def _sum_counts(counts: dict) -> dict[str, int]:
    names = ("out_of_order_adjusted", "out_of_order_dropped", "late_adjusted", "late_dropped", "early_dropped")
    return {n: sum(int(c.get(n, 0)) for c in counts.values()) for n in names}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tidegate.runtime.jobs.driver",
        description="Run one planned job run (started by `tidegate job start`).",
    )
    parser.add_argument("--run-id", type=int, required=True)
    args = parser.parse_args(argv)
    config = load_config()
    db = ControlDB(config.control_db)
    forget_driver_secrets(os.environ)  # connected: the Spark JVM and its workers started next never see them
    try:
        return Driver(config, db, args.run_id).main()
    except TidegateError as exc:
        print(f"tidegate driver: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
