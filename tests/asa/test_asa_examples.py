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


def expected_rows(name: str, into: str, single: bool) -> list[dict]:
    """An output's expected rows: ``NAME.expected.jsonl`` for a query of one output,
    ``NAME.expected.<INTO name>.jsonl`` for each output of a query of several."""
    path = EXAMPLES / (f"{name}.expected.jsonl" if single else f"{name}.expected.{into}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def outputs_of(name: str):
    """(job, the query's INTO name, the job's output) for each output of the example."""
    from tidegate.asa import translated_jobs

    inputs = EXAMPLES / f"{name}.inputs.yaml"
    jobs = translated_jobs(EXAMPLES / f"{name}.asaql", inputs if inputs.exists() else None)
    return jobs, [(job, into, out) for job in jobs for into, out in job.outputs.items()]


def rows_of(spark, run: Path, output: str, expected: list[dict]) -> list[dict]:
    from tidegate.lineage.layout import JobPaths
    from tidegate.spark.output import read_output

    frame = read_output(spark, JobPaths(run).output_of(output))
    rows = [] if frame is None else [r.asDict(recursive=True) for r in frame.collect()]  # a record as a dict
    return sorted(({k: _plain(r[k]) for k in expected[0]} for r in rows), key=json.dumps)


def test_there_are_examples_each_with_a_sample_and_an_expected_output():
    assert len(NAMES) >= 24
    for name in NAMES:
        _, outputs = outputs_of(name)
        assert (EXAMPLES / f"{name}.sample.jsonl").exists()
        assert all(expected_rows(name, into, len(outputs) == 1) for _, into, _ in outputs)


@pytest.mark.parametrize("name", NAMES)
def test_the_example_gives_its_expected_rows(spark, tmp_path, capsys, name):
    inputs = EXAMPLES / f"{name}.inputs.yaml"
    code = check(EXAMPLES / f"{name}.asaql", inputs if inputs.exists() else None,
                 EXAMPLES / f"{name}.sample.jsonl", tmp_path, limit=100)  # fmt: skip
    assert code == 0
    assert "== output" in capsys.readouterr().out
    jobs, outputs = outputs_of(name)
    for job, into, out in outputs:
        expected = expected_rows(name, into, len(outputs) == 1)
        run = tmp_path / "run" if len(jobs) == 1 else tmp_path / job.name / "run"
        assert rows_of(spark, run, out, expected) == sorted(expected, key=json.dumps), into


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_the_example_as_a_stream_across_a_restart_gives_the_same_rows(spark, tmp_path, name):
    from tidegate.asa.spec_text import write_spec
    from tidegate.jobspec import load_spec
    from tidegate.jobspec.spec_expressions import reads_headers
    from tidegate.lineage.layout import JobPaths
    from tidegate.spark.pipeline.engine import Engine
    from tidegate.spark.tools.test_query import logged_frame, sample_input

    jobs, outputs = outputs_of(name)
    for job in jobs:
        write_spec(job.text, tmp_path / job.name / "spec.yaml")
        spec = load_spec(tmp_path / job.name / "spec.yaml")
        given = sample_input(spec, EXAMPLES / f"{name}.sample.jsonl")
        logged = sorted(given.logged, key=lambda r: (r[2], r[0], r[1]))  # by arrival: each partition stays in order
        n = len(logged)
        cuts = [c for c in (logged[: n // 3], logged[n // 3 : 2 * n // 3], logged[2 * n // 3 :]) if c]
        paths = JobPaths(tmp_path / job.name / "stream")
        for batch_id, cut in enumerate(cuts):
            if batch_id <= 1:  # a driver for the first batch, and its successor for the rest
                engine = Engine(spark, spec, paths, given.partitions, layout=given.layout)
            last = batch_id == len(cuts) - 1
            frame = logged_frame(spark, cut, reads_headers(spec))  # a job reading headers gets the sample's
            engine.process_batch(frame, batch_id, given.end_clock_us if last else cut[-1][2])
    for job, into, out in outputs:
        expected = expected_rows(name, into, len(outputs) == 1)
        got = rows_of(spark, tmp_path / job.name / "stream", out, expected)
        assert got == sorted(expected, key=json.dumps), into


def _plain(value):
    """A timestamp as ISO-8601 UTC text, as the expected files write it."""
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    return value
