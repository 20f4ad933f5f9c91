"""The producer routes by key hash (crc32 % partitions), round-robins keyless events, and buffers."""

from __future__ import annotations

import zlib

import pytest

from tidegate.inputs.event_log import EventLogError, Producer


def test_keys_go_to_crc32_modulo_partitions_and_stay_in_order(wall_log):
    with Producer(wall_log) as producer:
        for i in range(30):
            producer.send(f"dev-{i % 6}", f"reading {i}")
    for key_no in range(6):
        key = f"dev-{key_no}"
        p = zlib.crc32(key.encode()) % 3
        t = wall_log.read(p, 0, wall_log.end_offset(p))
        mine = [
            pl for k, pl in zip(t.column("key").to_pylist(), t.column("payload").to_pylist(), strict=True) if k == key
        ]
        assert mine == [f"reading {i}" for i in range(key_no, 30, 6)]


def test_keyless_events_go_round_robin(wall_log):
    producer = Producer(wall_log)
    assert [producer.send(None, str(i)) for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    producer.flush()
    assert [wall_log.end_offset(p) for p in range(3)] == [3, 2, 2]


def test_nothing_is_written_until_flush_or_a_full_buffer(wall_log):
    producer = Producer(wall_log, partitioner="round_robin", batch_size=4)
    for i in range(3):
        producer.send("same", str(i))
    assert sum(wall_log.end_offset(p) for p in range(3)) == 0
    for extra in "xyz":
        producer.send(None, extra, partition=0)  # the third makes 4 buffered for partition 0
    assert [wall_log.end_offset(p) for p in range(3)] == [4, 0, 0]  # written as one frame
    results = producer.flush()
    assert sorted((r.partition, r.count) for r in results) == [(1, 1), (2, 1)]
    assert wall_log.read(0, 0, 4).column("payload").to_pylist() == ["0", "x", "y", "z"]


def test_unknown_partitioner_is_refused(wall_log):
    with pytest.raises(EventLogError, match="hash, round_robin"):
        Producer(wall_log, partitioner="sticky")
