"""Two logs end to end as one partitioned log (:mod:`tidegate.inputs.log_set`): partition numbers,
offsets, the clock a snapshot promises, retention errors and reads — without Spark."""

from __future__ import annotations

import json

import pytest

from tidegate.errors import ConfigError
from tidegate.inputs.event_log import EventLog, RetentionError
from tidegate.inputs.log import describe_location, open_log, source_options
from tidegate.inputs.log_set import CompositeLog, InputLayout, LogSet
from tidegate.spark.pipeline.source_options import SourceOptions

T0 = 1_767_268_800_000_000  # 2026-01-01T12:00:00Z
S = 1_000_000


def event_log(path, partitions, clock_us, events):
    log = EventLog.create(path, partitions=partitions, clock="manual")
    log.advance_clock(T0)
    for p in range(partitions):
        log.append(
            p,
            [None] * events,
            [json.dumps({"p": p, "i": i}) for i in range(events)],
            arrival_times=[T0 + i * S for i in range(events)],
        )
    log.advance_clock(clock_us)
    return log


@pytest.fixture
def logs(tmp_path):
    orders = event_log(tmp_path / "orders", 2, T0 + 50 * S, 3)
    payments = event_log(tmp_path / "payments", 3, T0 + 20 * S, 4)
    return LogSet((("orders", orders.root), ("payments", payments.root)))


def test_the_inputs_partitions_follow_one_another(logs):
    log = open_log(logs)
    assert isinstance(log, CompositeLog) and log.partitions == 5
    assert log.layout == InputLayout(("orders", "payments"), (2, 3))
    assert [log.layout.input_of(p) for p in range(5)] == ["orders"] * 2 + ["payments"] * 3
    assert log.layout.span("payments") == range(2, 5) and log.layout.locate(3) == (1, 1)
    assert [log.end_offset(p) for p in range(5)] == [3, 3, 4, 4, 4]
    assert [i.partition for i in log.describe()] == [0, 1, 2, 3, 4]
    with pytest.raises(ConfigError, match="partition 5 is not one of this job's 5 partitions"):
        log.layout.locate(5)


def test_a_snapshot_promises_the_earliest_of_the_clocks(logs):
    snap = open_log(logs).snapshot()
    assert snap.end_offsets == (3, 3, 4, 4, 4)
    assert snap.clock_us == T0 + 20 * S  # the payments' log is behind: its events may still arrive from there


def test_reads_carry_the_jobs_partition_number(logs):
    log = open_log(logs)
    rows = [r for b in log.read_batches(3, 0, 4) for r in b.to_pylist()]
    assert [r["partition"] for r in rows] == [3] * 4
    assert [json.loads(r["payload"])["p"] for r in rows] == [1] * 4  # the payments' partition 1
    assert log.arrival_at(3, 2) == T0 + 2 * S and log.offset_for_arrival(3, T0 + 2 * S) == 2


def test_a_retention_error_names_the_jobs_partition(logs, tmp_path):
    trimmed = EventLog.create(tmp_path / "trimmed", partitions=1, clock="manual", segment_bytes=1024, retention="1m")
    trimmed.advance_clock(T0)
    for s in (0, 200):  # one segment each; retention deletes the first
        trimmed.append(0, [None], [json.dumps({"s": s, "pad": "x" * 1024})], arrival_times=[T0 + s * S])
    trimmed.advance_clock(T0 + 200 * S)
    trimmed.apply_retention()
    log = open_log(LogSet((logs.parts[0], ("late", trimmed.root))))
    with pytest.raises(RetentionError) as err:
        log.check_retained(2, 0)
    assert err.value.partition == 2 and "the job's partition 2" in err.value.problem
    assert err.value.first_available_offset == 1


def test_the_source_options_name_every_log_and_read_back(logs):
    options = source_options(logs)
    assert SourceOptions.parse(options).log_set == logs
    assert describe_location(logs).startswith("orders=") and ", payments=" in describe_location(logs)
    with pytest.raises(ConfigError, match="inputs is set beside event_log"):
        SourceOptions.parse(options | {"event_log": "/x"})
