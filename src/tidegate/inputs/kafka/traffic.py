"""Device traffic for a Kafka topic: the event log generator's fleet, on a seconds scale.

A broker stamps arrival times as records come, so traffic is written in real time at a
rate; the disorder the generator injects (skewed clocks, network delay, late and early
events, bursts, a silent partition, malformed payloads) is scaled to seconds, matching
``jobs/device_fleet_seconds.yaml`` (late-arrival tolerance 2 s, 5 s windows).
"""

from __future__ import annotations

from tidegate.inputs.event_log.generator import GeneratorConfig, GeneratorSummary, generate
from tidegate.inputs.kafka.producer import TopicWriter

_S = 1_000_000


def kafka_traffic(writer: TopicWriter, *, events: int, devices: int = 60, rate_per_s: float = 1_000.0, seed: int = 0,
                  progress: bool = False) -> GeneratorSummary:  # fmt: skip
    config = GeneratorConfig(
        devices=devices, partitions=writer.partitions, events=events, seed=seed, mode="realtime", rate_per_s=rate_per_s,
        clock_skew_max_us=300_000, delay_median_us=50_000, late_bound_us=2 * _S, burst_duration_us=500_000,
        idle_partitions=1 if writer.partitions > 2 else 0,
    )  # fmt: skip
    return generate(writer, config, progress=progress)
