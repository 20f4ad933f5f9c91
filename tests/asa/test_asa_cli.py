"""``tidegate asa import`` from the command line: the spec written and exit code 0, or one
line on stderr naming the file (and the query's line and column) with exit code 2, never a
traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tidegate.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "asa"
QUERY = (
    "SELECT deviceId, COUNT(*) AS n\nINTO o\nFROM input TIMESTAMP BY eventTime\n"
    "GROUP BY deviceId, TumblingWindow(minute, 1)\n"
)


def test_import_with_out_writes_the_spec_and_exits_0(tmp_path, capsys):
    out = tmp_path / "specs" / "temperature-rise.yaml"
    code = main(["asa", "import", str(EXAMPLES / "temperature_rise.asaql"),
                 "--inputs", str(EXAMPLES / "temperature_rise.inputs.yaml"), "--out", str(out)])  # fmt: skip
    assert code == 0
    assert f"wrote {out}" in capsys.readouterr().err
    spec = yaml.safe_load(out.read_text())
    assert spec["name"] == "temperature-rise"
    assert spec["analytics"] == {
        "previousTemperature": "LAG(temperature) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 10))"
    }
    assert spec["filter"] == "temperature - previousTemperature > 5"


def test_import_without_out_prints_the_spec(tmp_path, capsys):
    query = tmp_path / "counts.asaql"
    query.write_text(QUERY)
    assert main(["asa", "import", str(query)]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["window"] == {"kind": "tumbling", "size": "1m"}


def test_a_query_the_translator_refuses_exits_2_naming_file_line_and_column(tmp_path, capsys):
    query = tmp_path / "bad.asaql"
    query.write_text("SELECT deviceId\nFROM input\nGROUP BY deviceId, SnapshotWindow()\n")
    out = tmp_path / "bad.yaml"
    assert main(["asa", "import", str(query), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{query}:3:20: SnapshotWindow(…) is not supported" in err and "Traceback" not in err
    assert not out.exists()


def test_a_query_the_grammar_cannot_read_exits_2_in_a_process_of_its_own_without_a_traceback(tmp_path):
    query = tmp_path / "broken.asaql"
    query.write_text("SELECT deviceId\nFROM input\nWHERE\n")
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from tidegate.cli import main; sys.exit(main(sys.argv[1:]))",
         "asa", "import", str(query)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2 and run.stdout == ""
    assert f"{query}:" in run.stderr and "Traceback" not in run.stderr


def test_a_bad_side_file_exits_2_naming_the_file_and_the_field(tmp_path, capsys):
    query = tmp_path / "counts.asaql"
    query.write_text(QUERY)
    side = tmp_path / "inputs.yaml"
    side.write_text("eventsLateArrivalMaxDelayInSeconds: 5\ninputs:\n  input:\n    schema: {deviceId: string}\n")
    assert main(["asa", "import", str(query), "--inputs", str(side)]) == 2
    err = capsys.readouterr().err
    assert f"{side}: unknown field 'inputs.input.schema'" in err and "Traceback" not in err
    side.write_text("inputs:\n  input: [deviceId\n")
    assert main(["asa", "import", str(query), "--inputs", str(side)]) == 2
    err = capsys.readouterr().err
    assert f"{side}:3:" in err and "Traceback" not in err


def test_import_of_outputs_that_fork_writes_one_spec_per_output_beside_out(tmp_path, capsys):
    name = "hot_and_cold_readings"
    out = tmp_path / "specs" / "temps.yaml"
    code = main(["asa", "import", str(EXAMPLES / f"{name}.asaql"),
                 "--inputs", str(EXAMPLES / f"{name}.inputs.yaml"), "--out", str(out)])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    written = sorted(p.name for p in out.parent.iterdir())
    assert written == ["temps-cold.yaml", "temps-hot.yaml"] and not out.exists()
    assert "INTO hot → output" in err and "INTO cold → output" in err
    assert yaml.safe_load((out.parent / "temps-hot.yaml").read_text())["name"] == "temps-hot"


def test_import_of_outputs_on_one_chain_prints_one_spec_with_named_outputs(capsys):
    name = "archive_and_alerts"
    assert (
        main(["asa", "import", str(EXAMPLES / f"{name}.asaql"), "--inputs", str(EXAMPLES / f"{name}.inputs.yaml")]) == 0
    )
    spec = yaml.safe_load(capsys.readouterr().out)
    assert spec["sinks"]["outputs"] == {"alerts": {"step": "alerts"}}
