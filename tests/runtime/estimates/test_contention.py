"""How much faster a rehearsal's phase runs once the processes gone by the real restart are gone.

Every figure is a synthetic measurement: CPU seconds over a phase, as ``/proc`` would give them.
"""

import os
import time

import pytest

from tidegate.runtime.estimates.contention import (
    CpuMeter,
    CpuSample,
    PhaseLoad,
    busy_share,
    group_cpu_by_pid,
    group_usage,
    machine_busy_s,
    phase_load,
)

TICK = os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize(
    "rehearsal, gone, busy, speedup",
    [
        # 2 cores saturated for 10 s: the rehearsal had 5, the duplicate 5, others 10 CPU s; the
        # others ran at their own pace, so the duplicate's 5 go to the rehearsal: 10 / 5
        (5.0, 5.0, 20.0, 10 / 5),
        # the same, but the machine stood idle 5 of its 20 CPU s: the duplicate freed nothing
        (5.0, 5.0, 15.0, 1.0),
        # idle 2 CPU s: only the 3 beyond them are freed
        (5.0, 5.0, 18.0, (5 + 3) / 5),
        # nothing gone (the duplicate was stopped already): as measured
        (8.0, 0.0, 20.0, 1.0),
        # the rehearsal alone with the duplicate: it cannot use more than the 2 cores
        (8.0, 12.0, 20.0, 20 / 8),
        # a small rehearsal beside a large duplicate gets all it freed
        (2.0, 15.0, 20.0, 17 / 2),
    ],
)
def test_what_the_gone_processes_used_goes_to_the_rehearsal_where_the_machine_was_busy(rehearsal, gone, busy, speedup):
    load = PhaseLoad(wall_s=10.0, rehearsal_cpu_s=rehearsal, gone_cpu_s=gone, machine_busy_s=busy, cores=2)
    assert load.speedup == pytest.approx(speedup)


def test_the_walk_through_rehearsal_is_credited_what_its_restart_gained():
    # recorded live (2 cores, both duplicates at 100 ev/s, Airflow standalone): the rehearsal's
    # catch-up read 23,846 + 5,797 events in 59.6 s, 31.7 CPU s of its own, the rehearsed
    # duplicate 34.2, the machine 119.0 of 119.2 busy. The restart that followed read its
    # first 32,354 events 2.4× as fast as the rehearsal's first batch read 23,846.
    load = PhaseLoad(wall_s=59.62, rehearsal_cpu_s=31.69, gone_cpu_s=34.17, machine_busy_s=119.0, cores=2)
    assert 1.9 < load.speedup <= 2.4


def test_a_rehearsal_that_used_no_cpu_is_not_corrected():
    assert PhaseLoad(10.0, 0.0, 5.0, 20.0, 2).speedup == 1.0


def test_a_phase_is_measured_between_its_first_and_last_sample_inside_it():
    #   t:   0    1    2    3    4    5
    #        |----[ phase 1..4 ]----|
    samples = [CpuSample(t, rehearsal_cpu_s=2.0 * t, gone_cpu_s=1.0 * t, machine_busy_s=4.0 * t) for t in range(6)]
    load = phase_load(samples, 0.5, 4.2, cores=4)
    assert (load.wall_s, load.rehearsal_cpu_s, load.gone_cpu_s, load.machine_busy_s) == (3, 6.0, 3.0, 12.0)
    assert phase_load(samples, 0.5, 1.5, cores=4) is None  # one sample says nothing of a phase


def test_the_partner_duplicates_cpu_and_busy_share_are_recorded_and_it_shares_the_freed_cpu_as_far_as_it_is_busy():
    samples = [
        CpuSample(t, rehearsal_cpu_s=1.0 * t, gone_cpu_s=0.5 * t, machine_busy_s=2.0 * t, partner_cpu_s=0.4 * t)
        for t in range(11)
    ]
    #  its batches ended at 3 (2 s), 6 (2.5 s) and 12 (4 s, half inside): 2 + 2.5 + 2 of the 10 s
    load = phase_load(samples, 0.0, 10.0, cores=2, partner_batches=[(3.0, 2.0), (6.0, 2.5), (12.0, 4.0)])
    assert load.partner_cpu_s == pytest.approx(4.0) and load.partner_busy == pytest.approx(0.65)
    # the 5 CPU s freed go to the rehearsal (10) and the partner (4, busy 0.65) in proportion
    assert load.speedup == pytest.approx(1 + 5 / (10 + 0.65 * 4))
    assert load.to_dict()["partner_cpu_s"] == 4.0 and load.to_dict()["partner_busy"] == 0.65
    alone = phase_load(samples, 0.0, 10.0, cores=2)
    assert alone.partner_busy is None and alone.speedup == pytest.approx(1.5)  # no partner batch seen: all of it


@pytest.mark.parametrize("busy, speedup", [(None, 2.0), (0.0, 2.0), (0.5, 1 + 5 / 7.5), (1.0, 1.5)])
def test_a_partner_that_waits_for_its_trigger_takes_nothing_and_one_that_never_waits_takes_its_share(busy, speedup):
    # 2 cores saturated for 10 s: the rehearsal 5 CPU s, the gone duplicate 5, the partner 5
    load = PhaseLoad(
        wall_s=10.0,
        rehearsal_cpu_s=5.0,
        gone_cpu_s=5.0,
        machine_busy_s=20.0,
        cores=2,
        partner_cpu_s=5.0,
        partner_busy=busy,
    )
    assert load.speedup == pytest.approx(speedup)


def test_the_walk_through_rehearsals_beside_a_busy_partner_are_credited_about_what_their_restarts_gained():
    # recorded live (2026-11-28, C1-only drivers, 2 cores, both duplicates at 100 ev/s): each
    # turn's rehearsal phase as (wall, own, gone, machine busy, partner, partner busy), and what
    # its restart gained — start-up, first batch per event; all the freed CPU credited 1.88–2.08
    turns = [
        ((20.9, 10.39, 11.45, 41.59, 11.44, 0.874), 1.23),
        ((40.12, 21.79, 19.39, 80.11, 19.37, 0.865), 1.65),
        ((22.36, 11.73, 11.03, 44.62, 11.08, 0.891), 1.51),
        ((41.12, 22.59, 20.14, 82.16, 21.65, 0.766), 1.63),
    ]
    errors = []
    for (wall, own, gone, busy, partner, share), gained in turns:
        shared = PhaseLoad(wall, own, gone, busy, 2, partner, share).speedup
        all_of_it = PhaseLoad(wall, own, gone, busy, 2).speedup
        assert abs(shared - gained) < abs(all_of_it - gained), (shared, all_of_it, gained)
        errors.append(abs(shared - gained) / gained)
    assert sum(errors) / len(errors) < 0.15, errors


@pytest.mark.parametrize(
    "batches, share",
    [
        ([], None),  # no partner running
        ([(1.0, 1.0)], None),  # ended before the phase
        ([(15.0, 20.0)], 1.0),  # one batch longer than the phase
        ([(4.0, 1.0), (6.0, 1.0), (8.0, 1.0)], 0.3),  # waits for its trigger between batches
    ],
)
def test_the_share_of_a_phase_batches_ran_counts_only_what_fell_inside_it(batches, share):
    assert busy_share(batches, 2.0, 12.0) == (None if share is None else pytest.approx(share))


def write_process(proc, pid, pgrp, utime_s, stime_s, cutime_s=0, comm="java (x)"):
    (proc / str(pid)).mkdir(exist_ok=True)
    fields = [
        "S",
        "1",
        str(pgrp),
        str(pgrp),
        "0",
        "-1",
        "0",
        "0",
        "0",
        "0",
        "0",
        str(int(utime_s * TICK)),
        str(int(stime_s * TICK)),
        str(int(cutime_s * TICK)),
        "0",
        "20",
        "0",
    ]
    (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields))


def test_cpu_is_read_per_process_of_each_group(tmp_path):
    write_process(tmp_path, 100, 100, 10, 2, cutime_s=3)  # a driver: its reaped children's time is not read
    write_process(tmp_path, 101, 100, 20, 5)  # its JVM
    write_process(tmp_path, 200, 200, 50, 0)  # another group
    (tmp_path / "stat").write_text(f"cpu  {60 * TICK} 0 {20 * TICK} {100 * TICK} {10 * TICK} 0 0 0 0 0\ncpu0 1 2 3\n")
    assert group_cpu_by_pid([100], tmp_path) == {100: pytest.approx(12.0), 101: pytest.approx(25.0)}
    assert set(group_cpu_by_pid([100, 200], tmp_path)) == {100, 101, 200}
    assert group_cpu_by_pid([None], tmp_path) == {}
    assert machine_busy_s(tmp_path) == pytest.approx(80.0)  # idle and iowait are not busy
    meter = CpuMeter([200, None], tmp_path)
    meter.sample(7.0, 100)
    assert meter.samples == [CpuSample(7.0, pytest.approx(37.0), pytest.approx(50.0), pytest.approx(80.0))]
    beside = CpuMeter([], tmp_path, partners=[200])  # the partner duplicate: counted apart from the gone
    beside.sample(8.0, 100)
    assert beside.samples == [CpuSample(8.0, pytest.approx(37.0), 0.0, pytest.approx(80.0), pytest.approx(50.0))]


def test_a_process_that_exits_keeps_the_time_it_used(tmp_path):
    # the check service (group 300) idles out between two samples: what it used before stays
    (tmp_path / "stat").write_text(f"cpu  {10 * TICK} 0 0 {10 * TICK} 0 0 0 0 0 0\n")
    write_process(tmp_path, 300, 300, 40, 0)
    write_process(tmp_path, 400, 400, 1, 0)
    meter = CpuMeter([300, 400], tmp_path)
    meter.sample(1.0, None)
    (tmp_path / "300" / "stat").unlink()
    write_process(tmp_path, 400, 400, 3, 0)
    meter.sample(2.0, None)
    assert [s.gone_cpu_s for s in meter.samples] == [pytest.approx(41.0), pytest.approx(43.0)]


def test_a_meter_without_proc_measures_nothing(tmp_path):
    meter = CpuMeter([1], tmp_path / "none")
    meter.sample(1.0, 2)
    assert meter.samples == []


def test_a_process_groups_cpu_and_memory_are_its_processes_own():
    group = os.getpgrp()
    (cpu_before, rss), *_ = group_usage([group]).values()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # burn a little CPU in this group
        pass
    (cpu_after, _), *_ = group_usage([group]).values()
    assert cpu_after - cpu_before >= 0.25 and rss > 10 * 2**20
    assert group_usage([2**22 + 12345]) == {2**22 + 12345: (0.0, 0)}  # no such group
