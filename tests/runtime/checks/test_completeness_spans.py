"""Which span a completeness check covers (semantics §8): never below where the region's output begins."""

from __future__ import annotations

import json
import shutil

from tidegate.control.db import ControlDB
from tidegate.runtime.checks.completeness import output_begins_us

JOB = "job-a"


def lineage(db: ControlDB, tmp_path, name: str, from_us: int | None, created_at: float) -> None:
    root = tmp_path / name
    (root / "output").mkdir(parents=True)
    db.create_lineage(
        id=name,
        job=JOB,
        region="east",
        fingerprint="f",
        version=1,
        root=str(root),
        output_from_us=from_us,
        windowed=True,
        created_at=created_at,
    )


def test_a_region_promises_output_only_from_its_oldest_lineage_still_on_disk(tmp_path):
    db = ControlDB(f"sqlite:///{tmp_path / 'control.db'}")
    assert output_begins_us(db, JOB, "east") is None  # nothing ran: nothing to clip by
    lineage(db, tmp_path, "first", 1_000, 1.0)  # deployed with start mode now: output from 1000
    lineage(db, tmp_path, "second", 5_000, 2.0)  # a replay after it
    assert output_begins_us(db, JOB, "east") == 1_000
    shutil.rmtree(tmp_path / "first")  # the region was lost and restored: the old output is gone
    assert output_begins_us(db, JOB, "east") == 5_000


def test_a_lineage_reading_from_the_start_of_the_log_clips_nothing(tmp_path):
    db = ControlDB(f"sqlite:///{tmp_path / 'control.db'}")
    lineage(db, tmp_path, "from-start", None, 1.0)
    assert output_begins_us(db, JOB, "east") is None


def test_an_open_span_given_for_a_lost_region_starts_where_the_consumers_region_has_output(tmp_path):
    """A drill checks the restored region and the consumer view with one ``--from``: the
    restored region's restore point. Consumers may read a partner whose output begins later
    (it was deployed later): their span begins there, not at a time it never emitted."""
    from types import SimpleNamespace as NS

    from tidegate.cli.outputs import _span

    db = ControlDB(f"sqlite:///{tmp_path / 'control.db'}")
    lineage(db, tmp_path, "east-first", 9_000, 1.0)
    db.update_lineage("east-first", emitted_through_us=20_000)
    db.set_active_region(JOB, "east", "failover")
    controller = NS(db=db)
    args = NS(job=JOB, from_time="1970-01-01T00:00:00.005Z", to_time=None, run=None)
    assert _span(controller, args, "consumer") == (9_000, 20_000)
    assert _span(controller, args, "east") == (9_000, 20_000)
    args.to_time = "1970-01-01T00:00:00.015Z"  # a closed span is checked as given
    assert _span(controller, args, "consumer") == (5_000, 15_000)


def test_each_target_is_checked_against_the_version_it_serves(tmp_path):
    """Halfway through a planned stop of the pair to a changed query: the upgraded standby
    (east) runs version 2, consumers still read version 1 from the active region (west)."""
    from tidegate.runtime.checks.completeness import serving_version

    db = ControlDB(f"sqlite:///{tmp_path / 'control.db'}")
    assert serving_version(db, JOB, "east") is None  # nothing ran: the latest registered version
    for name, region, version, at in (
        ("east-v1", "east", 1, 1.0),
        ("west-v1", "west", 1, 1.5),
        ("east-v2", "east", 2, 2.0),
    ):
        db.create_lineage(
            id=name,
            job=JOB,
            region=region,
            fingerprint=f"f{version}",
            version=version,
            root=str(tmp_path / name),
            output_from_us=1_000,
            windowed=True,
            created_at=at,
        )
    db.set_active_region(JOB, "west", "deploy")
    assert serving_version(db, JOB, "east") == 2
    assert serving_version(db, JOB, "west") == 1
    assert serving_version(db, JOB, "consumer") == 1
    assert serving_version(db, JOB, "pair") is None
    db.set_active_region(JOB, "east", "planned stop")  # consumers moved to the upgraded region
    assert serving_version(db, JOB, "consumer") == 2


def test_a_region_is_checked_from_where_the_version_it_serves_began(tmp_path):
    """East ran version 1 and was replayed into version 2 from 5000: windows before that are
    version 1's (checked against it back then) — a version-2 check starts at 5000."""
    from tidegate.runtime.checks.completeness import _within_version, version_begins_us

    db = ControlDB(f"sqlite:///{tmp_path / 'control.db'}")
    for name, version, from_us, at in (("v1", 1, 1_000, 1.0), ("v2", 2, 5_000, 2.0), ("v2-resumed", 2, 7_000, 3.0)):
        db.create_lineage(
            id=name,
            job=JOB,
            region="east",
            fingerprint=f"f{version}",
            version=version,
            root=str(tmp_path / name),
            output_from_us=from_us,
            windowed=True,
            created_at=at,
        )
    db.set_active_region(JOB, "east", "deploy")
    assert version_begins_us(db, JOB, "east", 2) == 5_000
    assert _within_version(db, JOB, "east", (2_000, 9_000), 2) == (5_000, 9_000)
    assert _within_version(db, JOB, "consumer", (2_000, 9_000), 2) == (5_000, 9_000)
    assert _within_version(db, JOB, "east", (2_000, 4_000), 2) is None  # all of it version 1's
    assert _within_version(db, JOB, "east", (6_000, 9_000), 2) == (6_000, 9_000)


def test_a_target_that_cannot_be_checked_fails_alone_and_the_others_results_stand(tmp_path, monkeypatch):
    """East checked and recorded, then the consumer view unreadable: east's pass stands, the
    consumer's check is one failed record naming the error — not a 'could not run' for both."""
    from types import SimpleNamespace as NS

    from tidegate.errors import TidegateError
    from tidegate.runtime.checks import completeness as checks

    db = ControlDB(f"sqlite:///{tmp_path / 'control.db'}")
    lineage(db, tmp_path, "east-v1", 1_000, 1.0)
    db.set_active_region(JOB, "east", "deploy")

    def check(spark, controller, job, target, span, **kwargs):
        if target == "consumer":
            raise TidegateError("output/date=2026-01-01/hour=03 vanished while it was read — run the check again")
        return checks.CheckOutcome(
            job,
            target,
            span,
            True,
            "complete",
            None,
            db.record_check(job, target, True, span=span, summary="complete"),
            "",
        )

    monkeypatch.setattr(checks, "check", check)
    outcomes = checks.check_all(
        None, NS(db=db), JOB, {"east": (2_000, 9_000), "consumer": (2_000, 9_000)}, reference=tmp_path / "reference"
    )
    assert [(o.target, o.success) for o in outcomes] == [("east", True), ("consumer", False)]
    assert "could not run" in outcomes[1].message and "vanished while it was read" in outcomes[1].message
    recorded = {row.target: row for row in db.checks(JOB)}
    assert recorded["east"].success and not recorded["consumer"].success
    assert len(db.checks(JOB)) == 2 and "vanished" in recorded["consumer"].summary


def test_the_batch_path_of_a_reference_job_joins_by_the_checked_regions_latest_lineages_records(tmp_path):
    """A snapshot that came late to the stream takes effect from its recorded start: the batch
    reference a check compares against must join by the same records, those of the region's
    latest lineage (consumers: the active region's); a job without reference needs none."""
    from types import SimpleNamespace as NS

    from tidegate.jobspec import parse_spec
    from tidegate.runtime.checks.completeness import _records_of

    db = ControlDB(f"sqlite:///{tmp_path / 'control.db'}")
    controller = NS(db=db)
    spec = parse_spec({"name": JOB, "version": 1, "payload": {"device": "string"},
                       "reference": {"name": "devices", "path": "jobs", "columns": {"device": "string"},
                                     "keys": ["device = devices.device"]}})  # fmt: skip
    assert _records_of(controller, JOB, "east", spec) is None  # nothing ran
    lineage(db, tmp_path, "east-first", 1_000, 1.0)
    lineage(db, tmp_path, "east-replay", 5_000, 2.0)
    assert _records_of(controller, JOB, "east", spec).root == tmp_path / "east-replay"
    db.set_active_region(JOB, "east", "first region started")
    assert _records_of(controller, JOB, None, spec).root == tmp_path / "east-replay"
    assert _records_of(controller, JOB, "east", parse_spec(spec.to_dict() | {"reference": None})) is None


def test_a_per_event_query_is_checked_from_the_first_positions_of_its_first_kept_lineage(tmp_path):
    """A per-event job begins and hands over by input position: after a query change its check
    compares the new query's rows from its first positions; a region whose history began with
    this query, or was rebuilt by replay after losing its storage, from where that began."""
    from types import SimpleNamespace as NS

    from tidegate.runtime.checks.completeness import query_begins_by_position

    db = ControlDB(f"sqlite:///{tmp_path / 'control.db'}")
    spec = NS(needs_lookback=False, fingerprint="new")
    for name, fingerprint, offsets, emitted_from, created_at in (
        ("old", "old", {"0": 3, "1": 0}, None, 1.0),  # read from its start positions
        ("new", "new", {"0": 30, "1": 2}, {"0": 40, "1": 7}, 2.0),
    ):  # emitted from after the policy's stretch
        run = db.create_run(
            job=JOB,
            region="east",
            version=1,
            fingerprint=fingerprint,
            lineage=name,
            kind="job",
            input="event_log",
            start_mode="last-stopped",
            checkpoint="fresh",
            checkpoint_reason="test",
            status="running",
            starting_offsets=offsets,
            context=json.dumps({"emit_from_offsets": emitted_from}),
        )
        (tmp_path / name / "output").mkdir(parents=True)
        db.create_lineage(
            id=name,
            job=JOB,
            region="east",
            fingerprint=fingerprint,
            version=1,
            root=str(tmp_path / name),
            output_from_us=None,
            windowed=False,
            created_at=created_at,
            created_by_run=run,
        )
    assert query_begins_by_position(db, JOB, "east", spec) == ("east", "new", {0: 40, 1: 7})
    assert query_begins_by_position(db, JOB, "east", NS(needs_lookback=True, fingerprint="new")) is None
    assert query_begins_by_position(db, JOB, "east", NS(needs_lookback=False, fingerprint="old")) is None
    shutil.rmtree(tmp_path / "new")  # only the old query's lineage is kept: the region's history begins there,
    # where it began reading (it recorded no policy stretch)
    old_spec = NS(needs_lookback=False, fingerprint="old")
    assert query_begins_by_position(db, JOB, "east", old_spec) == ("east", "old", {0: 3, 1: 0})
    shutil.rmtree(tmp_path / "old")
    assert query_begins_by_position(db, JOB, "east", old_spec) is None  # nothing kept
