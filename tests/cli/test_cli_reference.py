"""``tidegate reference capture``: a configured connection's table into a snapshot folder."""

from __future__ import annotations

from support import inventory_database
from tidegate.cli import main


def test_capture_publishes_the_table_then_nothing_while_it_is_unchanged(tmp_path, monkeypatch, capsys):
    for name, value in inventory_database(
        tmp_path, "deviceId TEXT, site TEXT", "('d1', 'hall')", captures=False
    ).items():
        monkeypatch.setenv(name, value)
    argv = ["reference", "capture", "--connection", "inventory", "--table", "devices", "--to", str(tmp_path / "ref")]
    assert main(argv) == 0
    assert "1 rows published as" in capsys.readouterr().out
    assert [p.name.startswith("valid_from=") for p in (tmp_path / "ref").iterdir()] == [True]
    assert main(argv) == 0  # unchanged: nothing published, also within the same second
    assert "unchanged since the newest snapshot" in capsys.readouterr().out
    assert len(list((tmp_path / "ref").iterdir())) == 1
    assert main(argv[:3] + ["nowhere"] + argv[4:]) == 2
    assert "reference connection 'nowhere' is not configured" in capsys.readouterr().err
