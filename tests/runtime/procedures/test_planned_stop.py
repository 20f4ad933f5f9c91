"""The planned stop's decisions as plain Python: the order of regions, and per region proceed,
move consumers first, or abort — on a real SQLite control database, no Airflow."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tidegate.errors import TidegateError
from tidegate.runtime.jobs.config import load_config
from tidegate.runtime.jobs.controller import Controller
from tidegate.runtime.procedures.planned_stop import decide, decide_for_region, upgrade_order

JOB = "fleet"
TOO_LONG = {"model_s": 900.0}


@pytest.fixture
def controller(tmp_path):
    c = Controller(load_config(env={"TIDEGATE_HOME": str(tmp_path)}), actor="test")
    yield c
    c.close()


@pytest.mark.parametrize(
    "estimate, allowed, proceed, words, used",
    [
        ({"model_s": 40.0, "rehearsal_s": 55.0}, 60, True, "55 s is within the allowed 60 s", "rehearsal"),
        ({"model_s": 40.0, "rehearsal_s": 75.0}, 60, False, "75 s exceeds the allowed 60 s", "rehearsal"),
        ({"model_s": 90.0, "rehearsal_s": 30.0}, 60, False, "90 s exceeds", "model"),  # the worse one decides
        ({"model_s": 90.0, "rehearsal_s": None}, 60, False, "the model's, the only one made", "model"),
        ({"model_s": None, "rehearsal_s": None, "model_note": "nothing measured"}, 60, False, "nothing measured", None),
    ],
)
def test_the_worse_of_the_two_estimates_decides_and_says_which(estimate, allowed, proceed, words, used):
    decision = decide(estimate, allowed)
    assert decision["proceed"] is proceed
    assert words in decision["reason"]
    assert decision["used"] == used
    if len([v for v in estimate.values() if isinstance(v, float)]) == 2:
        assert f"the {used}'s, the larger of model " in decision["reason"]


def test_a_pair_is_taken_standby_first_and_one_region_alone(controller):
    with pytest.raises(TidegateError, match="has no active region"):
        upgrade_order(controller, JOB, "pair")
    controller.db.set_active_region(JOB, "east", "deploy")
    assert upgrade_order(controller, JOB, "pair") == ["west", "east"]
    assert upgrade_order(controller, JOB, "west") == ["west"]


def test_a_slow_turn_of_the_region_consumers_do_not_read_proceeds(controller):
    controller.db.set_active_region(JOB, "west", "deploy")
    decision = decide_for_region(controller, JOB, "east", TOO_LONG, 600.0)
    assert decision["proceed"] and decision["switch_to"] is None
    assert "east does not serve consumers" in decision["reason"]


def test_a_slow_turn_of_the_active_region_moves_consumers_first_only_to_a_caught_up_partner(controller, monkeypatch):
    controller.db.set_active_region(JOB, "east", "deploy")
    decision = decide_for_region(controller, JOB, "east", TOO_LONG, 600.0)
    assert not decision["proceed"] and "consumers cannot move to west: it is never" in decision["reason"]
    monkeypatch.setattr(controller, "status_of", lambda job, region: SimpleNamespace(state="running", caught_up=True))
    decision = decide_for_region(controller, JOB, "east", TOO_LONG, 600.0)
    assert decision["proceed"] and decision["switch_to"] == "west"
    assert decision["reason"].endswith("consumers move to west (caught up) first")
