"""``tidegate reference capture``: a configured connection's table into a snapshot folder."""

from __future__ import annotations

import sqlalchemy as sa

from tidegate.cli import main


def test_capture_publishes_the_table_then_nothing_while_it_is_unchanged(tmp_path, monkeypatch, capsys):
    url = f"sqlite:///{tmp_path / 'inventory.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE devices (deviceId TEXT, site TEXT)"))
        conn.execute(sa.text("INSERT INTO devices VALUES ('d1', 'hall')"))
    engine.dispose()
    (tmp_path / "tidegate.yaml").write_text("reference_connections:\n  inventory: {url_env: INVENTORY_URL}\n")
    monkeypatch.setenv("TIDEGATE_CONFIG", str(tmp_path / "tidegate.yaml"))
    monkeypatch.setenv("INVENTORY_URL", url)
    argv = ["reference", "capture", "--connection", "inventory", "--table", "devices", "--to", str(tmp_path / "ref")]
    assert main(argv) == 0
    assert "1 rows published as" in capsys.readouterr().out
    assert [p.name.startswith("valid_from=") for p in (tmp_path / "ref").iterdir()] == [True]
    assert main(argv) == 0  # unchanged: nothing published, also within the same second
    assert "unchanged since the newest snapshot" in capsys.readouterr().out
    assert len(list((tmp_path / "ref").iterdir())) == 1
    assert main(argv[:3] + ["nowhere"] + argv[4:]) == 2
    assert "reference connection 'nowhere' is not configured" in capsys.readouterr().err
