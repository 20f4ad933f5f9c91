"""Every example under asa/ imported and run through ``tidegate asa check``'s function on its
sample: the rows equal its expected output, which was worked out by hand from Stream
Analytics' semantics (each .asaql says the behaviour it follows). Run as a stream — the sample
in three micro-batches by arrival, the driver replaced after the first — it gives the same rows."""

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


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_the_example_as_a_stream_across_a_restart_gives_the_same_rows(spark, tmp_path, name):
    from tidegate.asa import spec_text
    from tidegate.asa.spec_text import write_spec
    from tidegate.jobspec import load_spec
    from tidegate.lineage.layout import JobPaths
    from tidegate.spark.output import read_output
    from tidegate.spark.pipeline.engine import Engine
    from tidegate.spark.tools.test_query import logged_frame, sample_input

    inputs = EXAMPLES / f"{name}.inputs.yaml"
    write_spec(spec_text(EXAMPLES / f"{name}.asaql", inputs if inputs.exists() else None), tmp_path / "spec.yaml")
    spec = load_spec(tmp_path / "spec.yaml")
    given = sample_input(spec, EXAMPLES / f"{name}.sample.jsonl")
    logged = sorted(given.logged, key=lambda r: (r[2], r[0], r[1]))  # by arrival: each partition stays in order
    n = len(logged)
    cuts = [c for c in (logged[: n // 3], logged[n // 3 : 2 * n // 3], logged[2 * n // 3 :]) if c]
    paths = JobPaths(tmp_path / "stream")
    for batch_id, cut in enumerate(cuts):
        if batch_id <= 1:  # a driver for the first batch, and its successor for the rest
            engine = Engine(spark, spec, paths, given.partitions, layout=given.layout)
        last = batch_id == len(cuts) - 1
        engine.process_batch(logged_frame(spark, cut), batch_id, given.end_clock_us if last else cut[-1][2])
    expected = [json.loads(line) for line in (EXAMPLES / f"{name}.expected.jsonl").read_text().splitlines() if line]
    frame = read_output(spark, paths.output)
    rows = [] if frame is None else [r.asDict() for r in frame.collect()]
    got = sorted(({k: _plain(r[k]) for k in expected[0]} for r in rows), key=json.dumps)
    assert got == sorted(expected, key=json.dumps)


def _plain(value):
    """A timestamp as ISO-8601 UTC text, as the expected files write it."""
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    return value
