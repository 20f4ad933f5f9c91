"""Benchmark: replay throughput and measured catch-up vs both estimates (model and rehearsal).

    .venv/bin/python bench/bench_catchup.py [--events 200000] [--gap-events 100000] [--batch 50000]

On a generated device fleet in a fresh platform (real drivers, real control database):

1. **history** — the job runs over the first part of the log and stops; its batches are
   what the model is fitted to (per-batch and per-event cost);
2. more traffic arrives while it is stopped (the gap);
3. **resume** — estimate (model, rehearsal), then restart ``last-stopped`` (checkpoint
   reused, reads the gap) and measure request → caught up;
4. **replay** — estimate, then restart ``custom`` at where the output is final (a fresh
   checkpoint reading the look-back) and measure the same.

Prints replay throughput (events/s while catching up) and each estimate's relative error
against the measured catch-up (bar ≤ 25 %, aim ≤ 10 %). Not a test: numbers depend on the
machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import yaml

import results_page
from scratch import scratch
from tidegate.examples import DEMO_JOB, DEMO_SPEC
from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.generator import GeneratorConfig, generate
from tidegate.runtime.estimates.estimate import model_estimate
from tidegate.runtime.estimates.rehearsal import rehearse
from tidegate.runtime.jobs.config import load_config
from tidegate.runtime.jobs.controller import Controller

REPO = Path(__file__).resolve().parents[1]

JOB = DEMO_JOB


def say(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def wait_caught_up(c: Controller, run_id: int, timeout_s: float = 3600) -> None:
    deadline = time.time() + timeout_s
    shown, tty = None, sys.stderr.isatty()
    while time.time() < deadline:
        run = c.db.run(run_id)
        if run.caught_up_at is not None:
            if shown is not None and tty:
                print(file=sys.stderr)
            return
        if run.status in ("failed", "lost", "stopped"):
            raise SystemExit(f"run {run_id} {run.status}: {run.status_detail}")
        line = f"[bench]   run {run_id}: {run.input_events or 0:,} events read, backlog {run.backlog_events}"
        if line != shown:  # on a terminal in place; in a log file one line per change
            print(f"\r{line}" if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)
            shown = line
        time.sleep(1)
    raise SystemExit(f"run {run_id} did not catch up in {timeout_s} s")


def measure(c: Controller, label: str, mode: str, at=None) -> dict:
    from tidegate.runtime.jobs import planning

    _, spec = c.spec(JOB)
    plan = planning.plan(c, JOB, "east", mode, spec=spec, at_us=at, accept_partial=True)
    model = model_estimate(c, JOB, "east", plan=plan, spec=spec, rate_eps=0.0)
    say(f"{label}: {model.describe()}")
    say(f"{label}: rehearsing (the job with start mode now, scratch checkpoint and sink)")
    rehearsal = rehearse(c, JOB, "east")
    say(f"{label}: {rehearsal.describe()}")
    result = c.start(JOB, "east", mode=mode, at=at)
    say(f"{label}: run {result.run_id} — {result.plan.checkpoint} checkpoint")
    wait_caught_up(c, result.run_id)
    print(file=sys.stderr)
    run = c.db.run(result.run_id)
    c.stop(JOB, "east")
    reading = (run.caught_up_at - run.first_batch_at) if run.first_batch_at else None
    return {
        "label": label,
        "events": int(run.input_events or 0),
        "actual_s": run.catch_up_s,
        "model_s": model.seconds,
        "rehearsal_s": rehearsal.seconds,
        "reading_s": reading,
        "throughput": (run.input_events or 0) / reading if reading else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000, help="history before the stop")
    ap.add_argument("--gap-events", type=int, default=100_000, help="arriving while the job is stopped")
    ap.add_argument("--batch", type=int, default=50_000, help="max events per micro-batch")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--work", type=Path)
    args = results_page.parse_args(ap, argv)
    with scratch(args.work, "catchup") as work:
        event_log = work / "event-log"
        log = EventLog.create(event_log, partitions=args.partitions, clock="manual")
        say(f"generating {args.events:,} events")
        generate(
            log,
            GeneratorConfig(devices=60, partitions=args.partitions, events=args.events, seed=5, rate_per_s=200.0),
            progress=True,
        )
        spec = yaml.safe_load((REPO / "jobs" / DEMO_SPEC).read_text())
        spec["source"] = {"event_log": str(event_log), "max_events_per_batch": args.batch}
        spec_path = work / "fleet.yaml"
        spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
        # the drivers this benchmark starts read the same settings from the environment
        os.environ.update(
            {
                "TIDEGATE_HOME": str(work),
                "TIDEGATE_EVENT_LOG": str(event_log),
                "TIDEGATE_CONTROL_DB": f"sqlite:///{work}/c.db",
            }
        )
        c = Controller(load_config(), actor="bench")
        c.deploy(spec_path)
        first = min(i.first_arrival_us for i in log.describe() if i.first_arrival_us)
        say("history: the job reads the first part of the log (the model is fitted to these batches)")
        start = c.start(JOB, "east", mode="custom", at=first + spec_lookback(c))
        wait_caught_up(c, start.run_id)
        print(file=sys.stderr)
        c.stop(JOB, "east")
        say(f"the gap: {args.gap_events:,} more events arrive while the job is stopped")
        generate(
            log,
            GeneratorConfig(devices=60, partitions=args.partitions, events=args.gap_events, seed=6, rate_per_s=200.0),
            progress=True,
        )
        results = [measure(c, "resume (checkpoint reused, reads the gap)", "last-stopped")]
        lineage = c.db.lineages(JOB, "east")[-1]
        results.append(
            measure(c, "replay (fresh checkpoint, reads the look-back)", "custom", at=lineage.emitted_through_us)
        )
        print()
        print(
            f"{'start':<48}{'events':>9}{'measured':>10}{'model':>9}{'err':>7}{'rehearsal':>11}{'err':>7}"
            f"{'replay ev/s':>13}"
        )
        for r in results:
            print(
                f"{r['label']:<48}{r['events']:>9,}{_s(r['actual_s']):>10}{_s(r['model_s']):>9}"
                f"{_err(r['model_s'], r['actual_s']):>7}{_s(r['rehearsal_s']):>11}"
                f"{_err(r['rehearsal_s'], r['actual_s']):>7}{_n(r['throughput']):>13}"
            )
        print(
            "error = (estimate − measured) / measured; bar |error| <= 25 %, aim <= 10 %. The rehearsal times a "
            "replay of one look-back, so it estimates the replay row; the model estimates both."
        )
        return 0


def spec_lookback(c: Controller) -> int:
    return c.spec(JOB)[1].lookback_us


def _s(v) -> str:
    return "-" if v is None else f"{v:.1f}s"


def _n(v) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _err(estimate, actual) -> str:
    if estimate is None or not actual:
        return "-"
    return f"{(estimate - actual) / actual * 100:+.0f}%"


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
