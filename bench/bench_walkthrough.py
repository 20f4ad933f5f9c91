"""Benchmark: the live planned-stop walk-through, as an operator runs it.

    .venv/bin/python bench/bench_walkthrough.py [--rate 100] [--settle 240] [--port 8093] [--work DIR]
        [--job device_fleet|device_over_limit|device_hour_peaks] [--kinds KIND …] [--shuffle SEED]

A fresh platform in a scratch directory: an event log the realtime generator feeds
``--rate`` events per second the whole time, and ``scripts/airflow.sh standalone`` — a
real scheduler, DAG processor and API server on SQLite. Then, over Airflow's REST API as
an operator's script would: ``tidegate_deploy`` of the demo job to the pair (``--job
device_over_limit``: the per-event reference join instead; ``--job device_hour_peaks``: ten-
second and one-minute windows joined in a later step, beside a later step's reference join of
the ten-second rows as a named output), ``--settle`` seconds of live
running, and ``tidegate_planned_stop`` of the pair to a changed query (``min_temperature``
added; ``temp_f`` for the reference join, ``peak_f`` for the join of steps) with a
rehearsal, both duplicates running throughout; then,
unless ``--kinds planned-stop``, every other kind of procedure one after another: the
``tidegate_drill`` of each kind (``node-failure``, ``upgrade``, ``region-loss``, against the
standby, then ``region-loss`` against the active region, whose consumers fail over) and a
``tidegate_failover`` of the active region on request. ``--shuffle SEED`` runs the same
procedures, the planned stop among them, in an order drawn from ``SEED`` (printed first), so
that no kind's estimate profits from the kinds that happened to run before it.

Prints each DAG run's tasks, then per turn of the planned stop: the restart, the measured
catch-up beside the model's and the rehearsal's estimates (as measured and as corrected for
the restart's resources) with each one's error (bar ≤ 25 %), which one the decision used,
and each completeness check's task time (bar ≤ 60 s) and result; and each restart's
start-up and first batch. Then one line per procedure of every kind: its estimate against
what it measured and the error, each term of the estimate beside the measured one (where the
error came from), and how far the consumer view fell behind the live stream (at most, and for
how long beyond the allowed delay); and a line saying which kinds' first estimate came within
25 % of what it measured (bar: every kind). Exits 1 unless every DAG run succeeds and every check
passes. Not a test: numbers depend on the machine and what else it runs.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the platform harness the tests use

import results_page  # noqa: E402
from platform_support import Platform  # noqa: E402
from scratch import scratch  # noqa: E402
from tidegate.inputs.event_log import EventLog  # noqa: E402
from tidegate.processes import Recorded  # noqa: E402
from tidegate.runtime.procedures.faults import kill_group  # noqa: E402

JOBS = ("device_fleet", "device_over_limit", "device_hour_peaks")
DEVICES = 20  # the demo's windowed job; a per-event reference join; a join of two steps and a step's reference join


def say(text: str) -> None:
    print(f"[walkthrough] {time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


class Api:
    """Airflow's REST API with the standalone's generated admin password."""

    def __init__(self, base: str, airflow_home: Path) -> None:
        self.base, self.home, self.token = base, airflow_home, None

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            self.base + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                **({"Authorization": f"Bearer {self.token}"} if self.token else {}),
            },
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            return json.loads(reply.read() or b"{}")

    def login(self, timeout_s: float = 600) -> None:
        deadline, last = time.monotonic() + timeout_s, None
        while time.monotonic() < deadline:
            try:
                passwords = json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())
                user, password = next(iter(passwords.items()))
                self.token = None
                self.token = self.call("POST", "/auth/token", {"username": user, "password": password})["access_token"]
                return
            except Exception as exc:  # not up yet
                last = exc
                time.sleep(5)
        raise SystemExit(f"Airflow's API did not come up in {timeout_s:.0f} s: {last}")

    def trigger(self, dag: str, conf: dict, attempts: int = 6) -> str:
        """A new run of ``dag``, named here so that a request that failed on the server's side
        (a 500, seen as the scheduler started the scheduled DAGs on Airflow's SQLite database
        beside it) is sent again without starting the run twice: a second request for a run that was
        made after all is refused as a conflict (409)."""
        run_id = f"walkthrough__{dag}__{time.strftime('%Y%m%dT%H%M%S')}"
        body = {"dag_run_id": run_id, "logical_date": None, "conf": conf}
        tried = 0
        while True:
            try:
                return self.call("POST", f"/api/v2/dags/{dag}/dagRuns", body)["dag_run_id"]
            except urllib.error.HTTPError as exc:
                tried += 1
                if exc.code == 409 and tried > 1:
                    return run_id
                if exc.code < 500 or tried == attempts:
                    raise
                say(f"triggering {dag}: HTTP {exc.code}, again in 5 s")
                time.sleep(5)

    def run_dag(self, dag: str, conf: dict, timeout_s: float = 3600) -> tuple[str, list[dict]]:
        deadline = time.monotonic() + 300
        while True:  # unpause once the DAG processor has parsed it
            try:
                self.call("PATCH", f"/api/v2/dags/{dag}", {"is_paused": False})
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(5)
        run_id = self.trigger(dag, conf)
        say(f"triggered {dag} {run_id}")
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            self.login(60)  # a token lives shorter than a planned stop
            state = self.call("GET", f"/api/v2/dags/{dag}/dagRuns/{run_id}")["state"]
            if state in ("success", "failed"):
                tasks = self.call("GET", f"/api/v2/dags/{dag}/dagRuns/{run_id}/taskInstances")["task_instances"]
                print(f"{dag}: {state} in {time.monotonic() - started:.0f} s")
                for ti in sorted(tasks, key=lambda t: t.get("start_date") or ""):
                    print(f"   {ti['task_id']:34s} {ti['state'] or '-':10s} {ti.get('duration') or 0:7.1f} s")
                return state, tasks
            time.sleep(10)
        raise SystemExit(f"{dag} did not finish in {timeout_s:.0f} s")


def error(estimate: float | None, actual: float | None) -> str:
    if estimate is None or not actual:
        return "–"
    return f"{(estimate - actual) / actual:+.0%}"


def recorded_since(db, job: str, since: float, kind: str | None = None) -> list[tuple]:
    """The job's procedures begun since ``since`` (of ``kind``), oldest first, each with its detail."""
    found = []
    for p in sorted(db.procedures(job), key=lambda p: p.id):
        if (p.started_at or 0) >= since and kind in (None, p.kind):
            found.append((p, json.loads(p.detail) if (p.detail or "").startswith("{") else {}))
    return found


def report(platform: Platform, job: str, since: float) -> list[str]:
    """Print each turn of the planned stop; the problems (a failed check, a turn not passed)."""
    db = platform.controller.db
    problems = []
    print(
        "\n| turn | result | restart | measured (s) | model (s) | rehearsal corrected (s) | rehearsal as measured (s)"
        " | used | checks (task s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for p, detail in recorded_since(db, job, since, "planned-stop"):
        e = detail.get("estimates") or {}
        checks = detail.get("checks") or []
        run = db.latest_run(job, p.region)
        first = db.batch_metrics(job, run_id=run.id, limit=1, first=True) if run is not None else []
        restart = f"{run.start_mode}, first batch {first[0].input_events:,} events" if first else "–"
        print(
            f"| {p.region} | {p.result} | {restart} | {p.actual_s or 0:.1f} "
            f"| {e.get('model_s') or 0:.1f} ({error(e.get('model_s'), p.actual_s)}) "
            f"| {e.get('rehearsal_s') or 0:.1f} ({error(e.get('rehearsal_s'), p.actual_s)}) "
            f"| {e.get('rehearsal_measured_s') or 0:.1f} ({error(e.get('rehearsal_measured_s'), p.actual_s)}) "
            f"| {e.get('used')} | "
            + ", ".join(f"{c['target']} {'passed' if c.get('success') else 'FAILED'} {c.get('task_s')}" for c in checks)
            + " |"
        )
        if p.result != "passed":
            problems.append(f"the {p.region} turn ended {p.result}")
        problems += [f"the {p.region} turn's {c['target']} check failed" for c in checks if not c.get("success")]
    report_rehearsals(db, job, since)
    print("\nstarts (request → first batch began; first batch events in seconds):")
    for run in sorted(db.runs(job, kind=None, limit=20), key=lambda r: r.id):
        first = db.batch_metrics(job, run_id=run.id, limit=2, first=True)
        if run.requested_at is None or not first or first[0].batch_seconds is None:
            continue
        began = first[0].processed_at - first[0].batch_seconds - run.requested_at
        batches = "; ".join(f"{m.input_events:,} in {m.batch_seconds:.1f} s" for m in first)
        caught = f"caught up {run.catch_up_s:.1f} s" if run.catch_up_s is not None else "not caught up"
        print(f"  run {run.id} {run.kind} {run.region} {run.start_mode}: start-up {began:.1f} s, {batches}, {caught}")
    return problems


def report_rehearsals(db, job: str, since: float) -> None:
    """Per turn, how much faster the rehearsal's correction said the restart would run, and how
    much faster it did: its start-up, and its first batch per event; the partner duplicate's CPU
    and the share of each phase its batches ran, as the rehearsal recorded them."""
    print(
        "\n| turn | start-up: credited / gained | first batch per event: credited / gained "
        "| partner in start-up: CPU s, busy | partner in catch-up: CPU s, busy |"
    )
    print("|---|---|---|---|---|")
    for p, detail in recorded_since(db, job, since, "planned-stop"):
        restart = detail.get("run_id")
        rehearsal = next(
            (
                d
                for d in (
                    json.loads(r.details)
                    for r in db.estimates(job, p.region)
                    if r.kind == "rehearsal" and r.details and (r.created_at or 0) >= since
                )
                if restart is not None and (d.get("run_id") or 0) < restart
            ),
            None,
        )
        if rehearsal is None:
            continue
        ran, gained = (_startup_and_first(db, job, run_id) for run_id in (rehearsal["run_id"], restart))
        load = rehearsal.get("load") or {}
        print(
            f"| {p.region} | {rehearsal.get('startup_speedup', 1.0):.2f} / {_ratio(ran[0], gained[0])} "
            f"| {rehearsal.get('catch_up_speedup', 1.0):.2f} / {_ratio(ran[1], gained[1])} | "
            + " | ".join(_partner(load.get(phase)) for phase in ("startup", "catch_up"))
            + " |"
        )


def _startup_and_first(db, job: str, run_id: int) -> tuple[float | None, float | None]:
    """A run's start-up (request → first batch began) and its first batch's seconds per event."""
    run = db.run(run_id)
    first = db.batch_metrics(job, run_id=run_id, limit=1, first=True)
    if run is None or run.requested_at is None or not first or first[0].batch_seconds is None:
        return None, None
    began = first[0].processed_at - first[0].batch_seconds
    return began - run.requested_at, first[0].batch_seconds / first[0].input_events if first[0].input_events else None


def _ratio(before: float | None, after: float | None) -> str:
    return "–" if not before or not after else f"{before / after:.2f}"


def _partner(load: dict | None) -> str:
    if not load or load.get("partner_busy") is None:
        return "–"
    return f"{load.get('partner_cpu_s', 0.0):.1f}, {load['partner_busy']:.0%}"


KINDS = (
    "planned-stop",
    "drill:node-failure",
    "drill:upgrade",
    "drill:region-loss",
    "drill:region-loss/active",
    "failover",
)


def walk_order(kinds: list[str], seed: int | None) -> list[str]:
    """The procedures in the order they run: the planned stop first, then the others as given;
    with a ``seed``, every one of them in an order drawn from it."""
    if seed is None:
        return [k for k in KINDS if k == "planned-stop"] + [k for k in kinds if k != "planned-stop"]
    order = list(dict.fromkeys(["planned-stop", *kinds]))
    random.Random(seed).shuffle(order)
    return order


def planned_stop_conf(root: Path) -> dict:
    return {
        "new_spec": str(root / "v2.yaml"),
        "region": "pair",
        "allowed_delay_s": 1800,
        "rehearsal": True,
        "timeout_s": 1800,
    }


def run_procedures(api: Api, job: str, root: Path, order: list[str]) -> list[str]:
    """Run each procedure of ``order``, one after another; the problems."""
    problems = []
    for kind in order:
        if kind == "planned-stop":
            dag, conf = "tidegate_planned_stop", planned_stop_conf(root)
        elif kind == "failover":
            dag, conf = (
                "tidegate_failover",
                {"job": job, "from_region": "active", "only_if_unhealthy": False, "reason": "walk-through"},
            )
        else:
            drill, _, target = kind.removeprefix("drill:").partition("/")
            dag, conf = "tidegate_drill", {"job": job, "kind": drill, "region": target or "standby"}
        state, _ = api.run_dag(dag, conf)
        if state != "success":
            problems.append(f"the {kind} DAG run ended {state}")
    return problems


BAR = 0.25  # an estimate within this share of what the procedure measured


def report_kinds(platform: Platform, job: str, since: float) -> list[str]:
    """Every procedure since ``since``: estimate vs actual and its error, term by term, and the
    consumer-visible gap; then whether each kind's first estimate met :data:`BAR`. The problems
    (one not passed)."""
    db = platform.controller.db
    problems = []
    every: list[tuple[str, float | None, float | None]] = []
    print(
        "\n| procedure | region | result | estimate (s) | actual (s) | error | terms: estimate / measured (s) "
        "| consumer view behind, at most (s) | beyond the allowed (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for p, detail in recorded_since(db, job, since):
        basis = detail.get("estimate_basis") or (detail.get("estimates") or {}).get("model_basis") or {}
        measured = detail.get("actual_terms") or {}
        terms = ", ".join(f"{k[:-2]} {_s(v)} / {_s(measured.get(k))}" for k, v in (basis.get("terms") or {}).items())
        gap = detail.get("consumer_gap") or {}
        print(
            f"| {p.kind} | {p.region} | {p.result} | {_s(p.estimate_s)} | {_s(p.actual_s)} "
            f"| {error(p.estimate_s, p.actual_s)} | {terms or '–'} | {_s(gap.get('max_delay_s'))} "
            f"| {_s(gap.get('beyond_allowed_s'))} |"
        )
        if p.result != "passed":
            problems.append(f"{p.kind} of {p.region} ended {p.result}")
        every.append((p.kind, p.estimate_s, p.actual_s))
    print("\n" + estimates_met(every))
    return problems


def estimates_met(every: list[tuple[str, float | None, float | None]]) -> str:
    """One line: how many estimates came within :data:`BAR` of what their procedure measured,
    of all and of each kind's first, with the first ones' errors (the bar is every kind's)."""

    def met(e: float | None, a: float | None) -> bool:
        return e is not None and bool(a) and abs(e - a) / a <= BAR

    every = [(kind, e, a) for kind, e, a in every if e is not None or a is not None]  # a deploy recovers nothing
    firsts: dict[str, tuple[float | None, float | None]] = {}
    for kind, e, a in every:
        firsts.setdefault(kind, (e, a))
    each = ", ".join(f"{kind} {error(e, a)}" for kind, (e, a) in firsts.items())
    return (
        f"estimates within {BAR:.0%}: {sum(met(e, a) for _, e, a in every)} of {len(every)}; "
        f"each kind's first: {sum(met(e, a) for e, a in firsts.values())} of {len(firsts)} ({each})"
    )


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def write_specs(example: str, root: Path, event_log: Path) -> str:
    """``v1.yaml`` and ``v2.yaml`` (a changed query) of the example job under ``root``, reading
    ``event_log``; the job's name. The reference join gets a device table of the generator's devices
    under the platform's reference folder, valid from before the first event."""
    from tidegate.inputs.event_log.traffic import device_names

    spec = yaml.safe_load((REPO / "jobs" / f"{example}.yaml").read_text())
    spec["source"] = {"event_log": str(event_log)}
    if example in ("device_over_limit", "device_hour_peaks"):
        table = root / "reference" / "devices"
        snapshot = table / "valid_from=2000-01-01T00:00:00Z"
        snapshot.mkdir(parents=True)
        rows = [f"{name},hall-{'ab'[i % 2]},{20 + i % 4}" for i, name in enumerate(device_names(DEVICES))]
        (snapshot / "devices.csv").write_text("deviceId,site,max_temperature\n" + "\n".join(rows) + "\n")
    if example == "device_over_limit":
        spec["reference"]["path"] = str(table)
    if example == "device_hour_peaks":
        spec["steps"] = _hour_peaks_steps(spec["steps"], table)
        spec["sinks"]["outputs"] = {"over": {"step": "over_limit"}}
    (root / "v1.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    spec["version"] = 2
    if example == "device_over_limit":
        spec["select"]["temp_f"] = "temperature * 9 / 5 + 32"
    elif example == "device_hour_peaks":
        spec["steps"][2]["select"]["peak_f"] = "hours.peak * 9 / 5 + 32"
    else:
        spec["aggregates"]["min_temperature"] = "min(temperature)"
    (root / "v2.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return spec["name"]


def _hour_peaks_steps(steps: list[dict], table: Path) -> list[dict]:
    """jobs/device_hour_peaks.yaml's steps in ten-second and one-minute windows (joined within
    50 seconds), and jobs/device_minutes_over_limit.yaml's reference join of the ten-second rows."""
    tens, hours, peaks = steps
    over = yaml.safe_load((REPO / "jobs" / "device_minutes_over_limit.yaml").read_text())["steps"][1]
    return [
        tens | {"window": {"kind": "tumbling", "size": "10s"}},
        hours | {"window": {"kind": "tumbling", "size": "1m"}},
        peaks | {"join": peaks["join"] | {"within": "DATEDIFF(second, tens, hours) BETWEEN 0 AND 50"}},
        over | {"from": "tens", "reference": over["reference"] | {"path": str(table)}},
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=100.0, help="live traffic, events per second")
    ap.add_argument("--settle", type=float, default=240.0, help="seconds of live running between deploy and stop")
    ap.add_argument("--port", type=int, default=8093, help="the API server's port")
    ap.add_argument("--work", type=Path)
    ap.add_argument(
        "--job",
        choices=JOBS,
        default=JOBS[0],
        help="the example job walked through: the demo's windowed job, a per-event reference join, or a join"
        " of two steps beside a step's reference join",
    )
    ap.add_argument(
        "--kinds",
        nargs="+",
        choices=KINDS,
        default=list(KINDS),
        help="the procedures to run after the deploy (the planned stop always runs, first unless --shuffle)",
    )
    ap.add_argument(
        "--shuffle",
        type=int,
        metavar="SEED",
        help="run the procedures, the planned stop among them, in an order drawn from SEED",
    )
    args = results_page.parse_args(ap, argv)
    with scratch(args.work, "walkthrough") as work:
        event_log = work / "event-log"
        EventLog.create(event_log, partitions=3, clock="wall")
        root = work / "platform"
        root.mkdir()
        platform = Platform(root, event_log)
        job = write_specs(args.job, root, event_log)
        airflow_home = work / "airflow"
        env = platform.cli_env() | {
            "AIRFLOW_HOME": str(airflow_home),
            "AIRFLOW__API__PORT": str(args.port),
            "AIRFLOW__API__BASE_URL": f"http://localhost:{args.port}",
            "TIDEGATE_CHECK_SERVICE": "15m",  # the product's default: warm from the first turn to the last
        }
        processes = []
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so everything below is stopped too
        try:
            for name, command in (
                (
                    "generator",
                    [
                        sys.executable,
                        "-m",
                        "tidegate.cli",
                        "event-log",
                        "generate",
                        str(event_log),
                        "--mode",
                        "realtime",
                        "--rate",
                        str(args.rate),
                        "--duration",
                        "3h",
                        "--devices",
                        str(DEVICES),
                        "--seed",
                        "3",
                    ],
                ),
                ("airflow", ["bash", str(REPO / "scripts" / "airflow.sh"), "standalone"]),
            ):
                with (work / f"{name}.log").open("wb") as log:
                    processes.append(
                        subprocess.Popen(
                            command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True
                        )
                    )
            api = Api(f"http://localhost:{args.port}", airflow_home)
            api.login()
            say("Airflow is up")
            since = time.time()
            deploy, _ = api.run_dag("tidegate_deploy", {"spec": str(root / "v1.yaml"), "mode": "now"})
            if deploy != "success":
                print(f"the deploy failed: see {work}/airflow/logs (keep them with --work)")
                return 1
            order = walk_order(args.kinds, args.shuffle)
            say(f"both duplicates run at {args.rate:g} ev/s; in {args.settle:.0f} s: {', '.join(order)}")
            time.sleep(args.settle)
            problems = run_procedures(api, job, root, order)
            problems = report(platform, job, since) + problems + report_kinds(platform, job, since)
        finally:
            for process in processes:
                kill_group(Recorded.of(process.pid))  # nothing when it ended on its own
            platform.stop_everything()
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
