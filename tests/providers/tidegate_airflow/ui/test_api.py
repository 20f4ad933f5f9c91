"""The Tidegate page's routes inside Airflow's real API app: registration, authentication,
and what each JSON route reads from the control database (without writing to it)."""

from __future__ import annotations

import threading

import pytest
from ui_airflow import REPO, load_dags, login
from ui_data import (
    BATCHES,
    DRILL_GAP,
    JOB,
    LOST_JOB,
    LOST_STORAGE,
    REFUSED_WHY,
    RESTARTED_BATCHES,
    build_control_db,
    build_restarted_job,
    expected_totals,
    restarted_counts,
    table_fingerprint,
)

JSON_ROUTES = [
    "/tidegate/api/jobs",
    f"/tidegate/api/jobs/{JOB}/metrics",
    "/tidegate/api/procedures",
    "/tidegate/api/checks",
    "/tidegate/api/operations",
    "/tidegate/api/watch",
]
BROWSER_ROUTES = ["/tidegate/", "/tidegate/docs/checks/1", "/tidegate/docs/checks/1/index.html"]


# -- registration ----------------------------------------------------------------------
def test_airflow_loads_the_plugin_with_its_app_and_a_top_level_nav_entry(client, auth):
    plugins = client.get("/api/v2/plugins", headers=auth).json()["plugins"]
    ours = [p for p in plugins if p["name"] == "tidegate_ui"]
    assert len(ours) == 1, plugins
    plugin = ours[0]
    assert plugin["fastapi_apps"] == [
        {"app": "fastapi.applications.FastAPI", "url_prefix": "/tidegate", "name": "Tidegate"}
    ]
    (view,) = plugin["external_views"]
    assert view["name"] == "Tidegate" and view["href"] == "/tidegate/" and view["destination"] == "nav"
    assert view["url_route"] == "tidegate" and view["nav_top_level"] is True
    # from the installed provider's entry point, not a plugins folder
    assert plugin["source"].startswith("tidegate-airflow==") and "tidegate_airflow.ui.plugin" in plugin["source"]
    errors = client.get("/api/v2/plugins/importErrors", headers=auth).json()["import_errors"]
    assert [e for e in errors if "tidegate" in e["source"]] == []


def test_the_nav_icon_is_served_without_a_login(client):
    res = client.get("/tidegate/icon.svg")
    assert res.status_code == 200 and res.headers["content-type"].startswith("image/svg+xml")


# -- authentication --------------------------------------------------------------------
@pytest.mark.parametrize("route", JSON_ROUTES)
def test_a_json_route_refuses_a_request_without_a_token(client, route):
    res = client.get(route)
    assert res.status_code == 401
    assert res.json()["detail"] == "Not authenticated"


@pytest.mark.parametrize("route", JSON_ROUTES)
def test_a_json_route_refuses_a_forged_token(client, route):
    res = client.get(route, headers={"Authorization": "Bearer not.a.jwt"})
    assert res.status_code == 403


@pytest.mark.parametrize("route", JSON_ROUTES)
def test_a_json_route_refuses_a_user_without_the_tidegate_permission(client, route):
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    roleless = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="nobody", role=None))
    res = client.get(route, headers={"Authorization": f"Bearer {roleless}"})
    assert res.status_code == 403
    assert "Tidegate" in res.json()["detail"]


@pytest.mark.parametrize("route", BROWSER_ROUTES)
def test_a_browser_without_a_login_is_sent_to_airflows_login_page(client, route):
    res = client.get(route, follow_redirects=False)
    assert res.status_code == 307
    assert res.headers["location"].startswith("/auth/login?next=")


@pytest.mark.parametrize("user", ["admin", "viewer"])
def test_a_viewer_may_read_as_well_as_an_admin(client, user):
    token = login(client, user)
    assert client.get("/tidegate/api/jobs", headers={"Authorization": f"Bearer {token}"}).status_code == 200


def test_the_login_cookie_the_ui_sets_is_accepted(client, token):
    res = client.get("/tidegate/api/jobs", cookies={"_token": token})
    assert res.status_code == 200


# -- the page --------------------------------------------------------------------------
def test_the_page_comes_with_the_dags_it_triggers_and_no_outside_resources(client, auth):
    res = client.get("/tidegate/", headers=auth)
    assert res.status_code == 200 and res.headers["content-type"].startswith("text/html")
    html = res.text
    assert "/*TIDEGATE_SETTINGS*/" not in html
    for dag_id in ("tidegate_restart", "tidegate_planned_stop", "tidegate_failover", "tidegate_drill"):
        assert f'"dag_id": "{dag_id}"' in html
    for param in (
        '"name": "mode"',
        '"name": "new_spec"',
        '"name": "allowed_delay_s"',
        '"name": "to_region"',
        '"name": "reason"',
        '"name": "kind"',
    ):
        assert param in html
    # works offline: nothing loaded from another host
    assert "http://" not in html.replace('"http://www.w3.org/2000/svg"', "") and "https://" not in html
    assert "dagRuns" in html  # triggers through Airflow's REST API


# -- jobs × regions ----------------------------------------------------------------------
def test_jobs_shows_both_regions_their_state_the_active_region_and_the_latest_figures(client, auth, control):
    data = client.get("/tidegate/api/jobs", headers=auth).json()
    assert data["regions"] == ["east", "west"]
    jobs = {j["job"]: j for j in data["jobs"]}
    assert sorted(jobs) == [JOB, LOST_JOB]
    fleet = jobs[JOB]
    assert fleet["active_region"] == "east" and fleet["latest_version"] == 2
    assert fleet["source_path"] == f"/jobs/{JOB}-v2.yaml"  # pre-fills the planned stop's new spec
    east, west = fleet["regions"]
    assert (east["region"], west["region"]) == ("east", "west")
    assert east["active"] is True and west["active"] is False
    for row, region in ((east, "east"), (west, "west")):
        assert row["state"] == "running" and row["version"] == 2 and row["desired"] == "running"
        assert row["run_id"] == control.runs[(JOB, region)]
        assert row["last_batch_id"] == BATCHES - 1
        assert row["last_batch_at"] == pytest.approx(control.now - 30)
        assert row["last_output_us"] == int((control.now - 120) * 1e6)
        assert row["last_output"].endswith("Z")
        totals = {k: row["counts"][k] for k in ("late", "early", "out_of_order")}
        assert totals == expected_totals()
        assert row["counts"]["input_events"] == sum(1000 + b for b in range(BATCHES))
        # processing-time lag as the controller reports it: grows with the time since the batch
        assert row["processing_lag_s"] >= 2.5 + 30 - 1
    assert east["start_mode"] == "last-stopped" and west["start_mode"] == "now"
    assert east["checkpoint"] == "reused" and west["checkpoint"] == "fresh"
    # the last batch (59): delay 95 + (59 % 12) × 1 s in east, × 4 s in west; rates from the driver
    assert east["watermark_delay_s"] == pytest.approx(106.0) and west["watermark_delay_s"] == pytest.approx(139.0)
    assert east["input_rate_eps"] == pytest.approx(40.0 + 9 * 2) and west["input_rate_eps"] == pytest.approx(
        40.0 + 9 * 3
    )


def test_a_run_whose_lease_lapsed_is_reported_lost_and_nothing_is_written(client, auth, control):
    before = table_fingerprint(control.path)
    data = client.get("/tidegate/api/jobs", headers=auth).json()
    hot = {j["job"]: j for j in data["jobs"]}[LOST_JOB]
    east, west = hot["regions"]
    assert east["state"] == "lost" and east["recorded_state"] == "running"
    assert "lease expired" in east["detail"]
    assert west["state"] == "never" and west["run_id"] is None
    # the page records nothing (recording a lost run is the controller's): the run is still "running"
    assert table_fingerprint(control.path) == before


def test_a_driver_on_this_host_whose_process_is_gone_is_lost_even_with_a_valid_lease(control):
    from tidegate_airflow.ui.read_only import read_only_engine
    from tidegate_airflow.ui.reads import ControlReader

    reader = ControlReader(
        read_only_engine(control.url), ["east", "west"], host="driver-host-east", driver_alive=lambda run: False
    )
    fleet = {j["job"]: j for j in reader.overview()["jobs"]}[JOB]
    east, west = fleet["regions"]
    assert east["state"] == "lost" and "process 4242" in east["detail"]
    assert west["state"] == "running"  # another host: the lease is the only evidence


def _east(reader, job: str) -> dict:
    (row,) = [r for j in reader.overview()["jobs"] if j["job"] == job for r in j["regions"] if r["region"] == "east"]
    return row


def _lineage_counts(batches) -> dict[str, int]:
    sums = {k: sum(restarted_counts(b)[k] for b in batches) for k in restarted_counts(0)}
    return {
        **sums,
        "late": sums["late_adjusted"] + sums["late_dropped"],
        "early": sums["early_dropped"],
        "out_of_order": sums["out_of_order_adjusted"] + sums["out_of_order_dropped"],
    }


def test_a_run_restarted_on_its_checkpoint_shows_the_lineages_output_watermark_and_totals_before_its_first_batch(
    tmp_path,
):
    # run 1 ── batches 0‥4 ── stopped │ run 2 (checkpoint reused) ── no batch yet
    from tidegate_airflow.ui.read_only import read_only_engine
    from tidegate_airflow.ui.reads import ControlReader

    job = build_restarted_job(tmp_path, now=1_767_225_600.0)
    reader = ControlReader(read_only_engine(job.url), ["east"], now=lambda: 1_767_225_600.0)
    row = _east(reader, "restarted")
    assert row["run_id"] == job.second_run and row["state"] == "running" and row["checkpoint"] == "reused"
    # what the checkpoint's lineage has done, not "—" and 0 · 0 · 0
    assert row["last_output_us"] == job.last_output_us and row["last_output"] == "2025-12-31T23:48:00Z"
    assert row["job_watermark_us"] == job.watermark_us and row["job_watermark"] == "2025-12-31T23:48:30Z"
    assert row["output_final_through_us"] == job.emitted_through_us
    assert row["counts"] == _lineage_counts(range(RESTARTED_BATCHES))
    assert row["last_batch_id"] == RESTARTED_BATCHES - 1 and row["last_batch_run_id"] == job.first_run
    assert row["run_counts"] == {}  # this run's own: nothing yet

    # run 2 re-runs batch 4 (its commit was lost with run 1) and processes batch 5: each batch counts once
    for b in (4, 5):
        job.db.record_batch(
            run_id=job.second_run,
            batch_id=b,
            job="restarted",
            region="east",
            processed_at=1_767_225_590.0 + b,
            job_watermark_us=job.watermark_us + b,
            **restarted_counts(b),
        )
    job.db.update_run(job.second_run, last_batch_id=5, job_watermark_us=job.watermark_us + 5)
    row = _east(reader, "restarted")
    assert row["counts"] == _lineage_counts(range(6))
    assert row["run_counts"]["input_events"] == 104 + 105
    assert row["job_watermark_us"] == job.watermark_us + 5 and row["last_batch_run_id"] == job.second_run


# -- metrics over time -------------------------------------------------------------------
def test_metrics_give_each_region_its_batches_in_time_order(client, auth, control):
    data = client.get(f"/tidegate/api/jobs/{JOB}/metrics", headers=auth).json()
    assert sorted(data["series"]) == ["east", "west"]
    for _region, points in data["series"].items():
        assert [p["batch_id"] for p in points] == list(range(BATCHES))
        assert [p["t"] for p in points] == sorted(p["t"] for p in points)
        assert sum(p["late"] for p in points) == expected_totals()["late"]
        assert sum(p["out_of_order"] for p in points) == expected_totals()["out_of_order"]
        assert sum(p["early"] for p in points) == expected_totals()["early"]
    east, west = data["series"]["east"], data["series"]["west"]
    assert east[5]["watermark_delay_s"] == pytest.approx(100.0) and west[5]["watermark_delay_s"] == pytest.approx(115.0)
    assert east[3]["input_rate_eps"] == pytest.approx(46.0)  # the driver's input_rate_eps
    # where the driver recorded no rate: the batch's events over the time since the run's previous batch
    assert west[7]["input_rate_eps"] == pytest.approx(1007 / 30)
    assert west[0]["input_rate_eps"] is None  # a run's first batch has no previous one


def test_a_join_jobs_metrics_give_its_kept_events_per_input_summed_over_its_partitions(tmp_path):
    # semantics §5: the metrics show each input; the engine counts them per log partition
    from tidegate_airflow.ui.read_only import read_only_engine
    from tidegate_airflow.ui.reads import ControlReader

    job = build_restarted_job(tmp_path, now=1_767_225_600.0)
    job.db.record_batch(
        run_id=job.second_run,
        batch_id=5,
        job="restarted",
        region="east",
        processed_at=1_767_225_595.0,
        partitions={
            "0": {"input": 8, "inputs": {"orders": 3, "payments": 4}},
            "1": {"input": 5, "inputs": {"orders": 0, "payments": 5}},
        },
        **restarted_counts(5),
    )
    reader = ControlReader(read_only_engine(job.url), ["east"], now=lambda: 1_767_225_600.0)
    points = reader.metrics("restarted")["series"]["east"]
    assert points[-1]["batch_id"] == 5 and points[-1]["inputs"] == {"orders": 3, "payments": 9}
    assert [p["inputs"] for p in points[:-1]] == [{}] * RESTARTED_BATCHES  # one input: nothing per input


def test_metrics_keep_to_the_window_and_the_limit(client, auth, control):
    import time

    def within(asked_at: float) -> int:  # batches every 30 s up to control.now: those in the last 10 minutes
        return sum(1 for k in range(1, BATCHES + 1) if control.now - k * 30 >= asked_at - 600)

    before = time.time()
    recent = client.get(f"/tidegate/api/jobs/{JOB}/metrics?minutes=10", headers=auth).json()
    after = time.time()
    assert within(after) <= len(recent["series"]["east"]) <= within(before)
    assert len(recent["series"]["east"]) < BATCHES
    everything = client.get(f"/tidegate/api/jobs/{JOB}/metrics?minutes=0", headers=auth).json()
    assert len(everything["series"]["west"]) == BATCHES
    last = client.get(f"/tidegate/api/jobs/{JOB}/metrics?minutes=0&limit=5", headers=auth).json()
    assert [p["batch_id"] for p in last["series"]["east"]] == list(range(BATCHES - 5, BATCHES))
    unknown = client.get("/tidegate/api/jobs/nope/metrics", headers=auth).json()
    assert unknown["series"] == {"east": [], "west": []}
    assert client.get(f"/tidegate/api/jobs/{JOB}/metrics?minutes=-1", headers=auth).status_code == 422


# -- procedures and checks ---------------------------------------------------------------------
def test_procedures_show_the_drill_with_estimate_actual_and_checks(client, auth, control):
    rows = client.get("/tidegate/api/procedures", headers=auth).json()["procedures"]
    # newest first
    assert [r["id"] for r in rows] == [
        control.planned_stop_id,
        control.drill_id,
        control.failed_drill_id,
        control.refused_drill_id,
    ]
    stop, drill = rows[:2]
    assert drill["kind"] == "drill:node-failure" and drill["region"] == "west" and drill["result"] == "passed"
    assert drill["estimate_s"] == 120.0 and drill["actual_s"] == 95.5 and drill["error_s"] == pytest.approx(-24.5)
    assert [c["name"] for c in drill["checks"]] == [
        "resumed from checkpoint",
        "gap reprocessed only",
        "completeness (GX)",
    ]
    assert all(c["passed"] for c in drill["checks"])
    assert drill["docs_url"] == f"docs/procedures/{control.drill_id}" and "data_docs" not in drill
    assert stop["kind"] == "planned-stop" and stop["result"] == "aborted" and stop["actual_s"] is None
    assert "exceeds the allowed delay" in stop["detail"] and stop["docs_url"] is None
    assert stop["outcome"] == {
        "why": "the estimate (300 s) exceeds the allowed delay (120 s)",
        "restored": None,
        "state_left": None,
    }
    assert drill["outcome"] is None  # passed: the estimate, the actual and the checks say it all
    assert drill["consumer_gap"] == DRILL_GAP and stop["consumer_gap"] is None  # an abort's record is its reason
    assert client.get("/tidegate/api/procedures?job=other", headers=auth).json()["procedures"] == []


def _procedure(client, auth, procedure_id: int) -> dict:
    (row,) = [
        r for r in client.get("/tidegate/api/procedures", headers=auth).json()["procedures"] if r["id"] == procedure_id
    ]
    return row


def test_a_failed_drill_shows_the_step_it_failed_at_what_was_restored_and_the_state_it_left(client, auth, control):
    drill = _procedure(client, auth, control.failed_drill_id)
    assert (drill["kind"], drill["region"], drill["result"]) == ("drill:region-loss", "east", "failed")
    assert drill["outcome"] == {
        "why": "the drill failed at its recover step (see that task's log)",
        "restored": [
            f"moved east's storage back from {LOST_STORAGE}",
            f"started {JOB} in east (run 7, reused checkpoint)",
        ],
        "state_left": {
            "consumers_read": "west",
            "regions": [
                {"region": "east", "state": "running", "run": 7, "caught_up": False, "storage": True},
                {"region": "west", "state": "running", "run": 2, "caught_up": True, "storage": True},
            ],
        },
    }
    assert drill["detail"]["broken"]["storage_moved_to"] == LOST_STORAGE  # the record itself, unchanged


def test_a_refused_drill_says_why_nothing_was_done(client, auth, control):
    drill = _procedure(client, auth, control.refused_drill_id)
    assert (drill["kind"], drill["region"], drill["result"]) == ("drill:region-loss", "west", "refused")
    assert drill["outcome"] == {"why": REFUSED_WHY, "restored": None, "state_left": None}
    assert "nothing was broken" in drill["outcome"]["why"]


def test_checks_show_the_gx_result_with_a_link_to_its_data_docs(client, auth, control):
    (check,) = client.get("/tidegate/api/checks", headers=auth).json()["checks"]
    assert check["id"] == control.check_id and check["success"] is True and check["target"] == "west"
    assert check["findings"] == {"duplicates": [], "mismatched": [], "missing": []}
    assert check["context"] == {"drill": control.drill_id, "kind": "node-failure"}
    assert check["span_from"].endswith("Z") and check["span_to_us"] - check["span_from_us"] == 400_000_000
    assert check["docs_url"] == f"docs/checks/{control.check_id}"


def test_operations_are_listed_newest_first(client, auth):
    (op,) = client.get("/tidegate/api/operations", headers=auth).json()["operations"]
    assert (op["action"], op["outcome"], op["detail"]) == ("failover", "refused", {"why": "west is behind"})


# -- the watch: is failover automatic? ----------------------------------------------------------
HEALTH_WATCH, DRILL = "tidegate_health_watch", "tidegate_drill"


def _watch(client, auth) -> dict[str, dict]:
    res = client.get("/tidegate/api/watch", headers=auth)
    assert res.status_code == 200, res.text
    return {w["dag_id"]: w for w in res.json()["watch"]}


def _pause(client, auth, dag_id: str, paused: bool) -> None:
    res = client.patch(f"/api/v2/dags/{dag_id}", headers=auth, json={"is_paused": paused})  # as Airflow's toggle
    assert res.status_code == 200, res.text


def test_the_watch_is_on_once_airflow_loads_the_real_dags_and_a_paused_one_says_to_unpause_it(
    client, auth, inprocess_airflow
):
    # Airflow has not parsed the DAG files yet ── parsed (the watch created unpaused, the drill
    # paused: it breaks a region on purpose) ── the watch paused, the drill unpaused ── back
    watch = _watch(client, auth)
    assert list(watch) == [HEALTH_WATCH, DRILL]
    for dag_id, w in watch.items():
        assert w["state"] == "not loaded" and w["last_run"] is None, w
        assert f"dags/{dag_id}.py" in w["hint"] and "import errors" in w["hint"]
    assert "failover is manual until it is loaded" in watch[HEALTH_WATCH]["hint"]

    home, env = inprocess_airflow
    load_dags(home, env, {f"{d}.py": (REPO / "dags" / f"{d}.py").read_text() for d in (HEALTH_WATCH, DRILL)})
    errors = client.get("/api/v2/importErrors", headers=auth).json()["import_errors"]
    assert errors == [], errors
    watch = _watch(client, auth)
    assert {d: w["state"] for d, w in watch.items()} == {HEALTH_WATCH: "on", DRILL: "paused"}
    health, drill = watch[HEALTH_WATCH], watch[DRILL]
    assert health["hint"] is None
    assert drill["hint"] == "unpause tidegate_drill in Airflow: no drill runs while it is paused"
    assert health["label"] == "Health watch" and drill["label"] == "Weekly drill"
    assert health["schedule"] and drill["schedule"]  # as Airflow describes the timetable
    assert health["next_run_at"] is not None and health["last_run"] is None  # no scheduler runs here

    _pause(client, auth, HEALTH_WATCH, True)
    _pause(client, auth, DRILL, False)
    try:
        watch = _watch(client, auth)
        assert watch[HEALTH_WATCH]["state"] == "paused" and watch[DRILL]["state"] == "on"
        assert (
            watch[HEALTH_WATCH]["hint"]
            == "unpause tidegate_health_watch in Airflow: failover is manual while it is paused"
        )
        assert watch[DRILL]["hint"] is None
    finally:
        _pause(client, auth, HEALTH_WATCH, False)
        _pause(client, auth, DRILL, True)
    assert {d: w["state"] for d, w in _watch(client, auth).items()} == {HEALTH_WATCH: "on", DRILL: "paused"}

    # a run of the watch (triggered here: no scheduler) is its last run
    res = client.post(f"/api/v2/dags/{HEALTH_WATCH}/dagRuns", headers=auth, json={"logical_date": None})
    assert res.status_code == 200, res.text
    last = _watch(client, auth)[HEALTH_WATCH]["last_run"]
    assert last["run_id"] == res.json()["dag_run_id"] and last["state"] == "queued" and last["at"] > 0


# -- Data Docs over HTTP ----------------------------------------------------------------------
def _docs_link(client, auth, kind: str, item_id: int) -> tuple[str, str]:
    """The page a logged-in user is sent to for a site, and its link segment."""
    res = client.get(f"/tidegate/docs/{kind}/{item_id}", headers=auth, follow_redirects=False)
    assert res.status_code == 302
    page = res.headers["location"]
    return page, page.split("/")[5]


def test_a_checks_data_docs_open_at_its_page_with_the_sites_files_beside_it(client, auth, control):
    page, link = _docs_link(client, auth, "checks", control.check_id)
    assert link.startswith("~")
    assert page == (
        f"/tidegate/docs/checks/{control.check_id}/{link}/"
        "validations/tidegate_completeness/20260101T000000Z/device_fleet-west.html"
    )
    # the sandboxed site sends no login cookie: the link is what lets it load its own files
    html = client.get(page)
    assert html.status_code == 200 and "Validation of device_fleet in west" in html.text
    # the page's relative links (../../../static/styles.css) resolve inside the served site
    css = client.get(f"/tidegate/docs/checks/{control.check_id}/{link}/static/styles.css")
    assert css.status_code == 200 and "font-family" in css.text
    assert client.get(f"/tidegate/docs/checks/{control.check_id}/static/styles.css", headers=auth).status_code == 200
    index = client.get(f"/tidegate/docs/procedures/{control.drill_id}/index.html", headers=auth)
    assert index.status_code == 200 and "Data Docs index" in index.text


def test_data_docs_are_served_sandboxed_and_the_page_frames_them_sandboxed(client, auth, control):
    # GX's pages run scripts (tables, charts) from CDNs: scripts yes, but in an opaque origin,
    # so nothing in them can use the operator's Airflow session or reach into the page
    page, link = _docs_link(client, auth, "checks", control.check_id)
    for path in (
        page,
        f"/tidegate/docs/checks/{control.check_id}/{link}/static/styles.css",
        f"/tidegate/docs/checks/{control.check_id}/index.html",
    ):
        res = client.get(path, headers=auth)
        assert res.status_code == 200, path
        policy = dict(p.strip().split(" ", 1) for p in res.headers["content-security-policy"].split(";"))
        assert policy["sandbox"] == "allow-scripts", path
        assert policy["default-src"] == "'none'" and policy["connect-src"] == "'none'"
        assert policy["frame-ancestors"] == "'self'" and policy["form-action"] == "'none'"
        assert "https://cdn.jsdelivr.net" in policy["script-src"] and "https://unpkg.com" in policy["style-src"]
        assert res.headers["x-content-type-options"] == "nosniff"
    page = client.get("/tidegate/", headers=auth).text
    assert '<iframe id="docs-frame" title="Data Docs" sandbox="allow-scripts"></iframe>' in page


@pytest.mark.parametrize(
    "path",
    ["..%2F..%2F..%2F..%2Fcontrol.db", "%2E%2E/%2E%2E/%2E%2E/%2E%2E/control.db", "%2Fetc%2Fpasswd", "missing.html"],
)
def test_data_docs_serve_nothing_outside_the_recorded_site(client, auth, control, path):
    res = client.get(f"/tidegate/docs/checks/{control.check_id}/{path}", headers=auth)
    assert res.status_code == 404


def test_a_data_docs_link_opens_its_own_site_only_and_a_forged_one_nothing(client, auth, control):
    _, link = _docs_link(client, auth, "checks", control.check_id)
    assert client.get(f"/tidegate/docs/checks/{control.check_id}/{link}/index.html").status_code == 200
    expires, signature = link[1:].split(".")
    for path in (
        f"procedures/{control.drill_id}/{link}/index.html",  # another site
        f"checks/{control.check_id}/~{int(expires) + 86_400}.{signature}/index.html",  # a later expiry
        f"checks/{control.check_id}/~{expires}.{'A' * len(signature)}/index.html",
        f"checks/{control.check_id}/~/index.html",
    ):
        res = client.get(f"/tidegate/docs/{path}")
        assert res.status_code == 403, path
        assert "open the Data Docs again from the Tidegate page" in res.json()["detail"]
    # a link reads the site's files, nothing beside them
    assert (
        client.get(f"/tidegate/docs/checks/{control.check_id}/{link}/..%2F..%2F..%2F..%2Fcontrol.db").status_code == 404
    )


def test_a_data_docs_link_expires():
    from tidegate_airflow.ui.datadocs import link_opens, sign_link

    link = sign_link(b"secret", "checks", 7, expires=1_000)
    assert link_opens(b"secret", "checks", 7, link, now=999.9)
    assert not link_opens(b"secret", "checks", 7, link, now=1_000)
    assert not link_opens(b"another secret", "checks", 7, link, now=999)


def test_data_docs_of_an_unknown_check_or_of_a_procedure_without_docs_are_not_found(client, auth, control):
    assert client.get("/tidegate/docs/checks/999", headers=auth).status_code == 404
    assert client.get(f"/tidegate/docs/procedures/{control.planned_stop_id}", headers=auth).status_code == 404
    assert client.get("/tidegate/docs/runs/1", headers=auth).status_code == 404


# -- failure modes ------------------------------------------------------------------------------
def test_before_the_first_deploy_every_route_answers_empty_and_says_how_to_deploy(client, auth, tmp_path, monkeypatch):
    missing = tmp_path / "nowhere" / "control.db"  # a first start: nothing has created it yet
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", f"sqlite:///{missing}")
    res = client.get("/tidegate/api/jobs", headers=auth)
    assert res.status_code == 200
    data = res.json()
    assert data["jobs"] == [] and data["regions"] == ["east", "west"]
    setup = data["setup"]
    assert str(missing) in setup["reason"] and "does not exist yet" in setup["reason"]
    assert setup["deploy_dag"] == "tidegate_deploy"
    assert setup["deploy_command"] == "tidegate job deploy jobs/device_fleet.yaml"
    assert "tidegate_deploy" in setup["message"] and "tidegate job start" in setup["message"]
    for route, key in (("procedures", "procedures"), ("checks", "checks"), ("operations", "operations")):
        assert client.get(f"/tidegate/api/{route}", headers=auth).json() == {key: []}
    assert client.get(f"/tidegate/api/jobs/{JOB}/metrics", headers=auth).json()["series"] == {"east": [], "west": []}
    assert not missing.exists() and not missing.parent.exists()  # the page created nothing


def test_a_database_without_tidegates_tables_is_the_same_empty_start(client, auth, tmp_path, monkeypatch):
    import sqlite3

    empty = tmp_path / "control.db"
    sqlite3.connect(empty).close()  # as a PostgreSQL database is before Tidegate's first use
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", f"sqlite:///{empty}")
    data = client.get("/tidegate/api/jobs", headers=auth).json()
    assert data["jobs"] == [] and "has no Tidegate tables yet" in data["setup"]["reason"]


def test_an_unreadable_control_database_is_still_a_503_that_says_what_to_check(client, auth, tmp_path, monkeypatch):
    broken = tmp_path / "control.db"
    broken.write_text("not a database")
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", f"sqlite:///{broken}")
    res = client.get("/tidegate/api/jobs", headers=auth)
    assert res.status_code == 503
    assert "cannot read the control database" in res.json()["detail"] and "TIDEGATE_UI_DB" in res.json()["detail"]


def test_times_beyond_the_year_9999_are_shown_not_a_500(client, auth, tmp_path, monkeypatch):
    from tidegate.control.db import ControlDB

    far = 2**62  # µs: the year 148 108
    db = ControlDB(f"sqlite:///{tmp_path / 'control.db'}")
    db.register_version("future", 1, "f" * 64, {"name": "future"}, "name: future\n", None)
    run = db.create_run(
        job="future",
        region="east",
        version=1,
        fingerprint="f" * 64,
        lineage="lin-f",
        kind="job",
        input="/event-log",
        start_mode="now",
        checkpoint="fresh",
        checkpoint_reason="first start",
        status="stopped",
        output_start_us=far,
    )
    db.update_run(run, last_output_us=far, job_watermark_us=2**63 - 1)
    db.record_check("future", "east", True, span=(far, 2**63 - 1))
    db.dispose()
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", f"sqlite:///{tmp_path / 'control.db'}")
    res = client.get("/tidegate/api/jobs", headers=auth)
    assert res.status_code == 200
    (east,) = [r for r in res.json()["jobs"][0]["regions"] if r["region"] == "east"]
    assert east["last_output"] == "+148108-07-06T14:00:27.387904Z" and east["last_output_us"] == far
    assert east["job_watermark"] == "+294247-01-10T04:00:54.775807Z"
    (check,) = client.get("/tidegate/api/checks", headers=auth).json()["checks"]
    assert check["span_to"] == "+294247-01-10T04:00:54.775807Z"


# -- the UI's database role: read-only in the database ---------------------------------------
def test_on_sqlite_the_ui_connection_is_opened_read_only_so_a_write_raises(control):
    from sqlalchemy import text

    from tidegate_airflow.ui.read_only import read_only_engine

    before = table_fingerprint(control.path)
    with pytest.raises(Exception, match="readonly database"):
        with read_only_engine(control.url).begin() as c:
            c.execute(text("UPDATE runs SET status = 'lost'"))
    assert table_fingerprint(control.path) == before


def test_concurrent_readers_share_the_read_only_engine_safely(control):
    # the API server answers the page's parallel requests on a thread pool
    from tidegate_airflow.ui.read_only import read_only_engine
    from tidegate_airflow.ui.reads import ControlReader

    reader = ControlReader(read_only_engine(control.url), ["east", "west"])
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(10):
                assert len(reader.overview()["jobs"]) == 2
                assert len(reader.metrics(JOB, limit=10)["series"]["east"]) == 10
        except BaseException as exc:  # noqa: BLE001 — collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_on_postgresql_the_reader_sees_the_same_and_cannot_write(postgres, tmp_path):
    from sqlalchemy import text

    from tidegate_airflow.ui.read_only import read_only_engine
    from tidegate_airflow.ui.reads import ControlReader

    url = postgres.create_database("tidegate_ui_read_only")
    fixture = build_control_db(tmp_path, url=url)
    engine = read_only_engine(url)
    reader = ControlReader(engine, ["east", "west"])
    jobs = {j["job"]: j for j in reader.overview()["jobs"]}
    assert jobs[JOB]["active_region"] == "east"
    assert [r["state"] for r in jobs[JOB]["regions"]] == ["running", "running"]
    assert [r["state"] for r in jobs[LOST_JOB]["regions"]] == ["lost", "never"]
    assert {k: jobs[JOB]["regions"][0]["counts"][k] for k in ("late", "early", "out_of_order")} == expected_totals()
    assert len(reader.metrics(JOB, limit=5)["series"]["west"]) == 5
    assert reader.procedures()[1]["id"] == fixture.drill_id
    with pytest.raises(Exception, match="read-only"):
        with engine.begin() as c:
            c.execute(text("UPDATE runs SET status = 'lost'"))


def test_on_postgresql_the_ui_role_reads_but_the_database_refuses_its_writes(
    client, auth, postgres, tmp_path, monkeypatch
):
    from sqlalchemy import text

    from tidegate_airflow.ui.read_only import read_only_engine
    from tidegate_airflow.ui.reads import ControlReader

    owner_url = postgres.create_database("tidegate_ui_role")
    ui_url = create_ui_role(postgres, "tidegate_ui_role")  # before Tidegate creates its tables
    build_control_db(tmp_path, url=owner_url)
    engine = read_only_engine(ui_url)
    assert [j["job"] for j in ControlReader(engine, ["east", "west"]).overview()["jobs"]] == [JOB, LOST_JOB]
    # the session's read-only default alone is lifted by asking: through the platform's role it is
    with read_only_engine(owner_url).begin() as c:
        c.execute(text("SET TRANSACTION READ WRITE"))
        c.execute(text("UPDATE runs SET status = status WHERE false"))
    # the UI's role is refused by the database itself, whatever its session asks for
    for statement in ("UPDATE runs SET status = 'lost'", "DELETE FROM leases", "CREATE TABLE mine (a int)"):
        with pytest.raises(Exception, match="permission denied"):
            with engine.begin() as c:
                c.execute(text("SET TRANSACTION READ WRITE"))
                c.execute(text(statement))
    # the page reads through TIDEGATE_UI_DB, not through the platform's own (writing) role
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", f"sqlite:///{tmp_path / 'not-this-one.db'}")
    monkeypatch.setenv("TIDEGATE_UI_DB", ui_url)
    jobs = client.get("/tidegate/api/jobs", headers=auth).json()["jobs"]
    assert [j["job"] for j in jobs] == [JOB, LOST_JOB]


def create_ui_role(postgres, database: str) -> str:
    """scripts/tidegate_ui_role.sql run by psql as the server's superuser; the UI's URL."""
    import os
    import subprocess

    from ui_airflow import REPO

    cmd = [
        str(postgres.bin / "psql"),
        "-v",
        "ON_ERROR_STOP=1",
        "--no-psqlrc",
        "-h",
        "127.0.0.1",
        "-p",
        str(postgres.port),
        "-U",
        postgres.user,
        "-d",
        database,
        "-v",
        "ui_role=tidegate_ui",
        "-v",
        f"owner={postgres.user}",
        "-v",
        "password_var=TIDEGATE_UI_DB_PASSWORD",
        "-f",
        str(REPO / "scripts" / "tidegate_ui_role.sql"),
    ]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    for _ in range(2):  # idempotent: a second run changes nothing and does not fail
        done = subprocess.run(
            cmd, env={**os.environ, "TIDEGATE_UI_DB_PASSWORD": "ui-pw"}, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr + done.stdout
    return f"postgresql+psycopg://tidegate_ui:ui-pw@127.0.0.1:{postgres.port}/{database}"
