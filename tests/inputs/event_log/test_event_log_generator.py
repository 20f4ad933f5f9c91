"""The traffic generator: reproducible by seed, with the disorder it was asked for.

The late/early/malformed checks read the events back from the log and judge each
payload against its arrival time, so they test what was stored, not the summary.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from conftest import MINUTE, SECOND, FakeClock
from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us
from tidegate.inputs.event_log import EventLog, partition_for_key
from tidegate.inputs.event_log.generator import DEFAULT_START_US, GeneratorConfig, generate
from tidegate.inputs.event_log.segments import PartitionIndex, partition_dir_name

SMALL = dict(devices=30, partitions=3, events=6_000, chunk_events=2_000)


def _generated(tmp_path, name, **overrides) -> tuple[EventLog, object]:
    log = EventLog.create(tmp_path / name, partitions=overrides.get("partitions", 3), clock="manual")
    summary = generate(log, GeneratorConfig(**{**SMALL, **overrides}))
    return log, summary


def _events(log: EventLog, p: int) -> list[tuple]:
    t = log.read(p, 0, log.end_offset(p))
    return list(
        zip(
            t.column("key").to_pylist(),
            t.column("payload").to_pylist(),
            t.column("arrival_time").cast(pa.int64()).to_pylist(),
            strict=True,
        )
    )


def test_same_seed_same_events_per_partition_and_another_seed_differs(tmp_path):
    a, _ = _generated(tmp_path, "a", seed=11)
    b, _ = _generated(tmp_path, "b", seed=11)
    c, _ = _generated(tmp_path, "c", seed=12)
    for p in range(3):
        assert _events(a, p) == _events(b, p)
    assert all(_events(a, p) != _events(c, p) for p in range(3))


def test_backfill_routes_by_key_sorts_by_arrival_and_advances_a_manual_clock(tmp_path):
    log, summary = _generated(tmp_path, "event_log", seed=3)
    assert summary.events == 6_000 and sum(summary.per_partition) == 6_000
    last_arrival = 0
    for p in range(3):
        events = _events(log, p)
        assert len(events) == summary.per_partition[p]
        assert all(partition_for_key(k, 3) == p for k, _, _ in events)
        arrivals = [a for _, _, a in events]
        assert arrivals == sorted(arrivals) and arrivals[0] >= DEFAULT_START_US
        last_arrival = max(last_arrival, arrivals[-1])
    assert log.clock_now_us() == last_arrival == summary.last_arrival_us
    # a second run continues after what the log holds instead of failing
    again = generate(log, GeneratorConfig(**SMALL, seed=4))
    assert again.first_arrival_us > last_arrival


def test_injected_disorder_and_bad_payloads_match_the_configured_fractions(tmp_path):
    n = 20_000
    log, summary = _generated(
        tmp_path, "event_log", events=n, late_fraction=0.05, early_fraction=0.03, malformed_fraction=0.06, seed=5
    )
    late = early = not_json = no_time = bad_time = 0
    for p in range(3):
        for _, payload, arrival in _events(log, p):
            try:
                doc = json.loads(payload)
            except json.JSONDecodeError:
                not_json += 1
                continue
            if "eventTime" not in doc:
                no_time += 1
                continue
            try:
                event = parse_time_us(doc["eventTime"])
            except Exception:
                bad_time += 1
                continue
            assert set(doc) == {"deviceId", "eventTime", "temperature", "humidity"}
            late += arrival - event > 5 * MINUTE
            early += event - arrival > 5 * MINUTE
    malformed = not_json + no_time + bad_time
    # what is stored is exactly what the summary reports …
    assert (late, early, malformed) == (summary.late, summary.early, summary.malformed)
    assert (not_json, no_time, bad_time) == (summary.not_json, summary.no_event_time, summary.bad_event_time)
    # … and close to what was asked (binomial spread is well under these margins)
    assert abs(malformed / n - 0.06) < 0.01
    assert min(not_json, no_time, bad_time) > 0.2 * malformed  # all three kinds, roughly evenly
    well_formed = n - malformed
    assert abs(late / well_formed - 0.05) < 0.01
    assert abs(early / well_formed - 0.03) < 0.01


def test_without_injection_no_event_crosses_the_late_or_early_bound(tmp_path):
    log, summary = _generated(tmp_path, "event_log", late_fraction=0, early_fraction=0, malformed_fraction=0, seed=9)
    lags = [a - parse_time_us(json.loads(pl)["eventTime"]) for p in range(3) for _, pl, a in _events(log, p)]
    assert summary.late == summary.early == summary.malformed == 0
    assert -5 * MINUTE <= min(lags) and max(lags) <= 5 * MINUTE
    assert min(lags) < 0 < max(lags)  # skewed device clocks: some readings are ahead of arrival


def test_idle_partitions_fall_silent_for_the_configured_share_of_the_run(tmp_path):
    log, summary = _generated(tmp_path, "event_log", idle_partitions=1, idle_fraction=0.4, seed=2)
    span = summary.last_arrival_us - summary.first_arrival_us
    gaps = {p: np.diff([a for _, _, a in _events(log, p)]).max() for p in range(3)}
    assert gaps[2] >= 0.35 * span  # the last partition is the idle one
    assert gaps[0] < 0.05 * span and gaps[1] < 0.05 * span
    assert summary.events == 6_000  # the silenced events went to other devices


def test_an_idle_fraction_of_one_means_the_partition_never_receives_events(tmp_path):
    log, summary = _generated(tmp_path, "event_log", idle_partitions=1, idle_fraction=1.0, seed=2)
    assert summary.per_partition[2] == 0 and log.end_offset(2) == 0
    assert sum(summary.per_partition) == 6_000


def test_bursts_compress_some_stretches_of_arrivals(tmp_path):
    log, bursty = _generated(tmp_path, "bursty", bursts=3, burst_factor=10, burst_duration_us=SECOND // 2, seed=1)
    _, calm = _generated(tmp_path, "calm", bursts=0, seed=1)
    span = lambda s: s.last_arrival_us - s.first_arrival_us  # noqa: E731
    # 6000 events at 200/s take 30 s; each 0.5 s burst at 10× carries 5 s worth of them
    assert span(calm) == pytest.approx(30 * SECOND, rel=0.01)
    assert span(bursty) == pytest.approx(30 * SECOND - 3 * 9 * SECOND // 2, rel=0.02)
    arrivals = np.sort([a for p in range(3) for _, _, a in _events(log, p)])
    busiest = max(np.searchsorted(arrivals, arrivals + SECOND // 2) - np.arange(len(arrivals)))
    assert busiest > 800  # ~1000 in a burst's half second, against ~100 outside


def test_realtime_mode_paces_small_batches_on_the_wall_clock(tmp_path):
    clock = FakeClock()
    log = EventLog.create(tmp_path / "event-log", partitions=3, now_us=clock)
    config = GeneratorConfig(
        **{**SMALL, "mode": "realtime", "rate_per_s": 1000, "duration_us": 2 * SECOND, "bursts": 0}
    )
    t0 = clock()
    summary = generate(log, config, now_us=clock, sleep=lambda s: clock.advance(int(s * SECOND)))
    assert summary.events == 2_000 == sum(log.end_offset(p) for p in range(3))
    indexes = [PartitionIndex(log.root / partition_dir_name(p), p) for p in range(3)]
    for ix in indexes:
        ix.refresh()
    assert sum(len(ix.frames()) for ix in indexes) > 30  # ~20 ticks × 3 partitions, one frame each
    arrivals = [a for p in range(3) for _, _, a in _events(log, p)]
    assert t0 <= min(arrivals) and max(arrivals) <= t0 + 2 * SECOND + config.batch_interval_us
    assert len(set(arrivals)) >= 15  # ~20 batches of 100 ms, each stamped when appended


def test_realtime_mode_never_sleeps_a_negative_time_when_an_arrival_falls_due_between_two_clock_reads(tmp_path):
    # a real clock moves between any two reads: here by 7 ms each, so an arrival not yet due
    # at the first read is past at the second (the generator died with "sleep length must be
    # non-negative" after about a minute of live traffic)
    clock = FakeClock()

    def ticking() -> int:
        clock.advance(7_000)
        return clock()

    def sleep(seconds: float) -> None:
        assert seconds >= 0
        clock.advance(int(seconds * SECOND))

    log = EventLog.create(tmp_path / "event-log", partitions=3, now_us=ticking)
    config = GeneratorConfig(**{**SMALL, "mode": "realtime", "rate_per_s": 20, "duration_us": 30 * SECOND, "bursts": 0})
    summary = generate(log, config, now_us=ticking, sleep=sleep)
    assert summary.events == 600 == sum(log.end_offset(p) for p in range(3))


def test_realtime_mode_needs_a_wall_clock_event_log(tmp_path):
    log = EventLog.create(tmp_path / "event-log", partitions=3, clock="manual")
    with pytest.raises(ConfigError, match="wall-clock event log"):
        generate(log, GeneratorConfig(**SMALL, mode="realtime", duration_us=SECOND))


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"late_fraction": 1.5}, "late_fraction"),
        ({"late_fraction": 0.6, "early_fraction": 0.6}, "exceeds 1"),
        ({"idle_partitions": 3}, "idle_partitions"),
        ({"clock_skew_max_us": 2 * MINUTE}, "skew"),
        ({"mode": "turbo"}, "mode"),
        ({"rate_per_s": 0}, "rate"),
    ],
)
def test_config_is_validated_with_a_reason(overrides, message):
    with pytest.raises(ConfigError, match=message):
        GeneratorConfig(**{**SMALL, **overrides})


def test_generator_refuses_an_event_log_with_another_partition_count(tmp_path):
    log = EventLog.create(tmp_path / "event-log", partitions=2, clock="manual")
    with pytest.raises(ConfigError, match="3 partitions but .* has 2"):
        generate(log, GeneratorConfig(**SMALL))
