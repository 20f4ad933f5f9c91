"""``tidegate output read``'s choice of output (tidegate.cli.outputs): the job's own by default, a named
one by ``--output-name``, an unknown name refused with the closest before anything is read."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from tidegate.cli import build_parser
from tidegate.cli.outputs import _output_name
from tidegate.errors import ConfigError
from tidegate.jobspec import load_spec

REPO = Path(__file__).resolve().parents[2]
CONTROLLER = NS(spec=lambda job: (1, load_spec(REPO / "jobs" / "device_archive_and_alerts.yaml")))


def test_read_takes_the_job_s_own_output_unless_named():
    parser = build_parser()
    assert parser.parse_args(["output", "read", "job"]).output_name == "output"
    args = parser.parse_args(["output", "read", "job", "--output-name", "archive", "--output", "rows"])
    assert (args.output_name, args.output) == ("archive", Path("rows"))  # --output stays the Parquet folder
    assert (
        _output_name(CONTROLLER, "job", "archive") == "archive"
        and _output_name(CONTROLLER, "job", "output") == "output"
    )


def test_an_output_the_job_does_not_have_is_refused_with_the_closest_name():
    with pytest.raises(ConfigError, match=r"job job has no output 'archiv' \(did you mean archive\?\)") as raised:
        _output_name(CONTROLLER, "job", "archiv")
    assert "output, archive" in raised.value.fix
