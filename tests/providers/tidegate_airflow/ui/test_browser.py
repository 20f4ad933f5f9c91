"""End to end in a real headless Chromium: Airflow's API server with the installed provider's plugin,
a login through Airflow's own login page, the Tidegate page alone and inside Airflow's
navigation, a DAG triggered from it, the health watch shown on then paused, the drill
history's failed and refused drills, and screenshots under the test's tmp dir.

Needs Debian's ``chromium`` package and the ``playwright`` Python package (which drives the
installed browser: ``executable_path``, no browser download). Without them the test is
skipped on a developer machine and fails in CI (``CI`` set).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from ui_airflow import PASSWORDS, ApiServer, airflow_environment, load_dags
from ui_data import JOB, LOST_JOB, LOST_STORAGE, REFUSED_WHY, expected_totals

pytestmark = pytest.mark.slow

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 120_000  # a loaded machine: two cores shared with Spark test runs

# Two of the four Tidegate DAGs the page triggers exist in this Airflow, declared like the
# real ones (enums, defaults, a param named differently from the page's own default form):
# the page builds its form from their params, and disables the buttons of the two DAGs it
# cannot find. The health watch is there, created unpaused like the real one; the drill is not.
STUB_DAGS = {
    "tidegate_health_watch": """
from datetime import datetime, timedelta

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

with DAG("tidegate_health_watch", schedule=timedelta(minutes=5), start_date=datetime(2026, 1, 1), catchup=False,
         is_paused_upon_creation=False):
    EmptyOperator(task_id="unhealthy_regions")
""",
    "tidegate_restart": """
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param

with DAG("tidegate_restart", schedule=None, params={
    "job": Param("device-fleet-counts", type="string", title="Job name"),
    "region": Param("east", enum=["east", "west"], title="Region"),
    "mode": Param("last-stopped", enum=["last-stopped", "now", "custom"], title="Start mode"),
    "at": Param("", type="string", title="First output time (custom mode)"),
}):
    EmptyOperator(task_id="restart")
""",
    "tidegate_failover": """
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param

with DAG("tidegate_failover", schedule=None, params={
    "job": Param("device-fleet-counts", type="string", title="Job name"),
    "from_region": Param("active", enum=["active", "east", "west"], title="Region failing"),
    "reason": Param("operator request", type="string", title="Why (recorded)"),
    "max_delay_s": Param(300, type="number", minimum=0),
}):
    EmptyOperator(task_id="failover")
""",
}


def _chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    try:
        import playwright  # noqa: F401
    except ImportError:
        found = None
    if found is None:
        message = (
            "the browser test needs Debian's chromium (apt-get install -y chromium) "
            "and the playwright package (the test extra)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="module")
def server(tmp_path_factory, migrated_airflow_db, control):
    home = tmp_path_factory.mktemp("airflow_e2e")
    shutil.copy(migrated_airflow_db, home / "airflow.db")
    env = airflow_environment(home, control.url)
    load_dags(home, env, {f"{dag_id}_stub.py": source for dag_id, source in STUB_DAGS.items()})
    api = ApiServer(home, env)
    try:
        api.start(timeout_s=300)
        yield api
    finally:
        api.stop()


@pytest.fixture
def browser_page(tmp_path):
    chromium = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1500, "height": 1000},
            timeout=TIMEOUT_MS,
        )
        try:
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.set_default_navigation_timeout(TIMEOUT_MS)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.js_errors = errors
            yield page
        finally:
            context.close()  # ends the Chromium processes Playwright started


def _log_in(page, base: str, start: str) -> None:
    """Open ``start`` without a session: Airflow's login page, then back to ``start``."""
    page.goto(base + start)
    page.wait_for_url("**/auth/login**")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", PASSWORDS["admin"])
    page.keyboard.press("Enter")
    page.wait_for_url(base + start)


def _follow_nav_link(page, name: str, url: str, attempts: int = 3) -> None:
    """Click Airflow's nav link ``name`` until the app routes to ``url``: on a busy machine
    the link can render before the app has wired its click handler, and that click is lost."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(attempts):
        page.get_by_role("link", name=name).click()
        try:
            page.wait_for_url(url, timeout=45_000)
            return
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise


@pytest.fixture(scope="module")
def first_start(tmp_path_factory, migrated_airflow_db):
    """An Airflow whose Tidegate control database does not exist yet: nothing was deployed."""
    home = tmp_path_factory.mktemp("airflow_first_start")
    shutil.copy(migrated_airflow_db, home / "airflow.db")
    missing = home / "tidegate" / "control.db"
    api = ApiServer(home, airflow_environment(home, f"sqlite:///{missing}"))
    try:
        api.start(timeout_s=300)
        yield api, missing
    finally:
        api.stop()


def test_before_the_first_deploy_the_page_says_how_to_deploy_a_job(first_start, browser_page, tmp_path):
    (server, missing), page = first_start, browser_page
    _log_in(page, server.url, "/tidegate/")
    page.wait_for_function("document.getElementById('stamp').textContent.startsWith('updated')", timeout=60_000)
    assert page.locator("#error").inner_text() == ""  # no red banner
    empty = page.locator("#jobs-table [data-testid=no-jobs]").inner_text()
    assert str(missing) in empty and "does not exist yet" in empty
    assert "tidegate_deploy" in empty and "tidegate job deploy jobs/device_fleet.yaml" in empty
    assert "tidegate_deploy" in page.locator("[data-testid=setup]").inner_text()
    link = page.locator("[data-testid=setup] a").get_attribute("href")
    assert link == f"{server.url}/dags/tidegate_deploy"
    assert "loading…" not in page.locator("main").inner_text()  # every table says it is empty
    assert page.locator("#procedures-table").inner_text().endswith("No drills or planned stops recorded.")
    assert not missing.exists()
    page.screenshot(path=str(tmp_path / "tidegate-first-start.png"), full_page=True)
    assert page.js_errors == [], page.js_errors


def test_an_operator_logs_in_reads_the_jobs_and_triggers_a_restart(server, browser_page, control, tmp_path):
    page, base = browser_page, server.url

    # the page alone: its routes send a browser without a session to Airflow's login
    _log_in(page, base, "/tidegate/")
    page.wait_for_selector(f"#jobs-table tr[data-job={JOB}][data-region=west]")
    east = page.locator(f"#jobs-table tr[data-job={JOB}][data-region=east]")
    west = page.locator(f"#jobs-table tr[data-job={JOB}][data-region=west]")
    assert east.locator("[data-testid=state]").inner_text().startswith("running")
    assert west.locator("[data-testid=state]").inner_text().startswith("running")
    assert east.locator("[data-testid=consumers]").inner_text() == "active"
    assert west.locator("[data-testid=consumers]").inner_text() == "standby"
    assert (
        "consumers read east"
        in page.locator(f"#jobs-table tr[data-job={JOB}] [data-testid=active-region]").inner_text()
    )
    lost = page.locator(f"#jobs-table tr[data-job={LOST_JOB}][data-region=east] [data-testid=state]").inner_text()
    assert lost.startswith("lost") and "lease expired" in lost
    assert "1 min 46 s" in east.inner_text()  # watermark delay of the last batch (106 s)
    assert "batch 59" in east.inner_text()
    totals = expected_totals()
    assert (
        east.locator("[data-testid=counts]").inner_text()
        == f"{totals['late']} · {totals['early']} · {totals['out_of_order']}"
    )

    drill = page.locator(f"#procedures-table tr[data-procedure='{control.drill_id}']")
    assert "drill:node-failure" in drill.inner_text()
    assert drill.locator("[data-testid=procedure-result]").inner_text() == "passed"
    assert "estimate 2 min 00 s · actual 1 min 36 s" in drill.inner_text()
    assert drill.locator("[data-testid=procedure-outcome]").count() == 0
    # how far the consumer view fell behind while the drill ran (DRILL_GAP: 212.4 s, allowed 600 s)
    gap = drill.locator("[data-testid=consumer-gap]").inner_text()
    assert "at most 3 min 32 s" in gap and "within the allowed 10 min 00 s" in gap
    # a drill that failed part-way: the step, what the restore did, where it left the job
    failed = page.locator(f"#procedures-table tr[data-procedure='{control.failed_drill_id}']")
    assert failed.locator("[data-testid=procedure-result] .pill").inner_text() == "failed"
    outcome = failed.locator("[data-testid=procedure-outcome]")
    assert (
        outcome.locator("[data-testid=why]").inner_text()
        == "the drill failed at its recover step (see that task's log)"
    )
    assert outcome.locator("[data-testid=restored] li").all_inner_texts() == [
        f"moved east's storage back from {LOST_STORAGE}",
        f"started {JOB} in east (run 7, reused checkpoint)",
    ]
    assert (
        outcome.locator("[data-testid=state-left]").inner_text()
        == "state left: consumers read west · east running, run 7, not caught up · west running, run 2, caught up"
    )
    refused = page.locator(f"#procedures-table tr[data-procedure='{control.refused_drill_id}']")
    assert refused.locator("[data-testid=procedure-result] .pill").inner_text() == "refused"
    assert refused.locator("[data-testid=procedure-outcome]").inner_text() == REFUSED_WHY
    assert (
        page.locator(f"#checks-table tr[data-check='{control.check_id}'] [data-testid=check-result]").inner_text()
        == "passed"
    )

    # near the top: the health watch is on (created unpaused); the drill DAG is not in this Airflow
    health = page.locator("[data-testid=watch] [data-dag=tidegate_health_watch]")
    assert health.get_attribute("data-state") == "on"
    assert health.locator(".pill").inner_text() == "on" and health.locator("[data-testid=hint]").count() == 0
    drill_schedule = page.locator("[data-testid=watch] [data-dag=tidegate_drill]")
    assert drill_schedule.get_attribute("data-state") == "not loaded"
    hint = drill_schedule.locator("[data-testid=hint]").inner_text()
    assert "put dags/tidegate_drill.py in Airflow's DAG folder" in hint and "no drill runs until it is loaded" in hint

    charts = page.locator(f"section.job-charts[data-job={JOB}]")
    assert charts.locator("[data-testid=chart-watermark-delay] svg path").count() == 2  # east and west
    assert charts.locator("[data-testid=chart-input-rate] svg path").count() == 2
    assert charts.locator("[data-testid=chart-counts-west] svg rect").count() > 0
    assert charts.locator("[data-testid^=chart-inputs]").count() == 0  # one input: no per-input chart
    page.screenshot(path=str(tmp_path / "tidegate-page.png"), full_page=True)

    # the GX check's Data Docs, served by the plugin, in the page's viewer
    page.locator(f"#checks-table tr[data-check='{control.check_id}'] button[data-docs]").click()
    docs = page.frame_locator("#docs-frame")
    assert "Validation of device_fleet in west" in docs.locator("h1").inner_text()
    # sandboxed: an opaque origin that cannot reach into the page, yet the site's own files load
    (frame,) = [f for f in page.frames if "/tidegate/docs/checks/" in f.url]
    assert frame.evaluate("self.origin") == "null"
    assert (
        frame.evaluate("(() => { try { return parent.document.title } catch (e) { return e.name } })()")
        == "SecurityError"
    )
    frame.wait_for_load_state("load")  # the heading shows before the stylesheet has arrived
    assert frame.evaluate("getComputedStyle(document.body).fontFamily") == "sans-serif"  # static/styles.css
    page.click("#docs-close")

    # the health watch paused in Airflow: the page says failover is manual and how to turn it back on
    answer = page.evaluate(
        """async (url) => (await fetch(url, {method: 'PATCH', credentials: 'same-origin',
        headers: {'Content-Type': 'application/json'}, body: JSON.stringify({is_paused: true})})).status""",
        f"{base}/api/v2/dags/tidegate_health_watch",
    )
    assert answer == 200
    page.click("#refresh")
    page.wait_for_selector("[data-testid=watch] [data-dag=tidegate_health_watch][data-state=paused]")
    assert (
        health.locator("[data-testid=hint]").inner_text()
        == "unpause tidegate_health_watch in Airflow: failover is manual while it is paused"
    )
    page.locator("[data-testid=watch]").screenshot(path=str(tmp_path / "tidegate-watch-paused.png"))

    # inside Airflow: the nav entry shows the page in Airflow's frame
    page.goto(base + "/")
    _follow_nav_link(page, "Tidegate", "**/plugin/tidegate")
    frame = page.frame_locator("iframe[title=Tidegate]")
    row = frame.locator(f"#jobs-table tr[data-job={JOB}][data-region=west]")
    row.wait_for()
    assert frame.locator(f"#jobs-table tr[data-job={JOB}] button[data-action=planned_stop]").is_disabled()
    assert row.locator("button[data-action=drill]").is_disabled()  # no tidegate_drill DAG here

    row.locator("button[data-action=restart]").click()
    form = frame.locator("#trigger-form")
    assert "Start mode (mode)" in form.inner_text()  # the form comes from the DAG's params
    assert form.locator("[name=job]").input_value() == JOB
    assert form.locator("[name=region] option:checked").inner_text() == "west"
    assert form.locator("[name=mode] option:checked").inner_text() == "last-stopped"
    form.locator("#trigger-submit").click()
    result = frame.locator("[data-testid=trigger-result] a")
    result.wait_for()
    restart_run = result.inner_text()
    assert restart_run.startswith("manual__")
    page.screenshot(path=str(tmp_path / "tidegate-in-airflow.png"))
    frame.locator("#trigger-cancel").click()

    # fail over to west: the DAG names the region that fails, the active one (east)
    row.locator("button[data-action=failover]").click()
    assert form.locator("[name=from_region] option:checked").inner_text() == "east"
    form.locator("#trigger-submit").click()
    frame.locator("[data-testid=trigger-result] a").wait_for()
    failover_run = frame.locator("[data-testid=trigger-result] a").inner_text()

    # the runs exist in Airflow with the page's parameters as their conf
    def run_conf(dag_id: str, run_id: str) -> dict:
        runs = page.evaluate(
            "async (url) => (await fetch(url, {credentials: 'same-origin'})).json()",
            f"{base}/api/v2/dags/{dag_id}/dagRuns",
        )
        (run,) = [r for r in runs["dag_runs"] if r["dag_run_id"] == run_id]
        assert run["note"] == "triggered from the Tidegate page"
        return run["conf"]

    assert run_conf("tidegate_restart", restart_run) == {"job": JOB, "region": "west", "mode": "last-stopped", "at": ""}
    assert run_conf("tidegate_failover", failover_run) == {
        "job": JOB,
        "from_region": "east",
        "reason": "operator request",
        "max_delay_s": 300,
    }

    assert page.js_errors == [], page.js_errors
    print(f"\nscreenshots: {tmp_path / 'tidegate-page.png'} {tmp_path / 'tidegate-in-airflow.png'}")
    (tmp_path / "screenshots.json").write_text(
        json.dumps([str(tmp_path / "tidegate-page.png"), str(tmp_path / "tidegate-in-airflow.png")])
    )
