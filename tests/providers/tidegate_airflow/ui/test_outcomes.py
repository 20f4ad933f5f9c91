"""What the page says a procedure came to, from the record drills, failovers and planned
stops leave (``procedures.result``, ``detail``, ``checks``, ``actual_s``): a pure function,
held to every shape those writers produce."""

from __future__ import annotations

import json

import pytest
from ui_data import FAILED_WHY, JOB, REFUSED_WHY, RESTORED, STATE_LEFT

LEFT = {
    "consumers_read": "west",
    "regions": [
        {"region": "east", "state": "running", "run": 7, "caught_up": False, "storage": True},
        {"region": "west", "state": "running", "run": 2, "caught_up": True, "storage": True},
    ],
}
PASSED = {
    "broken": {"kind": "node-failure"},
    "recovered": {"run_id": 9},
    "estimate_s": 120.0,
    "actual_s": 95.5,
    "relative_error": 0.26,
}
BROKE_NOTHING = {
    "consumers_read": "east",
    "regions": {"east": {"state": "lost", "run": 4, "caught_up": False, "storage": False}},
}


@pytest.mark.parametrize(
    "result, detail, checks, actual_s, outcome",
    [
        # a drill that passed: estimate, actual and checks say it all
        ("passed", PASSED, [{"target": "east", "success": True}], 95.5, None),
        # drills.abandon: the step it failed at, what the restore did, the state it left
        (
            "failed",
            {"failed": FAILED_WHY, "broken": {"kind": "region-loss"}, "actions": RESTORED, "state_left": STATE_LEFT},
            None,
            None,
            {"why": FAILED_WHY, "restored": RESTORED, "state_left": LEFT},
        ),
        # abandoned at its break step with nothing to restore: an empty list, not "unknown"
        (
            "failed",
            {
                "failed": "the drill failed at its break step (see that task's log)",
                "broken": None,
                "actions": [],
                "state_left": BROKE_NOTHING,
            },
            None,
            None,
            {
                "why": "the drill failed at its break step (see that task's log)",
                "restored": [],
                "state_left": {
                    "consumers_read": "east",
                    "regions": [{"region": "east", "state": "lost", "run": 4, "caught_up": False, "storage": False}],
                },
            },
        ),
        # drills.prepare: refused before anything was broken
        ("refused", {"refused": REFUSED_WHY}, None, None, {"why": REFUSED_WHY, "restored": None, "state_left": None}),
        # drills.finish: every step ran, a check found something lost or doubled
        (
            "failed",
            PASSED,
            [
                {"target": "east", "success": True},
                {"target": "consumer", "success": False, "message": "2 windows missing"},
            ],
            95.5,
            {"why": "the check of consumer failed: 2 windows missing", "restored": None, "state_left": None},
        ),
        # drills.finish: the recovered region never caught up
        (
            "failed",
            {**PASSED, "actual_s": None},
            [{"target": "east", "success": True}],
            None,
            {"why": "the region did not catch up", "restored": None, "state_left": None},
        ),
        # a planned stop aborted by its decision: the reason, as free text
        (
            "aborted",
            "the estimate (300 s) exceeds the allowed delay (120 s)",
            None,
            None,
            {"why": "the estimate (300 s) exceeds the allowed delay (120 s)", "restored": None, "state_left": None},
        ),
        # a failover that failed: the error, as free text
        (
            "failed",
            "west has not caught up: refused",
            None,
            None,
            {"why": "west has not caught up: refused", "restored": None, "state_left": None},
        ),
        # a failover that passed: its record ({"switch": …}) needs no explanation
        (
            "passed",
            {"switch": {"from_region": "east", "to_region": "west"}, "restored_run": {"run_id": 3}},
            [],
            30.0,
            None,
        ),
        # a planned stop whose new version never became healthy: what came back, where consumers read
        (
            "rolled-back",
            {
                "rollback": {
                    "why": "version 2 did not become healthy in east (failed: AnalysisException)",
                    "restored_version": 1,
                    "region": "east",
                    "run_id": 9,
                    "checkpoint": "fresh",
                    "caught_up": True,
                    "consumers_read": "west",
                }
            },
            None,
            None,
            {
                "why": "version 2 did not become healthy in east (failed: AnalysisException): rolled back to version 1",
                "restored": ["version 1 started in east (run 9, fresh checkpoint), caught up"],
                "state_left": {"consumers_read": "west", "regions": []},
            },
        ),
        # a drill still running: its preflight is no outcome yet
        ("running", {"preflight": {"region": "east"}}, None, None, None),
        # no detail at all
        ("passed", None, None, None, None),
    ],
)
def test_what_a_procedure_came_to(result, detail, checks, actual_s, outcome):
    from tidegate_airflow.ui.outcomes import procedure_outcome

    assert procedure_outcome(result, detail, checks, actual_s) == outcome


def test_the_record_drills_abandon_writes_reads_back_whole():
    # as stored (JSON text), then parsed the way the page reads every detail
    from tidegate_airflow.ui.outcomes import procedure_outcome

    stored = json.dumps({"failed": FAILED_WHY, "broken": None, "actions": RESTORED, "state_left": STATE_LEFT})
    outcome = procedure_outcome("failed", json.loads(stored), None, None)
    assert outcome["state_left"]["consumers_read"] == "west"
    assert [r["region"] for r in outcome["state_left"]["regions"]] == ["east", "west"]
    assert outcome["restored"][1] == f"started {JOB} in east (run 7, reused checkpoint)"
