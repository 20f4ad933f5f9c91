"""Benchmark: recovery drills under live traffic, run through Airflow as an operator runs them.

    .venv/bin/python bench/bench_drills.py [--rate 20] [--source event_log|kafka] [--json FILE] [--work DIR]

A fresh platform — live traffic of ``--rate`` events per second the whole time, a control
database, Airflow on SQLite — gets the job deployed to east and west by ``tidegate_deploy``.
The traffic (``bench/drill_traffic.py``) goes to a wall-clock embedded event log
(``--source event_log``, the default) or to a topic of a local Kafka broker whose append time is
each record's arrival time (``--source kafka``). Then, one after another, each through
``airflow dags test``:

* the drill matrix: ``node-failure``, ``upgrade`` and ``region-loss`` against the standby
  and against the active region (``tidegate_drill``);
* two failover requests for the same failing active region at once (``tidegate_failover``
  twice, concurrently): exactly one may move consumers;
* on request only (``--case planned-stop``; not in the default run CI makes), a planned stop
  of the standby region (``tidegate_planned_stop``, the same spec, with a rehearsal): its
  estimate by the model and by the rehearsal — as measured and as corrected for the
  restart's resources — against the measured catch-up;
* a drill that fails half way: a region-loss drill whose restored driver's Spark stalls as
  soon as it runs (its JVM frozen, SIGSTOP) and is given 10 s to catch up, which it never
  does. It must restore what it broke and say so.

Per case it prints the DAG run's outcome, the time to recover (break to caught up, from the
procedure record) beside its estimate, the consumer-visible gap — the longest time no new
final output reached consumers while the case ran, beside the job's own cadence measured
undisturbed before the first case, and the procedure record's own figure (how far the view's
last window end fell behind the live stream, at most and beyond the allowed delay) — and
rows missing or doubled in the consumer view afterwards, key by key against the batch path;
then, per procedure kind, each estimate's relative error against the measured catch-up, and
the check task's time. Exits 1 unless every case ends with consumers on a running region,
both regions running and caught up, and nothing missing, extra, doubled or different.
``tests/bench/test_bench_drills.py`` runs it in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the platform and Airflow harness the tests use

import drill_traffic  # noqa: E402
import results_page  # noqa: E402
from airflow_support import dags_test, migrate, tail  # noqa: E402
from platform_support import Platform  # noqa: E402
from scratch import scratch  # noqa: E402
from tidegate.examples import DEMO_JOB  # noqa: E402
from tidegate.runtime.jobs.controller import Controller  # noqa: E402
from tidegate.runtime.jobs.process import driver_alive, driver_here  # noqa: E402
from tidegate.runtime.procedures.faults import kill_group  # noqa: E402

JOB = DEMO_JOB
MATRIX = [(kind, target) for kind in ("node-failure", "upgrade", "region-loss") for target in ("standby", "active")]
ON_REQUEST = ("planned-stop / standby",)  # run only when --case names them
SETTLE_S = 30.0  # undisturbed running before the first case: the consumer view's own cadence


def say(text: str) -> None:
    print(f"[drills] {text}", file=sys.stderr, flush=True)


@dataclass
class Case:
    name: str
    dag_ok: bool
    expected_ok: bool
    seconds: float
    recover_s: float | None = None  # a drill's from the break, a planned stop's from the restart's request
    catch_up_s: float | None = None  # the restart's own catch-up (its request → caught up): what is estimated
    estimate_s: float | None = None
    kind: str | None = None  # the procedure: drill:node-failure, drill:upgrade, planned-stop, …
    estimates: dict = field(default_factory=dict)  # each way's figure (s): model, rehearsal, rehearsal as measured
    check_s: float | None = None  # the completeness task, from its start to the recorded result
    check_warm: bool | None = None  # run by the warm check service (else a spark-submit)
    gap_s: float | None = None
    view_behind: dict = field(default_factory=dict)  # the record's consumer gap: most behind, beyond allowed (s)
    consumers: str | None = None
    regions: dict = field(default_factory=dict)
    score: dict = field(default_factory=dict)
    appended: int | None = None  # events the generator appended to the log while the case ran
    problems: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems


class ConsumerWatch(threading.Thread):
    """Samples, twice a second, where consumers read and how far that region's output is final."""

    def __init__(self, controller: Controller) -> None:
        super().__init__(daemon=True)
        self.c = controller
        self.samples: list[tuple[float, str | None, int | None]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.5):
            try:
                active = self.c.db.active_region(JOB)
                region = active.region if active else None
                self.samples.append((time.monotonic(), region, self.c.emitted_through(JOB, region) if region else None))
            except Exception as exc:  # a sample missed is a sample missed: the next one counts
                say(f"watch: {exc}")

    def longest_gap(self, start: float, end: float) -> float:
        """The longest stretch in [start, end] during which consumers got no newer final output."""
        last_change, best, seen = start, 0.0, None
        for at, _, through in self.samples:
            if at < start or at > end or through is None:
                continue
            if seen is None or through > seen:
                if seen is not None:
                    best = max(best, at - last_change)
                    last_change = at
                seen = through
        return round(max(best, end - last_change), 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=20.0, help="live traffic, events per second")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--work", type=Path)
    ap.add_argument(
        "--settle",
        type=float,
        default=SETTLE_S,
        help="seconds of undisturbed running before the first case, to measure the consumer view's cadence",
    )
    ap.add_argument(
        "--source",
        choices=("event_log", "kafka"),
        default="event_log",
        help="where the live traffic goes: the embedded event log, or a local Kafka broker's topic",
    )
    ap.add_argument(
        "--case",
        action="append",
        default=[],
        help="run only the cases whose name contains this (repeatable); default: all",
    )
    args = results_page.parse_args(ap, argv)
    with scratch(args.work, "drills") as work:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the drivers below are stopped too
        traffic = drill_traffic.start(args.source, work, args.rate)
        root = work / "platform"
        root.mkdir()
        platform = Platform(root, traffic.event_log, env=traffic.platform_env())
        platform.traffic = traffic
        airflow_home = work / "airflow"
        try:
            cases = run(platform, airflow_home, args)
        finally:
            try:
                platform.stop_everything()
            finally:
                traffic.stop()
        report(cases, args.rate, traffic.name)
        if args.json:
            args.json.write_text(json.dumps([asdict(c) | {"passed": c.passed} for c in cases], indent=2, default=str))
        return 0 if cases and all(c.passed for c in cases) else 1


def run(p: Platform, home: Path, args) -> list[Case]:
    migrate(home)
    spec = live_spec(p)
    time.sleep(5)  # a little traffic before the first output time
    if not p.traffic.running():
        raise SystemExit(f"the generator stopped: {p.traffic.tail()}")
    say(f"live traffic at {args.rate:g} ev/s into the {p.traffic.name}; deploying to east and west")
    deployed = dags_test(home, "tidegate_deploy", {"spec": str(spec), "mode": "now"}, p.env, p.root)
    if deployed.returncode:
        raise SystemExit(f"tidegate_deploy failed:\n{tail(deployed)}")
    c = p.controller
    t_us = max(c.db.lineages(JOB, r)[0].output_from_us for r in ("east", "west"))  # both have output after it
    watch = ConsumerWatch(Controller(p.config, actor="bench-watch"))
    watch.start()
    from tidegate.spark.session import build_session

    spark = build_session("tidegate-bench-drills", master="local[1]")
    settled = time.monotonic()
    time.sleep(args.settle)
    cadence = watch.longest_gap(settled, time.monotonic())
    say(f"undisturbed, the consumer view went at most {cadence} s without new output")
    cases = []
    wanted = [
        (
            f"{kind} / {target}",
            lambda kind=kind, target=target, name=f"{kind} / {target}": drill(
                p, home, spark, watch, t_us, name, kind, target
            ),
        )
        for kind, target in MATRIX
    ]
    wanted.append(
        ("failover / active, two requests at once", lambda: concurrent_failovers(p, home, spark, watch, t_us))
    )
    wanted.append(("planned-stop / standby", lambda: planned_stop(p, home, spark, watch, t_us, spec)))
    wanted.append(
        (
            "region-loss / standby, fails half way",
            lambda: drill(
                p,
                home,
                spark,
                watch,
                t_us,
                "region-loss / standby, fails half way",
                "region-loss",
                "standby",
                timeout_s=10,
                stall=True,
            ),
        )
    )
    for name, case in wanted:
        if any(part in name for part in args.case) or not args.case and name not in ON_REQUEST:
            cases.append(case())
    for case in cases:  # every case ran under live traffic, or it proves nothing about live traffic
        if case.appended is not None and case.appended <= 0:
            case.problems.append("no event reached the log while the case ran: the traffic was not live")
    if not p.traffic.running():
        cases[-1].problems.append(f"the generator stopped during the cases: {p.traffic.tail()}")
    watch.halt.set()
    for case in cases:
        case.regions["cadence_s"] = cadence
    spark.stop()
    return cases


def live_spec(p: Platform) -> Path:
    """The demo's job as the drills run it on live traffic: ten-second windows, so the consumer
    view moves every few seconds and a gap is visible; a large batch cap, so a replay of the
    whole history (a lost region's restore) does not crawl."""
    return p.spec_file(
        window={"kind": "tumbling", "size": "10s"},
        policy={
            "late_arrival_tolerance": "20s",
            "late_arrival_action": "adjust",
            "out_of_order_tolerance": "2s",
            "out_of_order_action": "adjust",
        },
        source={**p.traffic.source(), "max_events_per_batch": 20_000},
    )


def drill(
    p: Platform,
    home: Path,
    spark,
    watch: ConsumerWatch,
    t_us: int,
    name: str,
    kind: str,
    target: str,
    timeout_s: int = 900,
    stall: bool = False,
) -> Case:
    c = p.controller
    say(f"drill {name}")
    log_before = log_end(p)
    stalled = Stall(c, target) if stall else None
    started = time.monotonic()
    try:
        done = dags_test(
            home, "tidegate_drill", {"job": JOB, "kind": kind, "region": target, "timeout_s": timeout_s}, p.env, p.root
        )
    finally:
        froze = stalled.release() if stalled else None
    seconds = time.monotonic() - started
    expected_ok = not stall
    case = Case(name, done.returncode == 0, expected_ok, round(seconds, 1), appended=log_end(p) - log_before)
    record = c.db.procedures(JOB, kind_prefix="drill:")[0]
    read_record(case, record, c.db)
    case.estimates = {"model_s": case.estimate_s}  # a drill estimates by the model alone
    if case.dag_ok != expected_ok:
        case.problems.append(f"the DAG run {'passed' if case.dag_ok else 'failed'}:\n{tail(done, 3000)}")
    wanted = "passed" if expected_ok else "failed"
    if record.kind != f"drill:{kind}" or record.result != wanted:
        case.problems.append(f"drill record {record.kind} {record.result}, expected drill:{kind} {wanted}")
    if stall and not froze:
        case.problems.append("the restored driver's JVM was never frozen: the case did not test a stalled recovery")
    if not expected_ok and "state_left" not in (record.detail or ""):
        case.problems.append(f"the failed drill did not record the state it left: {record.detail}")
    return settle(p, spark, watch, t_us, case, started)


def read_record(case: Case, record, db) -> None:
    """The procedure record's figures: estimate vs measured, the restart's own catch-up, and
    the check task's time."""
    case.kind = record.kind
    case.recover_s = None if record.actual_s is None else round(record.actual_s, 1)
    detail = json.loads(record.detail) if (record.detail or "").startswith("{") else {}
    run_id = (detail.get("recovered") or {}).get("run_id") or detail.get("run_id")
    run = db.run(run_id) if run_id is not None else None
    case.catch_up_s = None if run is None or run.catch_up_s is None else round(run.catch_up_s, 1)
    case.estimate_s = None if record.estimate_s is None else round(record.estimate_s, 1)
    case.view_behind = detail.get("consumer_gap") or {}
    checked = [check for check in json.loads(record.checks or "[]") if check.get("task_s") is not None]
    if checked:
        case.check_s, case.check_warm = checked[0]["task_s"], bool(checked[0].get("warm"))


def planned_stop(p: Platform, home: Path, spark, watch: ConsumerWatch, t_us: int, spec: Path) -> Case:
    """The standby region stopped and restarted through ``tidegate_planned_stop`` (the same
    spec: the restart resumes its checkpoint), estimated by the model and a rehearsal."""
    c = p.controller
    name = "planned-stop / standby"
    standby = c.config.partner(c.db.active_region(JOB).region).name
    say(f"planned stop of {standby}")
    log_before = log_end(p)
    started = time.monotonic()
    done = dags_test(
        home,
        "tidegate_planned_stop",
        {"new_spec": str(spec), "region": standby, "rehearsal": True, "allowed_delay_s": 1800, "timeout_s": 900},
        p.env,
        p.root,
    )
    case = Case(
        name, done.returncode == 0, True, round(time.monotonic() - started, 1), appended=log_end(p) - log_before
    )
    record = c.db.procedures(JOB, kind_prefix="planned-stop")[0]
    read_record(case, record, c.db)
    estimates = (json.loads(record.detail or "{}") if (record.detail or "").startswith("{") else {}).get(
        "estimates"
    ) or {}
    case.estimates = {k: v for k, v in estimates.items() if k.endswith("_s")} | {"used": estimates.get("used")}
    if not case.dag_ok:
        case.problems.append(f"the DAG run failed:\n{tail(done, 3000)}")
    if record.result != "passed":
        case.problems.append(f"planned-stop record {record.result}: {record.detail}")
    return settle(p, spark, watch, t_us, case, started)


class Stall(threading.Thread):
    """Freezes the Spark JVM of the first driver the drill starts in the drilled region as
    soon as it runs (SIGSTOP: a hung executor, a GC pause that does not end), until
    :meth:`release`. The driver's process keeps its lease and answers the control database;
    its query makes no progress, so the recovery cannot catch up, whatever the machine's speed."""

    def __init__(self, c: Controller, target: str) -> None:
        super().__init__(daemon=True)
        self.c = c
        active = c.db.active_region(JOB).region
        self.region = active if target == "active" else c.config.partner(active).name
        before = c.db.latest_run(JOB, self.region)
        self.after = before.id if before else 0
        self.frozen: int | None = None
        self.halt = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.halt.is_set() and self.frozen is None:
            run = self.c.db.latest_run(JOB, self.region)
            if run is not None and run.id > self.after and run.status == "running" and driver_alive(run):
                jvm = next((child for child in children(run.pid) if comm(child) == "java"), None)
                if jvm is not None:
                    os.kill(jvm, signal.SIGSTOP)
                    self.frozen = jvm
                    say(f"  froze the Spark JVM of {self.region}'s restored driver (run {run.id}, pid {jvm})")
            self.halt.wait(0.05)

    def release(self) -> int | None:
        self.halt.set()
        self.join()
        if self.frozen is not None:
            try:
                os.kill(self.frozen, signal.SIGCONT)
            except ProcessLookupError:
                pass  # the restore replaced its driver
        return self.frozen


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(child) for child in task.read_text().split()]
        except OSError:
            pass
    return found


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def concurrent_failovers(p: Platform, home: Path, spark, watch: ConsumerWatch, t_us: int) -> Case:
    c = p.controller
    failing = c.db.active_region(JOB).region
    say(f"two failover requests at once for {failing}, its driver killed")
    before = {row.id for row in c.db.procedures(JOB, kind_prefix="failover")}
    status = c.status_of(JOB, failing)
    if status.run_id is not None and (process := driver_here(c.db.run(status.run_id))) is not None:
        kill_group(process)
    log_before = log_end(p)
    started = time.monotonic()
    conf = {"job": JOB, "from_region": failing, "reason": "bench: region failing", "only_if_unhealthy": False}
    results = at_once(2, lambda: dags_test(home, "tidegate_failover", conf, p.env, p.root))
    seconds = time.monotonic() - started
    ran = [r for r in results if not isinstance(r, Exception)]
    case = Case(
        "failover / active, two requests at once",
        len(ran) == 2 and all(r.returncode == 0 for r in ran),
        True,
        round(seconds, 1),
        appended=log_end(p) - log_before,
    )
    for r in results:
        if isinstance(r, Exception):
            case.problems.append(f"a failover DAG run: {str(r)[:3000]}")
        elif r.returncode:
            case.problems.append(f"a failover DAG run failed:\n{tail(r, 3000)}")
    mine = [row for row in c.db.procedures(JOB, kind_prefix="failover") if row.id not in before]
    passed = [row for row in mine if row.result == "passed"]
    if len(passed) != 1:
        case.problems.append(
            f"{len(passed)} failovers passed, expected exactly one: {[(row.id, row.result) for row in mine]}"
        )
    if passed:
        case.recover_s = None if passed[0].actual_s is None else round(passed[0].actual_s, 1)
    if c.db.active_region(JOB).region == failing:
        case.problems.append(f"consumers still read {failing}")
    return settle(p, spark, watch, t_us, case, started)


def log_end(p: Platform) -> int:
    return p.traffic.appended()


def at_once(n: int, fn) -> list:
    """``fn()`` run ``n`` times at the same time; the results in start order (an exception
    one of them raised in its place)."""
    results: list = [None] * n

    def one(i: int) -> None:
        try:
            results[i] = fn()
        except Exception as exc:  # noqa: BLE001 - the case reports it beside the other's result
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def settle(p: Platform, spark, watch: ConsumerWatch, t_us: int, case: Case, started: float) -> Case:
    """After a case: both regions must run and catch up, consumers read a running region, and
    the consumer view equals the batch path key by key."""
    c = p.controller
    for region in ("east", "west"):
        try:
            p.wait_caught_up(JOB, region, timeout_s=600)
        except Exception as exc:
            case.problems.append(f"{region} did not run caught up after the case: {exc}")
    case.gap_s = watch.longest_gap(started, time.monotonic())
    active = c.db.active_region(JOB)
    case.consumers = active.region if active else None
    case.regions = {r: c.status_of(JOB, r).state for r in ("east", "west")}
    if case.consumers is None or case.regions.get(case.consumers) != "running":
        case.problems.append(f"consumers read {case.consumers}, which is {case.regions.get(case.consumers)}")
    case.score = consumer_score(p, spark, t_us)
    if any(case.score[k] for k in ("missing", "extra", "duplicated", "differing")):
        case.problems.append(f"the consumer view differs from the batch path: {case.score}")
    say(
        f"  {case.name}: {'ok' if case.passed else 'FAILED'} in {case.seconds} s; {case.score}"
        + "".join(f"\n    {problem[:400]}" for problem in case.problems)
    )
    return case


def consumer_score(p: Platform, spark, t_us: int) -> dict:
    """The consumer view through where it is final now, against the batch path over the log."""
    from pyspark.sql import functions as F

    from tidegate.runtime.outputs.reader import read_consumer_view
    from tidegate.spark.output import read_output
    from tidegate.spark.pipeline.runner import run_batch
    from tidegate.spark.tools.compare import keyed_difference

    c = p.controller
    _, spec = c.spec(JOB)
    through = c.emitted_through(JOB, c.db.active_region(JOB).region)
    _, view = read_consumer_view(spark, c.db, JOB, from_us=t_us, to_us=through)
    out = p.root / "bench-batch" / str(time.monotonic_ns())
    batch = run_batch(spark, spec, p.traffic.batch_input, out, emit_after_us=t_us)
    reference = (
        read_output(spark, batch.paths.output).drop("batch_id").where(F.unix_micros("window_end") <= F.lit(through))
    )
    keys = ["window_start", "window_end"] + [name for name, _ in spec.group_by]
    return keyed_difference(reference, view, keys) | {"through_us": through}


def _check_cell(case: Case) -> str:
    if case.check_s is None:
        return "–"
    return f"{case.check_s}{'' if case.check_warm else ' (spark-submit)'}"


def report(cases: list[Case], rate: float, source: str = "embedded log") -> None:
    cadence = cases[0].regions.get("cadence_s") if cases else None
    print(
        f"drills under live traffic ({rate:g} ev/s into the {source}), through airflow dags test; "
        f"the consumer view's own cadence undisturbed: {cadence} s"
    )
    print(
        "| case | DAG run | events appended meanwhile | recovered in (s) | estimate (s) | consumer-visible gap (s) "
        "| view behind, recorded: at most / beyond allowed (s) | check task (s) | rows | missing | doubled "
        "| consumers on | result |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case in cases:
        s = case.score
        print(
            f"| {case.name} | {'ok' if case.dag_ok else 'failed'}{'' if case.expected_ok else ' (expected)'} "
            f"| {case.appended} | {case.recover_s if case.recover_s is not None else '–'} "
            f"| {case.estimate_s if case.estimate_s is not None else '–'} | {case.gap_s} "
            f"| {case.view_behind.get('max_delay_s', '–')} / {case.view_behind.get('beyond_allowed_s', '–')} "
            f"| {_check_cell(case)} | {s.get('rows')} "
            f"| {s.get('missing')} | {(s.get('duplicated') or 0) + (s.get('extra') or 0)} | {case.consumers} "
            f"| {'pass' if case.passed else 'FAIL'} |"
        )
    report_errors(cases, rate)
    for case in cases:
        for problem in case.problems:
            print(f"{case.name}: {problem}")


def relative_error(estimate_s: float | None, actual_s: float | None) -> str:
    if estimate_s is None or not actual_s:
        return "–"
    return f"{(estimate_s - actual_s) / actual_s:+.0%}"


def report_errors(cases: list[Case], rate: float) -> None:
    """Per procedure kind: each estimate against what it estimates, the restart's own catch-up
    (its request → caught up; a drill's recovery, from the break, also counts the drill's stop
    and launch before the request), and the check task's time from its start to the recorded
    result."""
    measured = [case for case in cases if case.kind and case.expected_ok and case.catch_up_s]
    if not measured:
        return
    print(f"\nlive estimate error per procedure kind ({rate:g} ev/s, both duplicates running)")
    print(
        "| procedure | case | recovered in (s) | catch-up (s) | model (s) | error | rehearsal for the restart (s) "
        "| error | rehearsal as measured (s) | error | decision used | check task (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case in measured:
        e = case.estimates
        cells = [
            (e.get(k), relative_error(e.get(k), case.catch_up_s))
            for k in ("model_s", "rehearsal_s", "rehearsal_measured_s")
        ]
        print(
            f"| {case.kind} | {case.name} | {case.recover_s} | {case.catch_up_s} | "
            + " | ".join(f"{'–' if v is None else round(v, 1)} | {err}" for v, err in cells)
            + f" | {e.get('used') or 'model'} | {_check_cell(case)} |"
        )


if __name__ == "__main__":
    os.environ.setdefault("TIDEGATE_LEASE_TTL_S", "15")
    # two duplicates, Airflow and the checks share 2 cores: a batch every 5 s leaves them CPU to recover with
    os.environ.setdefault("TIDEGATE_TRIGGER_INTERVAL", "5s")
    sys.exit(results_page.run(main, __file__))
