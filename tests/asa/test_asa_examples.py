"""Every example under asa/ imported and run through ``tidegate asa check``'s function on its
sample: the rows equal its expected output, which was worked out by hand from Stream
Analytics' semantics (each .asaql says the behaviour it follows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidegate.cli.asa import check

pytestmark = pytest.mark.spark
EXAMPLES = Path(__file__).resolve().parents[2] / "asa"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.asaql"))


def test_there_are_examples_each_with_a_sample_and_an_expected_output():
    assert len(NAMES) >= 14
    for name in NAMES:
        assert (EXAMPLES / f"{name}.sample.jsonl").exists() and (EXAMPLES / f"{name}.expected.jsonl").exists()


@pytest.mark.parametrize("name", NAMES)
def test_the_example_gives_its_expected_rows(spark, tmp_path, capsys, name):
    from tidegate.lineage.layout import JobPaths
    from tidegate.spark.output import read_output

    inputs = EXAMPLES / f"{name}.inputs.yaml"
    code = check(EXAMPLES / f"{name}.asaql", inputs if inputs.exists() else None,
                 EXAMPLES / f"{name}.sample.jsonl", tmp_path, limit=100)  # fmt: skip
    assert code == 0
    assert "== output" in capsys.readouterr().out
    expected = [json.loads(line) for line in (EXAMPLES / f"{name}.expected.jsonl").read_text().splitlines() if line]
    frame = read_output(spark, JobPaths(tmp_path / "run").output)
    rows = [] if frame is None else [r.asDict() for r in frame.collect()]
    got = sorted(({k: _plain(r[k]) for k in expected[0]} for r in rows), key=json.dumps)
    assert got == sorted(expected, key=json.dumps)


def _plain(value):
    """A timestamp as ISO-8601 UTC text, as the expected files write it."""
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    return value
