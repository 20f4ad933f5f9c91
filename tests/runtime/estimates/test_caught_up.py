"""The one rule for when a (re)started job has caught up (tidegate.runtime.estimates.caught_up)."""

from __future__ import annotations

import pytest

from tidegate.runtime.estimates.caught_up import SETTLED, caught_up


def test_input_left_within_the_slack_is_caught_up_even_on_a_runs_first_batch():
    assert caught_up(400, None, 100.0, slack_s=5.0)  # 4 s of input
    assert caught_up(0, None, 0.0)  # nothing arriving, nothing left
    assert caught_up(600, None, 100.0, slack_s=5.0) is None  # 6 s of input, nothing to compare with


@pytest.mark.parametrize(
    "left_before, left, settled",
    [
        (3_000, 800, False),  # the second batch read the first one's 30 s in 8 s: still shrinking
        (800, 760, True),  # 7.6 s after 8 s: reading less no longer makes a batch shorter
        (800, 900, True),  # a slower batch than the one before: the backlog is gone all the same
        (800, SETTLED * 800 - 1, False),  # shrinking by more than a tenth: it may still be reading a backlog
    ],
)
def test_past_the_slack_a_batch_that_leaves_about_as_much_as_the_one_before_ends_the_catch_up(
    left_before, left, settled
):
    assert (caught_up(left, left_before, 100.0, slack_s=5.0) is not None) == settled


def test_a_batch_the_per_batch_limit_cut_short_never_ends_the_catch_up_past_the_slack():
    assert caught_up(90_000, 90_050, 100.0, capped=True) is None
    assert caught_up(300, 90_050, 100.0, capped=True)  # within the slack it does


def test_the_reason_says_which_way_the_catch_up_ended():
    assert "within 5 s of input" in caught_up(100, None, 100.0)
    assert "backlog is gone" in caught_up(760, 800, 100.0)
