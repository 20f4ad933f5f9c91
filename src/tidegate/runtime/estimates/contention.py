"""What a rehearsal competed with for the CPU, and how much faster the real restart runs without it.

A rehearsal (:func:`tidegate.runtime.estimates.rehearsal.rehearse`) runs beside the job's own
duplicate in the region, the check service warming up, the partner region and whatever
else the machine does. The real restart runs after that duplicate stopped and once the
service is warm (idle until the check): the processes that competed with the rehearsal
but will not compete with the restart are *gone*. The rest of the load stays.

Contract: a phase of the rehearsal that took ``r`` CPU seconds of its own, while the gone
processes used ``g`` and the whole machine ``U`` of its ``C·T`` CPU seconds, runs
``speedup = 1 + freed / (r + b·p)`` times faster without them, where ``freed = max(0, g − idle)``
and ``idle = C·T − U``: capacity that stood idle beside them was never theirs to free. What
they did use goes to whoever wants more CPU. A rehearsal is a catch-up — it always has work
waiting and takes any core that comes free. The partner duplicates (``p`` CPU seconds) want
more as far as their batches ran back to back — ``b``, the share of the phase they ran
batches — and a partner that waits for its trigger between batches takes nothing more: the
freed CPU is shared in proportion to ``r`` and ``b·p``. The rest — the scheduler, the
generator — does what its clocks ask and needs the same beside the restart. The rehearsal's
rate is capped at ``C`` cores. Nothing here is fitted: every figure is read from ``/proc``
and the control database while the rehearsal runs, so it holds under whatever load there is.

Why the partner shares. On a small machine the partner duplicate runs batches for most of
each phase, so it takes part of the freed CPU too: crediting the rehearsal with all of it
overstates how much faster the restart runs, and the estimate comes out short. Drivers whose
C2 compiler threads take much of their CPU gain closer to all of it; the C1-only drivers of
decision 0012 do not (docs/concepts/estimates.md, Limits).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class CpuSample:
    """Cumulative CPU seconds at wall-clock time ``at`` (the control database's clock)."""

    at: float
    rehearsal_cpu_s: float  # the rehearsal's driver, its JVM and Python workers
    gone_cpu_s: float  # the processes that will not compete with the real restart
    machine_busy_s: float  # all CPUs of the machine, not idle, since boot
    partner_cpu_s: float = 0.0  # the job's duplicates in other regions: they stay, and share what is freed


@dataclass(frozen=True)
class PhaseLoad:
    """CPU use over one phase ``[start, end)`` of the rehearsal, from two samples."""

    wall_s: float
    rehearsal_cpu_s: float
    gone_cpu_s: float
    machine_busy_s: float
    cores: int
    partner_cpu_s: float = 0.0  # the partner duplicates'
    partner_busy: float | None = None  # the share of the phase the partner's batches ran (None: none seen)

    @property
    def speedup(self) -> float:
        """How many times faster the phase runs without the gone processes (≥ 1): the module's contract."""
        if self.rehearsal_cpu_s <= 0 or self.wall_s <= 0:
            return 1.0
        idle = max(0.0, self.cores * self.wall_s - self.machine_busy_s)
        freed = max(0.0, self.gone_cpu_s - idle)
        wanting = self.rehearsal_cpu_s + (self.partner_busy or 0.0) * self.partner_cpu_s  # who takes the freed CPU
        ceiling = self.cores * self.wall_s / self.rehearsal_cpu_s  # no more than every core
        return max(1.0, min(1.0 + freed / wanting, ceiling))

    def to_dict(self) -> dict:
        return {
            "wall_s": round(self.wall_s, 2),
            "rehearsal_cpu_s": round(self.rehearsal_cpu_s, 2),
            "gone_cpu_s": round(self.gone_cpu_s, 2),
            "machine_busy_s": round(self.machine_busy_s, 2),
            "cores": self.cores,
            "speedup": round(self.speedup, 3),
            "partner_cpu_s": round(self.partner_cpu_s, 2),
            "partner_busy": None if self.partner_busy is None else round(self.partner_busy, 3),
        }


def phase_load(
    samples: list[CpuSample], start: float, end: float, cores: int, partner_batches: Iterable[tuple[float, float]] = ()
) -> PhaseLoad | None:
    """The load of ``[start, end)`` from the first sample at or after ``start`` and the last at
    or before ``end`` (a process's counters vanish with it, so no sample after its end
    counts); None with fewer than two such samples. ``partner_batches``: the partner
    duplicates' batches as (ended at, seconds), whose share of the phase is recorded."""
    inside = [s for s in samples if start <= s.at <= end]
    if len(inside) < 2:
        return None
    first, last = inside[0], inside[-1]
    return PhaseLoad(
        last.at - first.at,
        max(0.0, last.rehearsal_cpu_s - first.rehearsal_cpu_s),
        max(0.0, last.gone_cpu_s - first.gone_cpu_s),
        max(0.0, last.machine_busy_s - first.machine_busy_s),
        cores,
        max(0.0, last.partner_cpu_s - first.partner_cpu_s),
        busy_share(partner_batches, first.at, last.at),
    )


def busy_share(batches: Iterable[tuple[float, float]], start: float, end: float) -> float | None:
    """The share of ``[start, end)`` that batches, each (ended at, seconds), were running;
    None when none ran in it. A duplicate that keeps up at the pace of its input waits for its
    trigger between batches; one whose batches fill the phase runs them back to back."""
    spans = [(max(start, at - seconds), min(end, at)) for at, seconds in batches]
    spans = [(a, b) for a, b in spans if b > a]
    if not spans or end <= start:
        return None
    return min(1.0, sum(b - a for a, b in spans) / (end - start))


def group_cpu_by_pid(groups: Iterable[int], proc: Path = PROC) -> dict[int, float]:
    """CPU seconds (user + system) of each live process of the process groups ``groups``
    (the drivers and the check service each lead a session of their own)."""
    wanted = {g for g in groups if g}
    found: dict[int, float] = {}
    if not wanted:
        return found
    tick = os.sysconf("SC_CLK_TCK")
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone between the listing and the read
        if int(fields[2]) in wanted:  # pgrp; utime and stime are fields 11 and 12 after the name
            found[int(stat.parent.name)] = (int(fields[11]) + int(fields[12])) / tick
    return found


def group_usage(groups: Iterable[int], proc: Path = PROC) -> dict[int, tuple[float, int]]:
    """CPU seconds (user + system) and resident bytes of all live processes of each process
    group in ``groups``, summed per group (a driver, or any application that leads its own)."""
    tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    found = {g: (0.0, 0) for g in groups}
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone between the listing and the read
        group = int(fields[2])  # after the name: state, ppid, pgrp; utime 11, stime 12, rss 21
        if group in found:
            cpu, rss = found[group]
            found[group] = (cpu + (int(fields[11]) + int(fields[12])) / tick, rss + int(fields[21]) * page)
    return found


def machine_busy_s(proc: Path = PROC) -> float:
    """CPU seconds the machine's CPUs spent not idle since boot (``/proc/stat``)."""
    values = [int(v) for v in (proc / "stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle, iowait
    busy = sum(values[:8]) - idle  # user … steal; guest time is already in user
    return busy / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """Samples the rehearsal's process group against the gone ones, and the partner
    duplicates' beside them (:class:`CpuSample`).

    Each process counts with the last CPU time it was seen with, so a total never drops when
    a process exits (a check service that idles out, a Python worker that ends) — a process
    that lived and died between two samples is missed, and children's reaped time is not
    read, which would count it twice."""

    def __init__(self, gone: Iterable[int], proc: Path = PROC, partners: Iterable[int] = ()) -> None:
        self.gone = [g for g in gone if g]
        self.partners = [g for g in partners if g]
        self.proc = proc
        self.samples: list[CpuSample] = []
        self._seen: dict[str, dict[int, float]] = {"rehearsal": {}, "gone": {}, "partner": {}}

    def _total(self, name: str, groups: list[int]) -> float:
        seen = self._seen[name]
        for pid, cpu_s in group_cpu_by_pid(groups, self.proc).items():
            seen[pid] = max(cpu_s, seen.get(pid, 0.0))
        return sum(seen.values())

    def sample(self, at: float, rehearsal: int | None) -> None:
        try:
            busy = machine_busy_s(self.proc)
        except OSError:  # no /proc: nothing measured, nothing corrected
            return
        self.samples.append(
            CpuSample(
                at,
                self._total("rehearsal", [rehearsal] if rehearsal else []),
                self._total("gone", self.gone),
                busy,
                self._total("partner", self.partners),
            )
        )
