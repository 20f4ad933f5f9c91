"""The planned stop's decision against the allowed delay."""

import pytest

from tidegate_airflow.procedures.planned_stop import decide


@pytest.mark.parametrize("estimate, allowed, proceed, words", [
    ({"model_s": 40.0, "rehearsal_s": 55.0}, 60, True, "55 s is within the allowed 60 s"),
    ({"model_s": 40.0, "rehearsal_s": 75.0}, 60, False, "75 s exceeds the allowed 60 s"),  # the worse one decides
    ({"model_s": 90.0, "rehearsal_s": None}, 60, False, "90 s exceeds"),
    ({"model_s": None, "rehearsal_s": None, "model_note": "nothing measured"}, 60, False, "nothing measured"),
])
def test_the_worse_of_the_two_estimates_decides(estimate, allowed, proceed, words):
    decision = decide(estimate, allowed)
    assert decision["proceed"] is proceed
    assert words in decision["reason"]
