"""bench_suite reads a CI run's log: the summary's counts and wall time, the slowest tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import bench_suite  # noqa: E402

LOG = """\
bootstrap: ok
tests/a.py ........
============================= slowest 30 durations =============================
362.75s call     tests/bench/test_bench_drills.py::test_every_drill
98.08s setup    tests/spark/test_archive.py::test_build
1.50s call     tests/a.py::test_small
(2 durations < 0.005s hidden.  Use -vv to show these durations.)
=========================== short test summary info ============================
FAILED tests/x.py::test_y - AssertionError
========== 1 failed, 2669 passed, 111 warnings in 3674.45s (1:01:14) ===========
rc=1
"""


def test_the_summary_and_the_slowest_tests_are_read_from_the_log():
    run = bench_suite.read_log(LOG)
    assert run.counts == {"failed": 1, "passed": 2669}
    assert run.wall_s == pytest.approx(3674.45)
    assert run.slowest == [
        (362.75, "call", "tests/bench/test_bench_drills.py::test_every_drill"),
        (98.08, "setup", "tests/spark/test_archive.py::test_build"),
        (1.5, "call", "tests/a.py::test_small"),
    ]


def test_a_test_whose_name_says_slowest_does_not_cut_the_block_short():
    named = LOG.replace("tests/a.py::test_small", "tests/b.py::test_the_slowest_tests_are_read")
    assert [s for s, _, _ in bench_suite.read_log(named).slowest] == [362.75, 98.08, 1.5]


def test_a_log_quoted_in_a_report_is_read_as_well():
    quoted = "\n".join("> " + line for line in LOG.splitlines())
    assert bench_suite.read_log(quoted).slowest[0][0] == 362.75


def test_each_slow_test_is_shown_with_its_share_of_the_worker_time(capsys):
    bench_suite.report(bench_suite.read_log(LOG), workers=2, commit="abc")
    out = capsys.readouterr().out
    assert "pytest wall time 61.2 min on 2 workers" in out
    assert "ratio to the bar 2.04" in out
    assert "  362.8   4.9%  tests/bench/test_bench_drills.py::test_every_drill" in out  # 362.75 / 7348.9
    assert "test_build (setup)" in out


def test_a_log_with_every_duration_also_shows_the_files_that_cost_most(capsys):
    durations = [f"{40 - i}.00s call     tests/f{i % 3}.py::test_{i}" for i in range(35)]
    log = LOG.replace("slowest 30 durations", "slowest durations").replace(
        "1.50s call     tests/a.py::test_small", "\n".join(durations)
    )
    bench_suite.report(bench_suite.read_log(log), workers=2, commit="abc")
    out = capsys.readouterr().out
    assert out.count("::test_") == 30  # the slowest 30 tests only
    assert "by file, setup and teardown included (37 durations" in out
    files = out.split("by file")[1]
    assert files.index("tests/bench/test_bench_drills.py") < files.index("tests/f0.py")
    assert f"  {sum(40 - i for i in range(0, 35, 3)):.1f}   3.8%  tests/f0.py" in files  # every third test


def test_a_failed_run_or_one_past_the_bar_exits_non_zero_and_a_log_without_a_summary_says_what_it_needs(tmp_path):
    log = tmp_path / "ci.log"
    log.write_text(LOG)
    assert bench_suite.main([str(log), "--commit", "abc"]) == 1
    log.write_text(LOG.replace("1 failed, ", "").replace("3674.45s", "1500.00s"))
    assert bench_suite.main([str(log), "--commit", "abc"]) == 0
    log.write_text("bootstrap: ok\n")
    with pytest.raises(SystemExit, match="no pytest summary line"):
        bench_suite.main([str(log)])
