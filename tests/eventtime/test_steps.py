"""Steps in the core: a window over a window, each step closing on the same job watermark.

A later step reads the rows an earlier one emitted, timed by their System.Timestamp (a window
row by its end). The core's window ``step`` run as a chain — the first step's rows of a
micro-batch entering the second step's buffer, both stepped on the same ``(previous, current)``
frontiers — must give the rows one batch gives, however the stream is cut: every row the first
step emits at a frontier ``W`` is timed before ``W``, so the second step has it before any of
its own windows that hold it can close.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import yaml

from support import TRANSCRIPTS
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.eventtime.windows import START_INCLUSIVE, HoppingWindow, TumblingWindow, step

MIN = 60_000_000
GOLDEN = yaml.safe_load((TRANSCRIPTS / "steps_golden.yaml").read_text())


def window_counts(window, s, keys, prev, now, buffer):
    """One step of a counting window over (time, key) rows: (emitted (end, key, count) rows,
    the next buffer)."""
    all_s = np.concatenate([buffer[0], s]).astype(np.int64)
    all_k = np.concatenate([buffer[1], keys]).astype(np.int64)
    st = step(window, all_s, prev, now, all_k)
    counts = Counter(zip(st.emit.end_us.tolist(), all_k[st.emit.event_index].tolist(), strict=True))
    return counts, (all_s[st.keep], all_k[st.keep])


def chain(first, second, s, keys, frontiers):
    """Counts per ``first`` window and key, then per ``second`` window of those rows: the
    second step's rows as Counter((end, total count, windows)), over the frontier sequence."""
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    buffers = [empty, empty]
    out: Counter = Counter()
    values: dict = {}
    prev, taken = frontiers[0][0], 0
    for now, upto in frontiers[1:]:
        rows, buffers[0] = window_counts(first, s[taken:upto], keys[taken:upto], prev, now, buffers[0])
        taken = upto
        ends = np.array([e for (e, _), _ in rows.items()], dtype=np.int64)
        ids = np.arange(len(values), len(values) + len(rows), dtype=np.int64)  # a row's id: its value's key
        values.update(zip(ids.tolist(), rows.values(), strict=True))
        emitted, buffers[1] = window_counts(second, ends, ids, prev, now, (buffers[1][0], buffers[1][1]))
        # the second step groups all rows: count rows and sum their counts per window end
        per_end: dict = {}
        for (end, row_id), n in emitted.items():
            windows, total = per_end.get(end, (0, 0))
            per_end[end] = (windows + n, total + values[row_id])
        out.update((end, total, windows) for end, (windows, total) in per_end.items())
        prev = now
    return out


def test_the_window_over_window_transcript_through_the_core():
    case = next(c for c in GOLDEN["cases"] if c["name"] == "window_over_window")
    day = GOLDEN["date"]
    s = np.array([parse_time_us(f"{day}T{t}:00Z") for t, _, _ in GOLDEN["readings"]], dtype=np.int64)
    keys = np.array([int(d[1:]) for _, d, _ in GOLDEN["readings"]], dtype=np.int64)
    order = np.argsort(s, kind="stable")
    got = chain(
        TumblingWindow(10 * MIN),
        TumblingWindow(60 * MIN),
        s[order],
        keys[order],
        [(s.min() - 1, 0), (s.max() + 2 * 60 * MIN, len(s))],
    )
    expected = Counter((parse_time_us(f"{day}T{e}:00Z"), total, windows) for _, e, windows, total, _ in case["expect"])
    assert got == expected, {format_time_us(e): v for (e, *v) in got}


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(
    "second",
    [TumblingWindow(60 * MIN), HoppingWindow(60 * MIN, 20 * MIN), TumblingWindow(60 * MIN, edges=START_INCLUSIVE)],
    ids=["tumbling", "hopping", "start-inclusive"],
)
def test_any_cut_into_micro_batches_gives_the_one_batch_rows(seed, second):
    rng = np.random.default_rng(seed)
    n = 300
    s = np.sort(rng.integers(0, 6 * 60, n) * MIN + np.where(rng.random(n) < 0.5, 0, rng.integers(0, MIN, n)))
    keys = rng.integers(0, 4, n)
    end = int(s[-1]) + 3 * 60 * MIN
    whole = chain(TumblingWindow(10 * MIN), second, s, keys, [(-1, 0), (end, n)])
    # cut anywhere; each batch closed at a watermark no later than its last event (on the minute
    # grid, so exactly on window ends), never going back
    cuts = sorted(rng.choice(np.arange(1, n), 12, replace=False).tolist()) + [n]
    frontiers, w = [(-1, 0)], -1
    for upto in cuts:
        w = max(w, int(s[upto - 1]) - int(rng.integers(0, 30)) * MIN // MIN * MIN)
        frontiers.append((w, upto))
    frontiers.append((end, n))
    assert sum(whole.values()) > 5
    assert chain(TumblingWindow(10 * MIN), second, s, keys, frontiers) == whole


@pytest.mark.parametrize("cuts", [[9], [1, 4, 9], [3, 8, 9], [7, 9]], ids=["one-batch", "1-4", "3-8", "7"])
def test_the_archive_and_alerts_transcript_through_the_core(cuts):
    """Two outputs of one chain: the archive is every event of the pass-through step, once, by
    its own time; the alerts are the hourly windows of its hot rows, closed on the watermark of
    each batch (its last event's time) — the same rows however the input is cut."""
    case = next(c for c in GOLDEN["cases"] if c["name"] == "archive_and_alerts")
    day, hour = GOLDEN["date"], TumblingWindow(60 * MIN)
    readings = GOLDEN["readings"]
    s = np.array([parse_time_us(f"{day}T{t}:00Z") for t, _, _ in readings], dtype=np.int64)
    devices = np.array([int(d[1:]) for _, d, _ in readings], dtype=np.int64)
    hot = np.array([temperature > 25 for _, _, temperature in readings])
    archive, alerts, taken, prev = [], Counter(), 0, -1
    buffer = np.zeros(0, np.int64)  # indexes of the hot rows the alert step still holds
    for upto, final in [(upto, False) for upto in cuts] + [(len(s), True)]:
        archive.extend(range(taken, upto))  # the pass-through step emits each event as it comes
        rows = np.concatenate([buffer, np.flatnonzero(hot[taken:upto]) + taken])
        now = int(s[upto - 1]) + (3 * 60 * MIN if final else 0)
        st = step(hour, s[rows], prev, now, devices[rows])
        for end, i in zip(st.emit.end_us.tolist(), rows[st.emit.event_index].tolist(), strict=True):
            count, top = alerts.get((end, devices[i]), (0, 0))
            alerts[(end, devices[i])] = (count + 1, max(top, readings[i][2]))
        buffer, taken, prev = rows[st.keep], upto, now
    assert sorted(archive) == list(range(len(s)))  # each event once
    expected = {(parse_time_us(f"{day}T{e}:00Z"), int(d[1:])): (n, top) for _, e, d, n, top in case["expect"]}
    assert dict(alerts) == expected, {format_time_us(e): v for (e, *v) in alerts}
    assert [[t, d, v] for t, d, v in readings] == case["outputs"]["archive"]


# -- later steps of any per-event form, and several steps reading the input -----------------
def window_stepper(window):
    """The core's window ``step`` batch by batch over (time, key, row id) rows, its buffer kept
    between calls: each call gives the windows the batch's frontiers closed, {(start, end, key): [ids]}."""
    buffer = [np.zeros(0, np.int64)] * 3

    def closed(s, keys, ids, prev, now):
        rows = [
            np.concatenate([held, np.asarray(new, np.int64)]) for held, new in zip(buffer, (s, keys, ids), strict=True)
        ]
        st = step(window, rows[0], prev, now, rows[1])
        out: dict = {}
        for start, end, i in zip(
            st.emit.start_us.tolist(), st.emit.end_us.tolist(), st.emit.event_index.tolist(), strict=True
        ):
            out.setdefault((start, end, int(rows[1][i])), []).append(int(rows[2][i]))
        buffer[:] = [r[st.keep] for r in rows]
        return out

    return closed


def batches(cut_at: list[int], s: np.ndarray):
    """(events taken, events up to, previous frontier, frontier) per batch: each closed at its last
    event's time, then a last one three hours on."""
    prev, taken = -1, 0
    for upto, final in [(upto, False) for upto in cut_at] + [(len(s), True)]:
        now = int(s[upto - 1]) + (3 * 60 * MIN if final else 0)
        yield taken, upto, prev, now
        prev, taken = now, upto


def hhmm(us: int) -> str:
    return format_time_us(us)[11:16]


CUTS = [[9], [1, 4, 9], [3, 8, 9], [7, 9]]


@pytest.mark.parametrize("cut_at", CUTS, ids=["one-batch", "1-4", "3-8", "7"])
def test_the_per_event_over_window_transcript_through_the_core(cut_at):
    """10-minute windows per device; a per-event step keeps the busy rows, each at its window's
    end, in the batch that closed it; an hourly window over those rows times them by that end."""
    case = next(c for c in GOLDEN["cases"] if c["name"] == "per_event_over_window")
    readings = GOLDEN["readings"]
    s = np.array([parse_time_us(f"{GOLDEN['date']}T{t}:00Z") for t, _, _ in readings], dtype=np.int64)
    devices = np.array([int(d[1:]) for _, d, _ in readings], dtype=np.int64)
    minutes, hours = window_stepper(TumblingWindow(10 * MIN)), window_stepper(TumblingWindow(60 * MIN))
    busy: list = []  # (time, device, spread)
    hour_rows = []
    for taken, upto, prev, now in batches(cut_at, s):
        first = len(busy)
        for (_, end, device), ids in minutes(s[taken:upto], devices[taken:upto], range(taken, upto), prev, now).items():
            temperatures = [readings[i][2] for i in ids]
            if len(ids) >= 2 or max(temperatures) > 50:
                busy.append((end, device, max(temperatures) - min(temperatures)))
        new = busy[first:]
        closed = hours([b[0] for b in new], [0] * len(new), range(first, len(busy)), prev, now)
        hour_rows += [
            [hhmm(start), hhmm(end), len(ids), max(busy[i][2] for i in ids)] for (start, end, _), ids in closed.items()
        ]
    assert sorted([hhmm(t), f"d{d}", spread] for t, d, spread in busy) == case["expect"]
    assert sorted(hour_rows) == case["outputs"]["hours"]


@pytest.mark.parametrize("cut_at", CUTS, ids=["one-batch", "1-4", "3-8", "7"])
def test_two_windows_of_one_input_through_the_core(cut_at):
    """A 10-minute and an hourly window both over the readings, each timed by their own time."""
    case = next(c for c in GOLDEN["cases"] if c["name"] == "two_windows_of_one_input")
    readings = GOLDEN["readings"]
    s = np.array([parse_time_us(f"{GOLDEN['date']}T{t}:00Z") for t, _, _ in readings], dtype=np.int64)
    devices = np.array([int(d[1:]) for _, d, _ in readings], dtype=np.int64)
    tens, hours = window_stepper(TumblingWindow(10 * MIN)), window_stepper(TumblingWindow(60 * MIN))
    ten_rows, hour_rows = [], []
    for taken, upto, prev, now in batches(cut_at, s):
        batch = (s[taken:upto], devices[taken:upto], range(taken, upto), prev, now)
        for (start, end, d), ids in tens(*batch).items():
            ten_rows.append([hhmm(start), hhmm(end), f"d{d}", len(ids)])
        for (start, end, d), ids in hours(*batch).items():
            hour_rows.append([hhmm(start), hhmm(end), f"d{d}", len(ids), max(readings[i][2] for i in ids)])
    assert sorted(hour_rows) == case["expect"]
    assert sorted(ten_rows) == case["outputs"]["tens"]


@pytest.mark.parametrize("cut_at", CUTS, ids=["one-batch", "1-4", "3-8", "7"])
def test_the_lag_over_window_transcript_through_the_core(cut_at):
    """10-minute windows per device, then LAG over their rows per device, each row timed by its
    window's end and emitted once the frontier passes it — in the batch that closed its window."""
    from tidegate.eventtime import analytics as A
    from tidegate.jobspec import parse_spec

    case = next(c for c in GOLDEN["cases"] if c["name"] == "lag_over_window")
    job = parse_spec({"name": "lag", "version": 1, "timestamp_by": "eventTime", "steps": case["steps"],
                      "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"}})  # fmt: skip
    lag = job.steps[0].analytics[0].function
    readings = GOLDEN["readings"]
    s = np.array([parse_time_us(f"{GOLDEN['date']}T{t}:00Z") for t, _, _ in readings], dtype=np.int64)
    devices = np.array([int(d[1:]) for _, d, _ in readings], dtype=np.int64)
    minutes = window_stepper(TumblingWindow(10 * MIN))
    held: dict[int, list] = {}  # per device: the (time, top) rows the LAG step still holds
    rising = []
    for taken, upto, prev, now in batches(cut_at, s):
        for (_, end, device), ids in minutes(s[taken:upto], devices[taken:upto], range(taken, upto), prev, now).items():
            held.setdefault(device, []).append((end, max(readings[i][2] for i in ids)))
        for device, rows in held.items():
            rows.sort()  # one row per window end and device: no ties
            times = np.array([t for t, _ in rows], dtype=np.int64)
            tops = [top for _, top in rows]
            st = A.step([lag], times, prev, now, [None], [tops], [None])
            for i in np.flatnonzero(st.emit):
                previous = st.results[0][i]
                if previous is not None and tops[i] > previous:
                    rising.append([hhmm(int(times[i])), f"d{device}", tops[i], previous])
            held[device] = [r for r, keep in zip(rows, st.keep, strict=True) if keep]
    assert sorted(rising) == case["expect"]
