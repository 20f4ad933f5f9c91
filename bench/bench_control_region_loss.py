"""Benchmark: the region that runs the platform is lost under live traffic, and nobody acts.

    .venv/bin/python bench/bench_control_region_loss.py [--by kill|drill] [--rate 20] [--every 20s]
        [--settle 30] [--json FILE] [--work DIR]

The whole topology of docs/guide/control-plane-in-two-regions.md on this machine: the
replicated control database (:class:`tidegate.control.ha.cluster.LocalCluster`: PostgreSQL
under Patroni in east and west, etcd in east, west and a witness), Airflow in both regions on
one metadata database in it (:class:`tidegate.control.ha.airflow_regions.AirflowRegions`, the
repository's DAGs), and the job deployed to both regions by ``tidegate_deploy`` through east's
REST API while live traffic of ``--rate`` events per second reaches the event log.

East holds the database's primary and the job's active duplicate. The health watch is paused
while the job is deployed and runs on its schedule from then on. After the consumer view has
run undisturbed for a while (``--settle`` seconds, its cadence measured), every process of
east is killed at once (SIGKILL): its PostgreSQL, Patroni and etcd member, its Airflow
(scheduler, triggerer, DAG processor, API server and the tasks they run), and the drivers of
east with their Spark. Then nothing is done by hand: the quorum of west and the witness
promotes west's PostgreSQL; west's Airflow, its database back, runs the health watch on its
schedule (``TIDEGATE_HEALTH_WATCH_EVERY`` = ``--every``); the watch finds east's duplicate
gone and triggers ``tidegate_failover``, which moves consumers to west and then restores
east's duplicate and checks both with Great Expectations. Once consumers read west, east
comes back as a region does after an outage: its PostgreSQL rejoins as the synchronous
standby and its Airflow starts again.

It reports the time from the kill to west's database being writable, to the health watch's
failover run, to consumers reading west and to the first new output consumers read there;
the consumer-visible gap (the longest time no new final output reached consumers, beside the
job's own cadence measured undisturbed before the kill, and the procedure record's figure);
and rows missing or doubled in the consumer view afterwards, key by key against the batch
path. Exit 1 unless consumers end on west with the failover run and both its checks passed,
both regions running and caught up, east's database a standby, and nothing missing, extra,
doubled or different.

``--by drill`` loses east through the platform's own ``control-region-loss`` drill instead
(``tidegate_drill`` triggered through east's API): the drill kills east's drivers, moves the
job's storage there aside and asks the harness's power switch
(:mod:`tidegate.control.ha.power`) to kill the rest of east; the same watch, quorum and
failover follow, and the drill itself brings east back and checks it. West's scheduler joins
only just before the kill, so the drill's break runs in east and dies with it: west's
scheduler must run it again and the drill go on from its record. ``tests/control/ha/test_region_loss.py``
runs this in CI.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the platform and Airflow harness the tests use

import drill_traffic  # noqa: E402
import results_page  # noqa: E402
from airflow_api import Api, wait_for  # noqa: E402
from airflow_support import airflow_env  # noqa: E402
from bench_drills import JOB, Case, ConsumerWatch, live_spec, settle  # noqa: E402
from platform_support import Platform  # noqa: E402
from scratch import scratch  # noqa: E402
from tidegate.control.ha.airflow_regions import COMPONENTS, QUICK, AirflowRegions  # noqa: E402
from tidegate.control.ha.cluster import LocalCluster  # noqa: E402
from tidegate.control.ha.power import PowerSwitch  # noqa: E402
from tidegate.processes import Recorded  # noqa: E402
from tidegate.runtime.jobs.controller import Controller  # noqa: E402
from tidegate.runtime.jobs.process import driver_here, lease_holder, supervisor_lease  # noqa: E402
from tidegate.runtime.procedures.faults import kill_group  # noqa: E402

LOST, KEPT = "east", "west"
WATCH = "tidegate_health_watch"
SETTLE_S = 30.0  # undisturbed running before the kill: the consumer view's own cadence
FAILOVER_TASKS = ("assess", "switch", "check_consumer_view", "restart_failed", "check_restored_region", "record")
STARTED = time.monotonic()


def say(text: str) -> None:
    """A progress line, with the seconds since the bench started: a log shows each phase's length."""
    print(f"[control-region-loss {time.monotonic() - STARTED:6.1f} s] {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--by", choices=("kill", "drill"), default="kill", help="who kills east: this bench, or the drill")
    ap.add_argument("--rate", type=float, default=20.0, help="live traffic, events per second")
    ap.add_argument("--every", default="20s", help="the health watch's interval (TIDEGATE_HEALTH_WATCH_EVERY)")
    ap.add_argument(
        "--settle",
        type=float,
        default=SETTLE_S,
        help=f"undisturbed running before east is lost, the consumer view's cadence measured (s, default {SETTLE_S:g})",
    )
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--work", type=Path, help="keep the platform's folders here")
    args = results_page.parse_args(ap, argv)
    with scratch(args.work, "control-region-loss") as work:
        work.chmod(0o755)  # the postgres user enters the cluster's folder under it
        traffic = drill_traffic.start("event_log", work, args.rate)
        cluster = LocalCluster(work / "cluster")
        airflows = None
        platform = None
        power = None
        try:
            say("starting the replicated control database: east, west and the witness")
            cluster.start()
            root = work / "platform"
            root.mkdir()
            # drivers' leases outlast a promotion (Patroni's ttl and the standby's recovery), as the guide says
            lease = {"TIDEGATE_LEASE_TTL_S": str(cluster.timings.ttl_s + 15)}
            platform = Platform(root, traffic.event_log, control_url=cluster.url(), env=traffic.platform_env() | lease)
            platform.traffic = traffic
            faults = {}
            if args.by == "drill":
                power_folder = work / "power"
                faults = {"TIDEGATE_CONTROL_FAULTS": json.dumps(power_commands(power_folder))}
            airflows = start_airflows(cluster, platform, work / "airflow", args.every, faults, args.by == "drill")
            if args.by == "drill":
                power = Power(power_folder, cluster, airflows)
            case, figures = run(platform, airflows, cluster, args, power)
        finally:
            if power is not None:
                power.stop()
            if airflows is not None:
                airflows.stop(graceful=False)  # its folder goes next: no clean shutdown needed
            if platform is not None:
                platform.stop_everything()
            traffic.stop()
            cluster.stop()
            say("stopped")
    report(case, figures, args)
    if args.json:
        args.json.write_text(json.dumps(asdict(case) | {"passed": case.passed, "figures": figures}, indent=2))
    return 0 if case.passed else 1


def start_airflows(
    cluster: LocalCluster, p: Platform, folder: Path, every: str, faults: dict[str, str], late_scheduler: bool
) -> AirflowRegions:
    """Airflow in both regions with the repository's DAGs, the platform's settings and the
    health watch's interval; east first (two DAG processors starting at once collide). With
    ``late_scheduler``, west's scheduler waits for :class:`Power`'s kill."""
    shared = {k: v for k, v in airflow_env(folder).items() if k not in ("AIRFLOW_HOME", "AIRFLOW__CORE__DAGS_FOLDER")}
    extra = (
        shared
        | p.env
        | faults
        | {"TIDEGATE_HEALTH_WATCH_EVERY": every, "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True"}
        # the DAG files do not change during the run: each DAG processor parses them when it
        # starts (again after each restart), not every 30 s beside the case on two cores
        | {"AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600"}
    )
    airflows = AirflowRegions(cluster, folder, REPO / "dags", timings=QUICK, extra_env=extra)
    say("Airflow's metadata database, then its scheduler, triggerer, DAG processor and API server per region")
    airflows.prepare()
    for region in (LOST, KEPT):
        late = ("scheduler",) if late_scheduler and region == KEPT else ()
        airflows.start(region, tuple(c for c in COMPONENTS if c not in late))
        airflows.wait_until_serving(region)
    return airflows


def power_commands(folder: Path) -> dict[str, list[str]]:
    """``TIDEGATE_CONTROL_FAULTS`` for this harness: its power switch's commands."""
    command = [sys.executable, "-m", "tidegate.control.ha.power"]
    return {a: [*command, a, "{region}", "--folder", str(folder)] for a in ("kill", "restore")}


class Power:
    """The harness's power switch: a kill first starts west's scheduler (so that everything
    before it ran in east) and waits for its heartbeat, then kills every process of the
    region's Airflow and database site; a restore starts them again."""

    def __init__(self, folder: Path, cluster: LocalCluster, airflows: AirflowRegions) -> None:
        self.cluster, self.airflows = cluster, airflows
        self.switch = PowerSwitch(folder, kill=self.kill, restore=self.restore)
        self.switch.start()

    def kill(self, region: str) -> None:
        partner = KEPT if region == LOST else LOST
        self.airflows.start(partner)
        wait_for(lambda: self.airflows.schedulers_running() >= 2, 120, f"{partner}'s scheduler heartbeating")
        self.airflows.kill_region(region)
        say(f"the drill's fault command killed {region}'s Airflow and database site")

    def restore(self, region: str) -> None:
        self.cluster.start_site(region)
        self.airflows.start(region)
        say(f"the drill's restore command started {region}'s database site and Airflow again")

    def killed_at(self) -> float | None:
        """When the kill was carried out (time.time()), once it was."""
        return next((at for _, action, at in self.switch.events if action == "kill"), None)

    def stop(self) -> None:
        self.switch.stop()


def run(p: Platform, airflows: AirflowRegions, cluster: LocalCluster, args, power: Power | None) -> tuple[Case, dict]:
    c = p.controller
    east, west = Api(airflows.api_url(LOST)), Api(airflows.api_url(KEPT))
    wait_for(lambda: east._try(lambda: east.call("GET", "/dags/tidegate_deploy")), 180, "the DAGs parsed")
    # the health watch waits while the platform is set up (its runs cost the deploy CPU) and
    # runs on its schedule from before the undisturbed stretch on, through the loss of east
    set_paused(east, WATCH, True)
    spec = live_spec(p)
    say(f"live traffic at {args.rate:g} ev/s; tidegate_deploy through {LOST}'s API")
    deploy = east.trigger("tidegate_deploy", conf={"spec": str(spec), "mode": "now"})
    finished(east, "tidegate_deploy", deploy, 900)
    active = c.db.active_region(JOB).region
    if active != LOST:  # both regions start at once; the first to start takes consumers
        say(f"the deploy left consumers on {active} (it started first); moving them to {LOST}")
        wait_for(lambda: not c.switch_problems(JOB, LOST), 300, f"{LOST} caught up with {active}")
        c.switch_active(JOB, LOST, "the case loses the region consumers read")
    primary = cluster.wait_for_primary(timeout_s=120)
    if primary != LOST:  # a loaded machine can cost the leader its lock; the case needs it in east
        say(f"the database's primary moved to {primary} during the deploy; switching it back to {LOST}")
        cluster.switchover(LOST, timeout_s=180)
    set_paused(east, WATCH, False)
    say(f"{WATCH} on its schedule (every {args.every})")
    t_us = max(c.db.lineages(JOB, r)[0].output_from_us for r in (LOST, KEPT))
    watch = ConsumerWatch(Controller(p.config, actor="bench-watch"))
    watch.start()
    settled = time.monotonic()
    time.sleep(args.settle)
    cadence = watch.longest_gap(settled, time.monotonic())
    say(f"undisturbed, the consumer view went at most {cadence} s without new output")

    log_before = p.traffic.appended()
    drill_run = None
    if power is None:
        doomed = region_processes(c, LOST)
        killed, killed_wall = time.monotonic(), time.time()
        for process in doomed:  # the drivers with their Spark, and the region's supervisor
            kill_group(process, wait_s=0)
        airflows.kill_region(LOST)  # its Airflow, its tasks, its PostgreSQL, Patroni and etcd member
        say(f"killed every process of {LOST}: Airflow, PostgreSQL, Patroni, etcd, {len(doomed)} driver group(s)")
    else:
        conf = {"job": JOB, "kind": "control-region-loss", "region": "primary", "timeout_s": 1200}
        # the drill's DAG is created paused (its weekly schedule breaks things on purpose)
        set_paused(east, "tidegate_drill", False)
        drill_run = east.trigger("tidegate_drill", conf=conf)
        say(f"{drill_run}: tidegate_drill control-region-loss through {LOST}'s API")
        killed_wall = wait_for(power.killed_at, 900, f"the drill's kill of {LOST}")
        killed = time.monotonic() - (time.time() - killed_wall)
        say(f"the drill took {LOST} down: its drivers and storage, then its Airflow and database site")

    promoted = Promotion(cluster)
    promoted.start()
    failover = wait_for(lambda: health_watch_failover(west), 600, "a failover run from the health watch")
    failover_s = time.monotonic() - killed
    say(f"the health watch triggered {failover['dag_run_id']} after {failover_s:.1f} s")
    switched = wait_for(lambda: first_sample(watch, killed, lambda s: s[1] == KEPT), 600, "consumers on west")
    say(f"consumers read {KEPT} {switched[0] - killed:.1f} s after the kill")
    fresh = wait_for(
        lambda: first_sample(watch, switched[0], lambda s: s[1] == KEPT and s[2] is not None and s[2] > switched[2]),
        300,
        "new output on west",
    )
    # every figure from the kill is in: the batch path's Spark starts while east comes back
    spark = SparkStart()

    drill: dict = {}
    if drill_run is None:
        say(f"{LOST} comes back: its PostgreSQL as the standby, then its Airflow")
        cluster.start_site(LOST)
        cluster.wait_for_sync_standby(LOST, 180)
    else:
        drill = drill_outcome(west, c, drill_run, killed_wall)
        say(f"the drill {drill['state']}: {drill.get('recovered')}")
    rejoined_as = cluster.status(LOST)
    airflows.start(LOST)
    airflows.wait_until_serving(LOST)

    run_id = failover["dag_run_id"]
    state = final_state(west, "tidegate_failover", run_id, 1500)
    tasks = west.task_instances("tidegate_failover", run_id)
    case = Case(
        "control-region-loss / active",
        state == "success",
        True,
        round(time.monotonic() - killed, 1),
        kind="failover",
        appended=p.traffic.appended() - log_before,
    )
    say(f"the failover run {state}; both regions catching up, then the consumer view against the batch path")
    settle(p, spark.session(), watch, t_us, case, killed)
    watch.halt.set()
    case.view_behind = c.consumer_gap(JOB, killed_wall)
    case.regions["cadence_s"] = cadence
    problems = case.problems
    if state != "success":
        problems.append(f"the failover run {state}: {summary(tasks)}")
    for task in ("check_consumer_view", "check_restored_region"):  # Great Expectations, both views
        if (tasks.get(task) or {}).get("state") != "success":
            problems.append(f"{task} {(tasks.get(task) or {}).get('state')}")
    if case.consumers != KEPT:
        problems.append(f"consumers ended on {case.consumers}")
    if promoted.at is None:
        problems.append(f"{KEPT}'s PostgreSQL was never promoted")
    if cluster.primary() != KEPT or (rejoined_as or {}).get("role") not in ("replica", "sync_standby"):
        problems.append(f"after the return: primary {cluster.primary()}, {LOST} {rejoined_as}")
    if case.appended is not None and case.appended <= 0:
        problems.append("no event reached the log after the kill: the traffic was not live")
    if drill_run is not None:
        if drill["state"] != "success" or drill["result"] != "passed":
            problems.append(f"the drill {drill['state']}, recorded {drill['result']}: {drill['tasks']}")
        if not drill["taken_over"]:
            problems.append("the drill's break did not die with east, so no takeover was proven")
    figures = {
        "promoted_s": None if promoted.at is None else round(promoted.at - killed, 1),
        "failover_triggered_s": round(failover_s, 1),
        "consumers_moved_s": round(switched[0] - killed, 1),
        "first_new_output_s": round(fresh[0] - killed, 1),
        "cadence_s": cadence,
        "ttl_s": cluster.timings.ttl_s,
        "airflow_restarts": [(r, comp, code, round(t - killed_wall, 1)) for r, comp, code, t in airflows.restarts],
        "failover_tasks": summary(tasks),
    }
    if drill_run is not None:
        figures["drill"] = drill
    return case, figures


def drill_outcome(api: Api, c: Controller, run_id: str, killed_wall: float) -> dict:
    """How the drill ended, through the surviving region's API and the drill's record: its
    state, how often its break ran (2: the first died with east), the estimate against the
    recovery, and the recovery's own figures."""
    state = final_state(api, "tidegate_drill", run_id, 1800)
    tasks = api.task_instances("tidegate_drill", run_id)
    record = c.db.procedures(JOB, kind_prefix="drill:control-region-loss", limit=1)
    detail = json.loads(record[0].detail or "{}") if record else {}
    broken = detail.get("broken") or {}
    recovered = detail.get("recovered") or {}
    return {
        "state": state,
        "result": record[0].result if record else None,
        "tasks": {t: ti.get("state") for t, ti in tasks.items()},
        "break_tries": int((tasks.get("break") or {}).get("try_number") or 0),
        "taken_over": "taken_over_at" in broken,  # the break's second run went on from the record
        "estimate_s": record[0].estimate_s if record else None,
        "actual_s": record[0].actual_s if record else None,
        "drivers_killed_before_s": None if not broken else round(killed_wall - broken["at"], 1),
        "recovered": {k: v for k, v in recovered.items() if k.endswith("_s") or k == "restarted_by"},
        # each term of the estimate beside the measured one: where an error came from
        "terms": {
            k: [v, (detail.get("actual_terms") or {}).get(k)]
            for k, v in ((detail.get("estimate_basis") or {}).get("terms") or {}).items()
        },
    }


def final_state(api: Api, dag_id: str, run_id: str, timeout_s: float) -> str:
    """How the run ended, asked every second (no figure is timed by it)."""
    return wait_for(
        lambda: (s := api.run_state(dag_id, run_id)) in ("success", "failed") and s, timeout_s, run_id, every_s=1.0
    )


def set_paused(api: Api, dag_id: str, paused: bool) -> None:
    """Pause or unpause ``dag_id`` through the API, retried until its DAG is parsed and the API answers."""
    body = {"is_paused": paused}
    wait_for(
        lambda: api._try(lambda: api.call("PATCH", f"/dags/{dag_id}", body)),
        120,
        f"{dag_id} {'paused' if paused else 'unpaused'}",
    )


def finished(api: Api, dag_id: str, run_id: str, timeout_s: float) -> None:
    state = final_state(api, dag_id, run_id, timeout_s)
    if state != "success":
        raise SystemExit(f"{dag_id} {run_id} {state}: {summary(api.task_instances(dag_id, run_id))}")


def region_processes(c: Controller, region: str) -> list[Recorded]:
    """The region's live drivers and its supervisor, read before the kill (the database goes
    with the region)."""
    found = [d for run in c.db.runs(kind=None) if run.region == region and (d := driver_here(run)) is not None]
    lease = c.db.lease(supervisor_lease(region))
    if lease is not None and (holder := lease_holder(lease)) is not None and holder.alive():
        found.append(holder)
    return found


def health_watch_failover(api: Api) -> dict | None:
    """The failover run the health watch asked for (its conf names it), once it exists."""
    for found in api.runs("tidegate_failover"):
        conf = found.get("conf") or {}
        if conf.get("reason") == "health watch" and conf.get("from_region") == LOST:
            return found
    return None


def first_sample(watch: ConsumerWatch, after: float, matches) -> tuple | None:
    return next((s for s in list(watch.samples) if s[0] > after and matches(s)), None)


class Promotion(threading.Thread):
    """When the survivor's PostgreSQL became the primary (monotonic), polled every 0.2 s."""

    def __init__(self, cluster: LocalCluster) -> None:
        super().__init__(daemon=True)
        self.cluster, self.at = cluster, None

    def run(self) -> None:
        deadline = time.monotonic() + 300
        while self.at is None and time.monotonic() < deadline:
            if self.cluster.primary() == KEPT:
                self.at = time.monotonic()
            time.sleep(0.2)


class SparkStart(threading.Thread):
    """The Spark session of the batch-path comparison, started in the background while this
    process only waits (east's return, the drill's end): its JVM's start is not on the path."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self._session = None
        self._error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            from tidegate.spark.session import build_session

            self._session = build_session("tidegate-bench-control-region-loss", master="local[1]")
        except BaseException as exc:  # raised where the session is asked for
            self._error = exc

    def session(self):
        self.join()
        if self._error is not None:
            raise self._error
        return self._session


def summary(tasks: dict[str, dict]) -> dict[str, str]:
    return {task: (tasks.get(task) or {}).get("state") or "-" for task in FAILOVER_TASKS}


def report(case: Case, figures: dict, args) -> None:
    print(
        f"live traffic {args.rate:g} ev/s into the embedded log; health watch every {args.every}; "
        f"Patroni ttl {figures['ttl_s']} s; east held the database's primary and the active duplicate"
    )
    print("| from the kill of east to … | s |")
    print("|---|---|")
    for label, key in (
        ("west's database writable (promoted)", "promoted_s"),
        ("the health watch's failover run", "failover_triggered_s"),
        ("consumers reading west", "consumers_moved_s"),
        ("the first new output consumers read on west", "first_new_output_s"),
    ):
        print(f"| {label} | {figures[key]} |")
    behind = case.view_behind
    print(
        f"consumer-visible gap: {case.gap_s} s without new final output (undisturbed cadence "
        f"{figures['cadence_s']} s); the record's figure: at most {behind.get('max_delay_s')} s behind, "
        f"{behind.get('beyond_allowed_s')} s beyond the allowed delay"
    )
    score = case.score
    print(
        f"consumer view vs batch path: {score.get('rows')} rows, missing {score.get('missing')}, extra "
        f"{score.get('extra')}, doubled {score.get('duplicated')}, different {score.get('differing')}"
    )
    print(f"failover run: {'success' if case.dag_ok else 'FAILED'}; tasks {figures['failover_tasks']}")
    print(f"Airflow components restarted after the promotion: {figures['airflow_restarts']}")
    if "drill" in figures:
        print(f"the control-region-loss drill: {figures['drill']}")
    print(f"result: {'passed' if case.passed else 'FAILED'}")
    for problem in case.problems:
        print(f"  problem: {problem[:600]}")


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
