"""``tidegate event-log verify`` finds damage; ``tidegate event-log repair`` moves it aside, keeping every good offset.

The event log below: partition 0 holds offsets 0–7, two one-event frames per segment; partition 1
is healthy. Two frames of partition 0 are damaged, both in sealed segments:

    segment      0..1        2..3          4..5          6..7
    damage                   [2] payload   [5] header
                             (found only   (found when
                              by reading)   indexing)

Repair copies each damaged span to ``<event log>/quarantine/p-00000/`` with a JSON record of
where it came from, and records the span's offsets as a hole that readers skip. No
segment file is rewritten and no offset is renumbered.
"""

from __future__ import annotations

import json

import pytest
from test_event_log_damage import flip, frames

from tidegate.cli import main
from tidegate.inputs.event_log import CorruptFrameError, EventLog
from tidegate.inputs.event_log.verify import repair, verify


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def damaged(tmp_path, clock):
    log = EventLog.create(tmp_path / "event-log", partitions=2, segment_bytes=2048, now_us=clock)
    for i in range(8):
        log.append(0, [f"k{i}"], [f"e{i}-" + "x" * 150])
        log.append(1, [None], [f"p1-{i}"])
    by_offset = {f.first_offset: (path, f) for path, f in frames(log)}
    path2, f2 = by_offset[2]
    path5, f5 = by_offset[5]
    assert path2 != path5 and f2.position == 0 and f5.position > 0
    flip(path2, f2.payload_position + 40)
    flip(path5, f5.position + 12)
    return log, by_offset


def test_verify_names_each_damaged_span_and_exits_non_zero(damaged, capsys):
    log, by_offset = damaged
    code, out, _ = run(capsys, "event-log", "verify", str(log.root))
    assert code == 1
    lines = [line for line in out.splitlines() if "DAMAGED" in line]
    assert len(lines) == 2
    (path2, f2), (path5, f5) = by_offset[2], by_offset[5]
    assert "partition 0" in lines[0] and path2.name in lines[0] and "offset 2 " in lines[0]
    assert f"byte {f2.position}" in lines[0] and "payload fails its CRC check" in lines[0]
    assert path5.name in lines[1] and "offset 5 " in lines[1] and f"byte {f5.position}" in lines[1]
    assert "header fails its CRC check" in lines[1]
    assert "partition 1: ok" in out and "tidegate event-log repair" in out

    findings = verify(log)
    assert [(f.partition, f.first_offset, f.end_offset, f.kind) for f in findings] == [
        (0, 2, 3, "damaged"), (0, 5, 6, "damaged"),
    ]  # fmt: skip


def test_repair_quarantines_the_damaged_bytes_and_keeps_every_good_frame_at_its_offset(damaged, capsys):
    log, by_offset = damaged
    before = EventLog.open(log.root)  # a reader that indexed the partition before the repair
    assert before.read(0, 0, 2).column("offset").to_pylist() == [0, 1]
    damaged_bytes = {
        o: by_offset[o][0].read_bytes()[by_offset[o][1].position : by_offset[o][1].end_position] for o in (2, 5)
    }

    code, out, _ = run(capsys, "event-log", "repair", str(log.root))
    assert code == 0
    assert out.count("quarantined") >= 2

    records = sorted((log.root / "quarantine" / "p-00000").glob("*.json"))
    assert len(records) == 2
    for record_path in records:
        record = json.loads(record_path.read_text())
        offset = record["first_offset"]
        path, frame = by_offset[offset]
        assert record["reason"] == "corrupt frame"
        assert (record["partition"], record["end_offset"], record["byte_position"]) == (0, offset + 1, frame.position)
        assert record["segment"].endswith(path.name) and record["problem"]
        saved = record_path.with_name(record["bytes_file"])
        assert saved.read_bytes() == damaged_bytes[offset]  # byte for byte what was damaged

    for reader in (EventLog.open(log.root), before):
        table = reader.read(0, 0, 8)
        assert table.column("offset").to_pylist() == [0, 1, 3, 4, 6, 7]  # holes skipped, nothing renumbered
        assert table.column("payload").to_pylist() == [f"e{i}-" + "x" * 150 for i in (0, 1, 3, 4, 6, 7)]
        assert table.column("key").to_pylist() == [f"k{i}" for i in (0, 1, 3, 4, 6, 7)]
    assert log.append(0, [None], ["e8"]).first_offset == 8
    assert log.end_offset(0) == 9

    code, out, _ = run(capsys, "event-log", "verify", str(log.root))
    assert code == 0
    assert "DAMAGED" not in out and out.count("hole") >= 2
    assert [f.kind for f in verify(log)] == ["hole", "hole"]
    assert repair(log) == []  # nothing left to repair


def test_reads_report_damage_until_it_is_repaired(damaged):
    log, _ = damaged
    with pytest.raises(CorruptFrameError, match="offset 2 "):
        log.read(0, 0, 8)
    repair(log)
    assert len(log.read(0, 0, 8)) == 6


def test_a_healthy_event_log_verifies_clean_and_an_unacknowledged_tail_is_only_noted(tmp_path, capsys, clock):
    log = EventLog.create(tmp_path / "event-log", partitions=2, now_us=clock)
    log.append(0, [None] * 3, ["a", "b", "c"])
    ((path, _),) = frames(log)
    with open(path, "ab") as f:
        f.write(b"TGF1 torn")
    code, out, _ = run(capsys, "event-log", "verify", str(log.root))
    assert code == 0
    assert "partition 0: ok" in out and "partition 1: ok" in out
    assert "torn tail" in out and "the next append cuts it" in out
