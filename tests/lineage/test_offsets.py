"""The offset log of a lineage's checkpoint (tidegate.lineage.offsets): what each batch read.

Entries are written by hand here the way Spark writes them (``v1``, a metadata line, one
line per source), so these pin down the format without starting Spark.
"""

from __future__ import annotations

import pytest

from tidegate.lineage.offsets import SourceError, SourceOffset, batch_offsets, parse_offset


def test_offset_json_is_stable_and_round_trips():
    offset = SourceOffset({1: 456, 0: 123}, 1_767_225_600_000_000)
    assert offset.to_json() == '{"v": 1, "offsets": {"0": 123, "1": 456}, "clock": 1767225600000000}'
    assert parse_offset(offset.to_json()) == offset
    assert parse_offset(offset.to_dict()) == offset
    assert parse_offset('{"v": 1, "offsets": {"0": 5}, "clock": null}') == SourceOffset({0: 5}, None)


@pytest.mark.parametrize(
    "text",
    [
        '{"offsets": {"0": 1}}',  # no version
        '{"v": 2, "offsets": {"0": 1}, "clock": 0}',  # a newer format
        '{"v": 1, "offsets": {"zero": 1}, "clock": 0}',
        "not json",
    ],
)
def test_unreadable_offsets_say_what_was_expected(text):
    with pytest.raises(SourceError, match="not a tidegate source offset"):
        parse_offset(text)


def test_batch_offsets_reads_sparks_offset_log(tmp_path):
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'
    (offsets / "0").write_text(f'v1\n{meta}\n{{"v": 1, "offsets": {{"0": 3, "1": 2}}, "clock": 10}}')
    (offsets / "1").write_text(f'v1\n{meta}\n{{"v": 1, "offsets": {{"0": 6, "1": 4}}, "clock": 20}}')
    assert batch_offsets(tmp_path, 0) == (None, SourceOffset({0: 3, 1: 2}, 10))
    assert batch_offsets(tmp_path, 1) == (SourceOffset({0: 3, 1: 2}, 10), SourceOffset({0: 6, 1: 4}, 20))
    with pytest.raises(SourceError, match="has not planned batch 2"):
        batch_offsets(tmp_path, 2)
    (offsets / "3").write_text(f"v1\n{meta}\n-\n")
    with pytest.raises(SourceError, match="exactly one tidegate source"):
        batch_offsets(tmp_path, 3)
