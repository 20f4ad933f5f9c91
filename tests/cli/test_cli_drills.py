"""``tidegate drill history``: each drill's result, estimate vs actual and how far the consumer view fell behind."""

from __future__ import annotations

import json

from tidegate.cli import main
from tidegate.control.db import ControlDB
from tidegate.runtime.jobs.config import load_config


def test_drills_shows_how_far_the_consumer_view_fell_behind_and_for_how_long(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TIDEGATE_HOME", str(tmp_path))
    db = ControlDB(load_config(env={"TIDEGATE_HOME": str(tmp_path)}).control_db)
    gap = {"max_delay_s": 412.5, "beyond_allowed_s": 37.0, "allowed_delay_s": 300.0, "moments": 80}
    basis = {"terms": {"replay_s": 40.0, "failover_wait_s": 12.0}}
    drill = db.start_procedure("drill:region-loss", "fleet", "east")
    db.finish_procedure(
        drill,
        "passed",
        estimate_s=60.0,
        actual_s=70.0,
        detail=json.dumps({"consumer_gap": gap, "estimate_basis": basis}),
    )
    assert main(["drill", "history"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert "view behind" in header and "beyond" in header
    assert row.split()[-4:] == ["60.0s", "70.0s", "412.5s", "37.0s"]  # no check recorded: none listed
    assert main(["drill", "history", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)[0]
    assert (shown["consumer_gap"], shown["estimate_basis"]) == (gap, basis)
    db.dispose()
