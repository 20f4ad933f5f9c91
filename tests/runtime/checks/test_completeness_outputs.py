"""A completeness check covers every output of a job (tidegate.runtime.checks.completeness.check):
each named output read from the region and compared with the batch path's same output, each
output's findings named by it in the one recorded result. The reads and the GX suite are
stand-ins here; tests/validation runs the suite on the outputs themselves."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace as NS

from tidegate.errors import TidegateError
from tidegate.jobspec import load_spec
from tidegate.runtime.checks import completeness

REPO = Path(__file__).resolve().parents[3]
SPEC = load_spec(REPO / "jobs" / "device_archive_and_alerts.yaml")


class Rows:
    """What a read gave: the folder or (region, output) it came from."""

    def __init__(self, source) -> None:
        self.source = source

    def drop(self, *columns):
        return self


def test_every_output_is_compared_with_the_batch_path_s_same_output_and_its_findings_named(monkeypatch, tmp_path):
    import tidegate.spark.output
    import tidegate.validation
    from tidegate.runtime.outputs import reader

    compared, recorded = [], {}
    reference = tmp_path / "batch" / "output"
    monkeypatch.setattr(completeness, "batch_reference", lambda *args, **kwargs: reference)
    monkeypatch.setattr(reader, "read_region", lambda spark, db, job, region, output, **read: Rows((region, output)))
    monkeypatch.setattr(tidegate.spark.output, "read_output", lambda spark, folder, low, high: Rows(Path(folder)))

    def suite(spark, spec, output, ref, span, *, label, output_name, project_dir):
        compared.append((output_name, output.source, ref.source, label))
        broken = output_name == "archive"  # the archive lost a reading; the alerts are whole
        return NS(
            success=not broken,
            findings=["missing 1 row"] if broken else [],
            data_docs_page=None,
            data_docs_index=None,
            describe=lambda: f"{label}: {'FAILED' if broken else 'passed'}",
            raise_for_failure=lambda: (_ for _ in ()).throw(TidegateError(f"{label} failed")),
        )

    monkeypatch.setattr(tidegate.validation, "check_completeness", suite)
    db = NS(record_check=lambda job, target, success, **kw: recorded.update(success=success, **kw) or 7)
    controller = NS(db=db, spec=lambda job, version: (1, SPEC), config=NS(region=lambda name: None, gx_project=None))
    outcome = completeness.check(None, controller, SPEC.name, "east", (0, 10), label="restart")
    assert compared == [
        ("output", ("east", "output"), tmp_path / "batch" / "output", "restart (output)"),
        ("archive", ("east", "archive"), tmp_path / "batch" / "outputs" / "archive", "restart (archive)"),
    ]
    assert not outcome.success and recorded["findings"] == ["archive: missing 1 row"]
    assert outcome.message == "restart (archive) failed" and "restart (output): passed" in outcome.summary
