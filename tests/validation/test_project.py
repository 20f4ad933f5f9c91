"""The committed GX project under expectations/ is the one the checks run, and it is the
suite the code describes: the two cannot drift apart unnoticed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidegate.errors import TidegateError
from tidegate.validation import completeness_checkpoint, completeness_suite, default_project_dir, open_project
from tidegate.validation.project import (
    ASSET,
    BATCH_DEFINITION,
    DATASOURCE,
    DOCS_SITE,
    INDEX_COLUMNS,
    RULES,
    SUITE,
)

REPO = Path(__file__).resolve().parents[2]


def shape(suite) -> list[tuple]:
    """A suite without its ids: what each expectation checks, and how it is explained."""
    return [(e.expectation_type, e.configuration.kwargs, e.meta, e.description) for e in suite.expectations]


def test_the_committed_project_is_a_gx_file_project_rooted_at_expectations():
    root = REPO / "expectations"
    for path in ("great_expectations.yml", f"expectations/{SUITE}.json", f"validation_definitions/{SUITE}.json",
                 f"checkpoints/{SUITE}.json", "plugins", "README.md"):  # fmt: skip
        assert (root / path).exists(), path
    assert not (root / "gx").exists()  # opened as context root, not as a project root holding gx/
    assert "expectations/uncommitted/" in (REPO / ".gitignore").read_text().splitlines()


def test_the_committed_checkpoint_runs_the_committed_suite_on_a_runtime_spark_dataframe(project):
    context = open_project(project)
    checkpoint = completeness_checkpoint(context)
    [validation] = checkpoint.validation_definitions
    assert validation.suite.name == SUITE
    assert shape(validation.suite) == shape(completeness_suite())
    assert [e.meta["rule"] for e in validation.suite.expectations] == list(RULES)
    batch = validation.batch_definition
    assert (batch.data_asset.datasource.name, batch.data_asset.name, batch.name) == (
        DATASOURCE,
        ASSET,
        BATCH_DEFINITION,
    )
    assert batch.data_asset.datasource.type == "spark" and batch.data_asset.type == "dataframe"
    assert [a.type for a in checkpoint.actions] == ["update_data_docs"] and checkpoint.actions[0].site_names == [
        DOCS_SITE
    ]
    assert checkpoint.result_format["unexpected_index_column_names"] == list(INDEX_COLUMNS)


def test_a_new_project_gets_the_same_suite_as_the_committed_one(spark, tmp_path, project):
    # (spark first: adding the Spark data source makes GX get a session, and it should be ours)
    checkpoint = completeness_checkpoint(open_project(tmp_path / "fresh", create=True))
    committed = completeness_checkpoint(open_project(project))
    assert shape(checkpoint.validation_definitions[0].suite) == shape(committed.validation_definitions[0].suite)
    assert checkpoint.result_format == committed.result_format


def test_a_directory_that_is_not_a_project_is_refused_not_scaffolded(tmp_path):
    with pytest.raises(TidegateError, match="is not a Great Expectations project") as raised:
        open_project(tmp_path / "nowhere")
    assert "TIDEGATE_EXPECTATIONS" in raised.value.fix
    assert not (tmp_path / "nowhere").exists()


def test_the_project_directory_defaults_to_expectations_and_follows_the_environment():
    assert default_project_dir({}) == Path("expectations")
    assert default_project_dir({"TIDEGATE_EXPECTATIONS": "/srv/gx"}) == Path("/srv/gx")
