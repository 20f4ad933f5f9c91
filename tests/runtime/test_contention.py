"""How much faster a rehearsal's phase runs once the processes gone by the real restart are gone.

Every figure is a synthetic measurement: CPU seconds over a phase, as ``/proc`` would give them.
"""

import os

import pytest

from tidegate.runtime.contention import CpuMeter, CpuSample, PhaseLoad, group_cpu_s, machine_busy_s, phase_load

TICK = os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("rehearsal, gone, busy, speedup", [
    # 2 cores saturated for 10 s: the rehearsal had 5, the duplicate 5, others 10 CPU s; the
    # duplicate's 5 go to the 15 left in proportion: 20 / 15
    (5.0, 5.0, 20.0, 20 / 15),
    # the same, but the machine stood idle 5 of its 20 CPU s: the duplicate freed nothing
    (5.0, 5.0, 15.0, 1.0),
    # idle 2 CPU s: only the 3 beyond them are freed
    (5.0, 5.0, 18.0, (13 + 3) / 13),
    # nothing gone (the duplicate was stopped already): as measured
    (8.0, 0.0, 20.0, 1.0),
    # the rehearsal alone with the duplicate: it cannot use more than the 2 cores
    (8.0, 12.0, 20.0, 20 / 8),
])
def test_what_the_gone_processes_used_is_shared_by_those_left_where_the_machine_was_busy(
        rehearsal, gone, busy, speedup):
    load = PhaseLoad(wall_s=10.0, rehearsal_cpu_s=rehearsal, gone_cpu_s=gone, machine_busy_s=busy, cores=2)
    assert load.speedup == pytest.approx(speedup)


def test_a_rehearsal_that_used_no_cpu_is_not_corrected():
    assert PhaseLoad(10.0, 0.0, 5.0, 20.0, 2).speedup == 1.0


def test_a_phase_is_measured_between_its_first_and_last_sample_inside_it():
    #   t:   0    1    2    3    4    5
    #        |----[ phase 1..4 ]----|
    samples = [CpuSample(t, rehearsal_cpu_s=2.0 * t, gone_cpu_s=1.0 * t, machine_busy_s=4.0 * t)
               for t in range(6)]
    load = phase_load(samples, 0.5, 4.2, cores=4)
    assert (load.wall_s, load.rehearsal_cpu_s, load.gone_cpu_s, load.machine_busy_s) == (3, 6.0, 3.0, 12.0)
    assert phase_load(samples, 0.5, 1.5, cores=4) is None  # one sample says nothing of a phase


def test_cpu_is_read_per_process_group_with_reaped_children(tmp_path):
    def process(pid, pgrp, utime, stime, cutime, cstime, comm="java (x)"):
        (tmp_path / str(pid)).mkdir()
        fields = ["S", "1", str(pgrp), str(pgrp), "0", "-1", "0", "0", "0", "0", "0",
                  str(utime), str(stime), str(cutime), str(cstime), "20", "0"]
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields))

    process(100, 100, 10 * TICK, 2 * TICK, 3 * TICK, 0)  # a driver: 12 s itself, 3 s of reaped children
    process(101, 100, 20 * TICK, 5 * TICK, 0, 0)  # its JVM
    process(200, 200, 50 * TICK, 0, 0, 0)  # another group
    (tmp_path / "stat").write_text(f"cpu  {60 * TICK} 0 {20 * TICK} {100 * TICK} {10 * TICK} 0 0 0 0 0\ncpu0 1 2 3\n")
    assert group_cpu_s([100], tmp_path) == pytest.approx(40.0)
    assert group_cpu_s([100, 200], tmp_path) == pytest.approx(90.0)
    assert group_cpu_s([None], tmp_path) == 0.0
    assert machine_busy_s(tmp_path) == pytest.approx(80.0)  # idle and iowait are not busy
    meter = CpuMeter([200, None], tmp_path)
    meter.sample(7.0, 100)
    assert meter.samples == [CpuSample(7.0, 40.0, 50.0, 80.0)]


def test_a_meter_without_proc_measures_nothing(tmp_path):
    meter = CpuMeter([1], tmp_path / "none")
    meter.sample(1.0, 2)
    assert meter.samples == []
