"""Benchmark: the heuristic job watermark against percentile watermarks on the demo's traffic.

    .venv/bin/python bench/bench_percentile.py [--events 200000] [--rate 50] [--seed 7] [--step-ms 1000]

The demo's traffic (its defaults: 200,000 events at 50/s from 60 devices over 4 partitions,
one of them idle for a while, 1 % of the readings buffered offline and late, 0.2 % from
clocks far ahead) goes through the event-time
core alone — the device fleet's policy (late 2 m, out-of-order 30 s, substreams per device)
in micro-batches of ``--step-ms`` of arrival time — and fleet-wide tumbling 1-minute windows
are closed on:

* the heuristic watermark: the engine's frontier for such windows (min over partitions of
  their arrival term), which no kept event can fall behind;
* percentile watermarks over the units (partition, device): the time by which p % of them
  have their watermark (:mod:`tidegate.eventtime.percentile`).

Per mode: emission latency (broker clock when the frontier passes a window's end − that
end; median and 95th percentile), kept events behind the watermark (the side output), and
windows whose emitted count equals their complete count. Not a test: it measures a choice.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import results_page
from tidegate.eventtime.percentile import behind, percentile_watermark_us
from tidegate.eventtime.policy import NONE, PartitionState, TimePolicy, apply_policy
from tidegate.eventtime.watermarks import arrival_floor_us
from tidegate.inputs.event_log.generator import GeneratorConfig
from tidegate.inputs.event_log.traffic import WELL_FORMED, synthesize

MINUTE = 60_000_000
PERCENTILES = (99, 95, 90, 75, 50)


def frontiers(traffic, policy: TimePolicy, step_us: int):
    """Per micro-batch: its events' system times (kept), the broker clock, and the
    frontier of each mode after it."""
    ok = traffic.malformed == WELL_FORMED
    partitions = sorted(set(traffic.partition.tolist()))
    states = {p: PartitionState() for p in partitions}
    step_of = (traffic.arrival_us - traffic.arrival_us[0]) // step_us
    steps = []
    for step in np.unique(step_of):
        idx = np.flatnonzero((step_of == step) & ok)
        clock = int(traffic.arrival_us[step_of == step].max())
        kept = []
        for p in partitions:
            mine = idx[traffic.partition[idx] == p]
            if len(mine):
                result, states[p] = apply_policy(
                    policy, traffic.event_us[mine], traffic.arrival_us[mine], states[p], units=traffic.device[mine]
                )
                kept.append(result.system_us[result.kept])
            states[p] = states[p].advance_idle(clock, policy)
        units = [st.unit_watermark_us(k, policy) for st in states.values() for k in st.max_system_us]
        marks = {"heuristic": arrival_floor_us(list(states.values()))}
        for q in PERCENTILES:
            marks[f"p{q}"] = percentile_watermark_us(units, q) if units else int(NONE)
        steps.append((np.concatenate(kept) if kept else np.zeros(0, np.int64), clock, marks))
    return steps


def measure(steps, mode: str) -> dict:
    complete: dict[int, int] = {}
    emitted: dict[int, int] = {}
    closed_at: dict[int, int] = {}
    held: dict[int, int] = {}  # window end → events counted before it closed
    behind_total = kept_total = 0
    before = int(NONE)
    for system, clock, marks in steps:
        now = marks[mode]
        late = behind(system, before)
        behind_total += int(late.sum())
        kept_total += len(system)
        ends = (system // MINUTE + 1) * MINUTE
        for end, is_late in zip(ends.tolist(), late.tolist(), strict=True):
            complete[end] = complete.get(end, 0) + 1
            if not is_late and end not in closed_at:
                held[end] = held.get(end, 0) + 1
        if now != NONE:
            for end in sorted(e for e in held if e <= now and e not in closed_at):
                closed_at[end] = clock
                emitted[end] = held[end]
        before = now if before == NONE else max(before, now)
    latencies = np.array([closed_at[e] - e for e in closed_at], dtype=np.int64) / 1e6
    exact = sum(emitted.get(e) == n for e, n in complete.items() if e in closed_at)
    return {
        "median_s": float(np.median(latencies)) if len(latencies) else float("nan"),
        "p95_s": float(np.percentile(latencies, 95)) if len(latencies) else float("nan"),
        "behind": behind_total,
        "behind_pct": 100 * behind_total / max(kept_total, 1),
        "exact_pct": 100 * exact / max(len(closed_at), 1),
        "windows": len(closed_at),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rate", type=float, default=50.0, help="fleet events per second (the demo's)")
    parser.add_argument("--step-ms", type=int, default=1_000)
    args = results_page.parse_args(parser, argv)
    config = GeneratorConfig(
        devices=60, partitions=4, events=args.events, seed=args.seed, rate_per_s=args.rate, idle_partitions=1
    )
    traffic = synthesize(config, start_us=1_767_225_600_000_000)  # 2026-01-01
    policy = TimePolicy.from_durations(out_of_order="30s", late="2m")
    steps = frontiers(traffic, policy, args.step_ms * 1_000)
    print(f"{args.events:,} events, seed {args.seed}, micro-batches of {args.step_ms} ms of arrival time")
    print("| watermark | median latency | p95 latency | kept events behind it (side output) | windows exact |")
    print("|---|---|---|---|---|")
    for mode in ["heuristic"] + [f"p{q}" for q in PERCENTILES]:
        m = measure(steps, mode)
        name = "heuristic (min)" if mode == "heuristic" else f"percentile {mode[1:]} %"
        print(
            f"| {name} | {m['median_s']:.1f} s | {m['p95_s']:.1f} s | {m['behind']:,} ({m['behind_pct']:.2f} %) "
            f"| {m['exact_pct']:.1f} % of {m['windows']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
