"""The policy scan on the JVM (``java/PolicyScan.java``) held to the numpy core, event by event.

Random streams (seed in the test id) over several log partitions — idle ones too, bad
input, substreams or one unit, every late/out-of-order action, the early rule on and off,
a previous state per partition and a broker clock — judged by the JVM and by the core:
every event's action, reason, system time and watermark, every partition's next state and
its counts must be equal. The Python-worker stage gives the very same rows.
"""

from __future__ import annotations

from itertools import product

import numpy as np
import pyarrow.parquet as pq
import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import functions as F

from support import random_stream
from tidegate.errors import ConfigError
from tidegate.eventtime.policy import NONE, PartitionState, TimePolicy, apply_policy
from tidegate.spark.pipeline import policy_jvm
from tidegate.spark.pipeline.policy_stage import apply_policy_stage, small_rows, state_table

pytestmark = pytest.mark.spark
SCHEMA = "partition INT, offset BIGINT, arrival_us BIGINT, event_us BIGINT, unit STRING, bad STRING, value BIGINT"
PARTITIONS = [0, 1, 2, 3]  # partition 3 never has an event: it is idle in every case
MINUTE = 60_000_000

# (seed, over, out_of_order action, late action, early rule on, heartbeats through a shuffle)
CASES = [
    (seed, over, ooo_action, late_action, seed % 2 == 0, seed % 3 != 0)
    for seed, (over, ooo_action, late_action) in enumerate(
        product([False, True], ["adjust", "drop"], ["adjust", "drop"])
    )
]


def case_id(case) -> str:
    seed, over, ooo_action, late_action, early, shuffled = case
    return (
        f"seed{seed}-{'over' if over else 'one'}-ooo_{ooo_action}-late_{late_action}"
        f"-early_{'on' if early else 'off'}-{'heartbeats' if shuffled else 'by_log_partition'}"
    )


def batch_of(seed: int, over: bool):
    """Rows of a random stream (partitions 0–2), about 1 in 50 of them bad input, with
    units k0..k6 (a few NULL) when ``over``."""
    stream = random_stream(seed, n=1500, partitions=4, idle=1)
    rng = np.random.default_rng(seed)
    bad = rng.random(len(stream.event_us)) < 0.02
    rows, next_offset = [], {}
    for i in np.argsort(stream.arrival_us, kind="stable"):
        p = int(stream.partition[i])
        offset = next_offset[p] = next_offset.get(p, 100) + 1
        unit = None if not over or stream.value[i] < 3 else str(stream.key[i])
        rows.append(
            (
                p,
                offset,
                int(stream.arrival_us[i]),
                None if bad[i] else int(stream.event_us[i]),
                unit,
                "not JSON" if bad[i] else None,
                int(stream.value[i]),
            )
        )
    return rows


def previous_states(seed: int, rows, over: bool) -> dict[int, PartitionState]:
    """A carried state per partition (none for partition 0): an arrival term a little
    behind the batch, and maxS for some units — ahead of the batch, so events are out of order."""
    rng = np.random.default_rng(seed + 1000)
    first = min(r[2] for r in rows)
    states = {}
    for p in PARTITIONS[1:]:
        units = ["k1", "k4", "k9"] if over else [None]
        max_s = {u: first + int(rng.integers(-3, 3)) * MINUTE for u in units}
        states[p] = PartitionState(first - int(rng.integers(1, 10)) * MINUTE, first - MINUTE, max_s)
    return states


def core_outcomes(rows, states, policy, clock_us, over, partitions, by_partition=None):
    """What the core says: per event (partition, offset) → outcome; per partition its next state."""
    outcomes, next_states = {}, {}
    job_policy = policy
    for p in partitions:
        policy = (by_partition or {}).get(p, job_policy)
        mine = sorted((r for r in rows if r[0] == p and r[5] is None), key=lambda r: r[1])
        result, state = apply_policy(
            policy,
            np.array([r[3] for r in mine], dtype=np.int64),
            np.array([r[2] for r in mine], dtype=np.int64),
            states.get(p, PartitionState()),
            np.array([r[4] for r in mine], dtype=object) if over else None,
        )
        next_states[p] = state.advance_idle(clock_us, policy)
        for r, a, why, s, w in zip(
            mine, result.action, result.reason, result.system_us, result.watermark_us, strict=True
        ):
            outcomes[(p, r[1])] = (int(a), int(why), None if s == NONE else int(s), int(w))
    return outcomes, next_states


def run_stage(spark, tmp_path, rows, states, policy, clock_us, over, shuffled, on_jvm, by_partition=None):
    prev = tmp_path / "policy"
    prev.mkdir(exist_ok=True)
    pq.write_table(state_table(states), prev / "part-0.parquet")
    events = spark.createDataFrame(rows, SCHEMA)
    if not shuffled:
        events = events.repartition(3, "partition")
    return apply_policy_stage(spark, events, PARTITIONS, str(prev), policy, clock_us, "unit" if over else None,
                              by_log_partition=not shuffled, reject_column="bad", on_jvm=on_jvm,
                              by_partition=by_partition)  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_jvm_scan_judges_every_event_and_carries_every_state_as_the_core_does(spark, tmp_path, case):
    seed, over, ooo_action, late_action, early, shuffled = case
    policy = TimePolicy(
        out_of_order_tolerance_us=[0, 30_000_000, 2 * MINUTE][seed % 3],
        out_of_order_action=ooo_action,
        late_arrival_tolerance_us=[5_000_000, 2 * MINUTE][seed % 2],
        late_arrival_action=late_action,
        early_arrival_window_us=5 * MINUTE if early else None,
    )
    rows = batch_of(seed, over)
    states = previous_states(seed, rows, over)
    clock_us = max(r[2] for r in rows) + 30 * MINUTE  # the broker's clock moves every arrival term on
    result = run_stage(spark, tmp_path, rows, states, policy, clock_us, over, shuffled, on_jvm=True)
    # partition 3 reaches a task only as a heartbeat; without one the engine carries it forward
    reached = PARTITIONS if shuffled else PARTITIONS[:3]
    expected, expected_states = core_outcomes(rows, states, policy, clock_us, over, reached)

    got = {
        (r["partition"], r["offset"]): (r["action"], r["reason"], r["system_us"], r["watermark_us"])
        for r in result.where("_kind = 'e'").collect()
    }
    assert got == expected
    assert len({why for _, why, _, _ in got.values()}) >= 3 and len(got) > 1000  # the case judged real work
    got_states, counts, _ = small_rows(result, with_units=True)
    assert got_states == expected_states
    quarantined = {p: sum(1 for r in rows if r[0] == p and r[5] is not None) for p in reached}
    assert {p: c["quarantined"] for p, c in counts.items()} == quarantined
    assert {r["offset"] for r in result.where("_kind = 'q'").collect()} == {r[1] for r in rows if r[5] is not None}
    for p in reached:
        mine = [v for (q, _), v in expected.items() if q == p]
        assert counts[p]["judged"] == len(mine)
        assert counts[p]["dropped"] == sum(1 for a, _, _, _ in mine if a == 2)

    on_workers = run_stage(spark, tmp_path, rows, states, policy, clock_us, over, shuffled, on_jvm=False)
    assert sorted(map(tuple, result.drop("_metrics").collect()), key=repr) == sorted(
        map(tuple, on_workers.drop("_metrics").collect()), key=repr
    )
    assert small_rows(on_workers, with_units=True)[:2] == (got_states, counts)
    # bad input numbered in offset order per partition, and the first two of each come with the counts
    numbered = sorted((r["partition"], r["offset"], r["_bad_seq"]) for r in result.where("_kind = 'q'").collect())
    offsets = {p: sorted(o for q, o, _ in numbered if q == p) for p, _, _ in numbered}
    assert [n for _, _, n in numbered] == [offsets[p].index(o) for p, o, _ in numbered]
    assert max(n for _, _, n in numbered) >= 2  # some partition has more bad rows than come with the counts
    for stage in (result, on_workers):
        *_, bad = small_rows(
            stage, with_units=True, bad_input=[F.col("partition"), F.col("offset")], bad_per_partition=2
        )
        assert sorted(zip(*bad.to_pydict().values(), strict=True)) == sorted((p, o) for p, o, n in numbered if n < 2)


def test_the_jvm_scan_refuses_events_whose_arrival_goes_back_and_says_where(spark, tmp_path):
    rows = [(0, 1, 2 * MINUTE, 2 * MINUTE, None, None, 0), (0, 2, MINUTE, MINUTE, None, None, 0)]
    result = run_stage(spark, tmp_path, rows, {}, TimePolicy(), None, False, True, on_jvm=True)
    with pytest.raises(Py4JJavaError, match="events of log partition 0 are not in arrival order .offset 2"):
        result.collect()


def test_the_runner_setting_picks_the_jvm_or_python_workers_and_rejects_other_names(spark, monkeypatch):
    monkeypatch.delenv(policy_jvm.RUNNER_ENV, raising=False)
    assert policy_jvm.runs_on_jvm(spark) is True  # the session's jar holds the scan
    monkeypatch.setenv(policy_jvm.RUNNER_ENV, "python")
    assert policy_jvm.runs_on_jvm(spark) is False
    assert policy_jvm.runs_on_jvm(spark, "jvm") is True
    monkeypatch.setenv(policy_jvm.RUNNER_ENV, "numpy")
    with pytest.raises(ConfigError, match="TIDEGATE_POLICY_RUNNER='numpy' is not a policy runner"):
        policy_jvm.runs_on_jvm(spark)


@pytest.mark.parametrize("shuffled", [False, True], ids=["by_log_partition", "heartbeats"])
def test_partitions_of_an_input_with_its_own_policy_are_judged_by_it_on_both_runners(spark, tmp_path, shuffled):
    """Inputs that read their own logs: each input's partitions by its own policy, the idle one too."""
    job = TimePolicy(late_arrival_tolerance_us=5_000_000, out_of_order_tolerance_us=0)
    own = TimePolicy(
        late_arrival_tolerance_us=2 * MINUTE,
        late_arrival_action="drop",
        out_of_order_tolerance_us=30_000_000,
        out_of_order_action="drop",
        early_arrival_window_us=None,
    )
    by_partition = {2: own, 3: own}
    rows = batch_of(7, over=False)
    states = previous_states(7, rows, over=False)
    clock_us = max(r[2] for r in rows) + 30 * MINUTE
    reached = PARTITIONS if shuffled else PARTITIONS[:3]
    expected, expected_states = core_outcomes(rows, states, job, clock_us, False, reached, by_partition)
    unlike = core_outcomes(rows, states, job, clock_us, False, reached)[0]
    assert any(expected[k] != unlike[k] for k in expected if k[0] == 2)  # the policies tell events apart
    for on_jvm in (True, False):
        result = run_stage(spark, tmp_path, rows, states, job, clock_us, False, shuffled, on_jvm, by_partition)
        got = {
            (r["partition"], r["offset"]): (r["action"], r["reason"], r["system_us"], r["watermark_us"])
            for r in result.where("_kind = 'e'").collect()
        }
        assert got == expected, "jvm" if on_jvm else "python workers"
        assert small_rows(result, with_units=True)[0] == expected_states


@pytest.mark.parametrize("on_jvm", [True, False], ids=["jvm", "python_workers"])
def test_events_arriving_before_a_clock_already_used_are_judged_at_it_on_both_runners(spark, tmp_path, on_jvm):
    """The batch before was judged with a clock ahead of arrivals still to come (a Kafka topic
    whose brokers' clock lagged this host's by more than the skew): both runners judge those
    events as arriving at that clock, as the core does, and none is kept behind its watermark."""
    policy = TimePolicy(late_arrival_tolerance_us=5_000_000, out_of_order_tolerance_us=0)
    rows = batch_of(5, over=False)
    first = min(r[2] for r in rows)
    clock_us = first + 10 * MINUTE  # ahead of the batch's first ten minutes of arrivals
    states = {p: PartitionState().advance_idle(clock_us, policy) for p in PARTITIONS}
    expected, expected_states = core_outcomes(rows, states, policy, clock_us, False, PARTITIONS)
    unclamped = core_outcomes(rows, {}, policy, clock_us, False, PARTITIONS)[0]
    assert sum(expected[k] != unclamped[k] for k in expected) > 50  # the clock decided many events
    result = run_stage(spark, tmp_path, rows, states, policy, clock_us, False, True, on_jvm)
    got = {
        (r["partition"], r["offset"]): (r["action"], r["reason"], r["system_us"], r["watermark_us"])
        for r in result.where("_kind = 'e'").collect()
    }
    assert got == expected
    assert small_rows(result, with_units=True)[0] == expected_states
    assert all(s >= clock_us - 5_000_000 for a, _, s, _ in got.values() if a != 2)


def test_the_jvm_scan_passes_every_column_of_every_type_through_unchanged(spark, tmp_path):
    """The scan reads and writes Spark's internal rows: a column of any type an event carries
    — text in any script, times, decimals, nested values, NULLs — comes out as it went in,
    on event rows and on bad input alike, and as the Python-worker stage gives it."""
    columns = [
        ("partition", "INT"),
        ("offset", "BIGINT"),
        ("arrival_us", "BIGINT"),
        ("event_us", "BIGINT"),
        ("unit", "STRING"),
        ("bad", "STRING"),
        ("at", "TIMESTAMP"),
        ("day", "DATE"),
        ("reading", "DOUBLE"),
        ("price", "DECIMAL(12,3)"),
        ("ok", "BOOLEAN"),
        ("raw", "BINARY"),
        ("tags", "ARRAY<STRING>"),
        ("attrs", "MAP<STRING, BIGINT>"),
        ("place", "STRUCT<lat: DOUBLE, name: STRING>"),
    ]
    rows = spark.sql(f"""
        SELECT * FROM VALUES
          (0, 1, {MINUTE}, {MINUTE}, 'k1', NULL, TIMESTAMP'2026-11-27 07:00:00.123456', DATE'2026-11-27',
           21.5D, 1234.567BD, true, X'00FF10', array('a', 'ü', NULL), map('x', 1L),
           named_struct('lat', 1.5D, 'name', 'Zürich')),
          (0, 2, {2 * MINUTE}, {MINUTE}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
          (1, 5, {MINUTE}, {3 * MINUTE}, 'k2', 'not JSON', TIMESTAMP'1970-01-01 00:00:00', DATE'1900-01-01',
           -0.0D, -0.001BD, false, X'', array(), map('y', CAST(NULL AS BIGINT)),
           named_struct('lat', CAST(NULL AS DOUBLE), 'name', '東京'))
        AS t({", ".join(name for name, _ in columns)})
    """).selectExpr(*[f"CAST({name} AS {typ}) AS {name}" for name, typ in columns])
    prev = tmp_path / "policy"
    prev.mkdir()
    pq.write_table(state_table({}), prev / "part-0.parquet")
    judged = {on_jvm: apply_policy_stage(spark, rows.repartition(2, "partition"), [0, 1], str(prev), TimePolicy(),
                                         None, "unit", by_log_partition=True, reject_column="bad", on_jvm=on_jvm)
              for on_jvm in (True, False)}  # fmt: skip
    names = [name for name, _ in columns]
    expected = sorted(map(tuple, rows.collect()), key=repr)
    assert sorted(map(tuple, judged[True].where("_kind IN ('e', 'q')").select(*names).collect()), key=repr) == expected
    assert [r["offset"] for r in judged[True].where("_kind = 'q'").collect()] == [5]
    assert judged[True].schema == judged[False].schema
    assert sorted(map(tuple, judged[True].drop("_metrics").collect()), key=repr) == sorted(
        map(tuple, judged[False].drop("_metrics").collect()), key=repr
    )
