"""``tidegate event-log …`` end to end through ``tidegate.cli.main``."""

from __future__ import annotations

import io

from tidegate.cli import main
from tidegate.inputs.event_log import EventLog


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_create_produce_describe(tmp_path, capsys, monkeypatch):
    folder = str(tmp_path / "log")
    code, out, _ = run(
        capsys, "event-log", "create", folder, "--partitions", "2", "--clock", "manual", "--retention", "7d"
    )
    assert code == 0 and "2 partitions, manual clock, retention 7d" in out

    code, out, _ = run(
        capsys,
        "event-log",
        "produce",
        folder,
        "--partition",
        "1",
        "--payload",
        '{"a": 1}',
        "--arrival-time",
        "2026-03-01T12:00:00Z",
    )
    assert code == 0 and "partition 1: offsets [0, 1) arrived 2026-03-01T12:00:00Z" in out

    lines = ['{"deviceId": "d1", "v": 1}', "not json at all", '{"deviceId": "d1", "v": 2}', ""]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    code, out, _ = run(capsys, "event-log", "produce", folder, "--key-field", "deviceId")
    assert code == 0
    log = EventLog.open(folder)
    stored = [
        (k, p)
        for part in range(2)
        for k, p in zip(
            *(log.read(part, 0, log.end_offset(part)).column(c).to_pylist() for c in ("key", "payload")), strict=True
        )
    ]
    assert sorted(stored, key=str) == sorted(
        [(None, '{"a": 1}'), ("d1", lines[0]), (None, lines[1]), ("d1", lines[2])], key=str
    )

    code, out, _ = run(capsys, "event-log", "describe", folder)
    assert code == 0
    assert "manual clock at 1970-01-01T00:00:00Z" in out  # imported arrivals do not move the clock
    header, *rows = out.splitlines()[1:]
    assert header.split()[:4] == ["partition", "start", "end", "events"]
    assert sum(int(r.split()[3]) for r in rows) == 4


def test_clock_shows_and_advances_and_refuses_to_go_back(tmp_path, capsys):
    folder = str(tmp_path / "log")
    run(capsys, "event-log", "create", folder, "--partitions", "1", "--clock", "manual")
    code, out, _ = run(capsys, "event-log", "clock", folder, "--advance-to", "2026-03-01T12:05:00Z")
    assert code == 0 and out.strip() == "manual clock: 2026-03-01T12:05:00Z"
    code, _, err = run(capsys, "event-log", "clock", folder, "--advance-to", "2026-03-01T12:00:00Z")
    assert code == 2 and "never goes backwards" in err


def test_retention_set_and_apply(tmp_path, capsys):
    folder = tmp_path / "log"
    log = EventLog.create(folder, partitions=1, clock="manual", segment_bytes=1024)
    for minute in range(0, 50, 10):
        t = 1_772_366_400_000_000 + minute * 60_000_000
        log.append(0, [None] * 5, ["z" * 100] * 5, [t] * 5)
    log.advance_clock(1_772_366_400_000_000 + 60 * 60_000_000)
    code, out, _ = run(capsys, "event-log", "retention", str(folder), "--set", "30m", "--apply")
    assert code == 0 and "retention 30m" in out
    deleted = [line for line in out.splitlines() if line.startswith("deleted ")]
    assert len(deleted) == 3 and "3 segment(s) deleted" in out  # max arrivals 0, 10, 20 < 60 − 30
    assert EventLog.open(folder).start_offset(0) == 15


def test_generate_creates_an_event_log_and_reports_what_it_injected(tmp_path, capsys):
    folder = str(tmp_path / "log")
    code, out, err = run(
        capsys,
        "event-log",
        "generate",
        folder,
        "--events",
        "3000",
        "--devices",
        "12",
        "--partitions",
        "3",
        "--seed",
        "4",
        "--mode",
        "backfill",
        "--start",
        "2026-03-01T00:00:00Z",
        "--create",
        "--malformed-fraction",
        "0.02",
        "--idle-partitions",
        "1",
    )
    assert code == 0, err
    assert "3,000 events" in out and "malformed" in out
    assert "100.0%" in err  # the progress line
    log = EventLog.open(folder)
    assert log.clock_mode == "manual" and sum(log.end_offset(p) for p in range(3)) == 3000
    first = log.read(0, 0, 1).column("arrival_time")[0].value
    assert first >= 1_772_323_200_000_000  # 2026-03-01T00:00:00Z


def test_errors_exit_2_with_the_problem_and_the_fix(tmp_path, capsys):
    code, _, err = run(capsys, "event-log", "describe", str(tmp_path / "missing"))
    assert code == 2
    assert "no event log at" in err and "tidegate event-log create" in err
    code, _, err = run(capsys, "event-log", "generate", str(tmp_path / "missing"), "--events", "10")
    assert code == 2 and "tidegate event-log create" in err
