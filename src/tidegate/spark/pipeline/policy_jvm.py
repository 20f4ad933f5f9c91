"""The policy stage's scan on the executors' JVM (``java/PolicyScan.java``), beside the JVM reader.

The numpy core (:func:`tidegate.eventtime.policy.apply_policy`) in Python workers costs an
Arrow round trip of every event out of the JVM and back; the scan itself is a loop in
offset order per log partition with a carried state, which the JVM runs where the rows
already are. It returns the very rows the Python-worker path returns (events, bad input,
next state, counts, told apart by ``_kind``), so everything after the policy stage is the
same code. The core stays the executable spec: the tests hold this path to it event by
event, state by state.

``$TIDEGATE_POLICY_RUNNER`` picks the runner: ``auto`` (the default: the JVM when the jar is
on the session), ``jvm`` (fail if it is not), or ``python`` (the core in Python workers).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from tidegate.errors import ConfigError
from tidegate.eventtime.policy import NONE, PartitionState, TimePolicy
from tidegate.spark.gateway import jvm_class
from tidegate.spark.pipeline import java_source

POLICY_SCAN = "tidegate.jvm.PolicyScan"
RUNNER_ENV = "TIDEGATE_POLICY_RUNNER"  # auto (default) | jvm | python
RUNNERS = ("auto", "jvm", "python")


def runs_on_jvm(spark: SparkSession, runner: str | None = None) -> bool:
    """Whether this session's jobs judge events on the JVM: ``runner``, else the setting."""
    choice = (runner or os.environ.get(RUNNER_ENV, "auto")).strip().lower()
    if choice not in RUNNERS:
        raise ConfigError(f"{RUNNER_ENV}={choice!r} is not a policy runner", "use auto, jvm or python")
    if choice == "python":
        return False
    if java_source.loadable(spark, POLICY_SCAN):
        return True
    if choice == "jvm":
        raise ConfigError(
            f"{RUNNER_ENV}=jvm but this Spark session cannot load {POLICY_SCAN}",
            "build the jar (python -m tidegate.spark.pipeline.java_source, needs a JDK) before the session "
            f"starts, or set {RUNNER_ENV}=python to judge events in Python workers",
        )
    return False


def states_json(states: dict[int, PartitionState]) -> str:
    """The previous states as ``PolicyScan.parseStates`` reads them (null: none yet)."""

    def opt(v: int) -> int | None:
        return None if v == NONE else int(v)

    return json.dumps({
        "partitions": [[p, opt(s.arrival_watermark_us), opt(s.last_arrival_us)] for p, s in sorted(states.items())],
        "units": [[p, unit, int(v)] for p, s in sorted(states.items()) for unit, v in s.max_system_us.items()],
    })  # fmt: skip


def judge_on_jvm(
    spark: SparkSession,
    events: DataFrame,
    out_schema: StructType,
    states: dict[int, PartitionState],
    policy: TimePolicy,
    clock_us: int | None,
    unit_column: str | None,
    reject_column: str | None,
    by_partition: Mapping[int, TimePolicy] | None = None,
) -> DataFrame:
    """``events`` (whole log partitions per Spark partition) judged by ``PolicyScan``, as
    ``out_schema`` rows; ``states`` holds the previous state of every partition it may meet;
    ``by_partition`` the partitions judged by another policy than ``policy``."""
    early = policy.early_arrival_window_us
    jdf = jvm_class(spark, POLICY_SCAN).apply(
        events._jdf, out_schema.json(), states_json(states),
        policy.out_of_order_tolerance_us, policy.out_of_order_action == "drop",
        policy.late_arrival_tolerance_us, policy.late_arrival_action == "drop",
        early is not None, 0 if early is None else early,
        clock_us is not None, 0 if clock_us is None else clock_us,
        unit_column, reject_column, policies_json(by_partition or {}),
    )  # fmt: skip
    return DataFrame(jdf, spark)


def policies_json(by_partition: Mapping[int, TimePolicy]) -> str:
    """Per partition judged by its own policy, its tolerances as ``PolicyScan.parsePolicies`` reads
    them: ``{"p": [ooo, oooDrop, late, lateDrop, early or null]}``."""
    return json.dumps({
        str(p): [pol.out_of_order_tolerance_us, pol.out_of_order_action == "drop", pol.late_arrival_tolerance_us,
                 pol.late_arrival_action == "drop", pol.early_arrival_window_us]
        for p, pol in sorted(by_partition.items())
    })  # fmt: skip
