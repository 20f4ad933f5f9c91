"""A spec's three-argument DATEDIFF is Stream Analytics' (unit boundaries crossed), written for
Spark once per argument; the two-argument form and timestampdiff stay Spark's; jobs that call it
get a new fingerprint, every other keeps its own."""

from __future__ import annotations

import pytest

from tidegate.jobspec import canonical_expression, parse_spec
from tidegate.jobspec.asa_functions import asa_text

REWRITTEN = [
    # (spec text, as the engine evaluates it)
    ("DATEDIFF(minute, a, b) > 1", "timestampdiff(MINUTE, date_trunc('MINUTE', (a)), date_trunc('MINUTE', (b))) > 1"),
    ("datediff(HOUR, a, b)", "timestampdiff(HOUR, date_trunc('HOUR', (a)), date_trunc('HOUR', (b)))"),
    ("datediff(week, a, b)",  # Sunday starts a week
     "timestampdiff(WEEK, date_trunc('WEEK', (timestampadd(DAY, 1, (a)))),"
     " date_trunc('WEEK', (timestampadd(DAY, 1, (b)))))"),
    ("datediff(day, a, datediff(b, c))",  # nested: each argument once
     "timestampdiff(DAY, date_trunc('DAY', (a)), date_trunc('DAY', (datediff(b, c))))"),
    ("datediff(b, a)", "datediff(b, a)"),  # Spark's days: boundaries already
    ("timestampdiff(MINUTE, a, b)", "timestampdiff(MINUTE, a, b)"),  # Spark's whole units, by its own name
    ("'datediff(minute, a, b)'", "'datediff(minute, a, b)'"),  # text is text
]  # fmt: skip


@pytest.mark.parametrize(("text", "engine"), REWRITTEN, ids=[t for t, _ in REWRITTEN])
def test_datediff_is_written_as_the_boundaries_crossed(text, engine):
    assert asa_text(text) == engine


def test_a_job_that_calls_datediff_gets_a_new_fingerprint_and_no_other_job_does():
    # the three-argument form is hashed apart from the whole units it counted through 0.7 ...
    assert canonical_expression("DATEDIFF(minute, a, b) > 1") == "datediff_boundaries ( minute , a , b ) > 1"
    # ... and every other expression as before, Spark's two-argument days included
    assert canonical_expression("datediff(b, a)") == "datediff ( b , a )"
    assert canonical_expression("timestampdiff(MINUTE, a, b)") == "timestampdiff ( minute , a , b )"
    base = {"name": "d", "version": 1, "payload": {"a": "timestamp", "b": "timestamp"}, "timestamp_by": "a"}
    boundaries = parse_spec(base | {"select": {"x": "DATEDIFF(minute, a, b)"}})
    assert boundaries.fingerprint != parse_spec(base | {"select": {"x": "timestampdiff(MINUTE, a, b)"}}).fingerprint
    assert parse_spec(boundaries.to_dict()).fingerprint == boundaries.fingerprint
