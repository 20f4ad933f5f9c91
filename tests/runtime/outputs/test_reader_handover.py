"""Which time a lineage's output is handed over by: a window's end, or an analytic row's
system time (tidegate.runtime.outputs.reader.handover_column), read from the files' schema."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from tidegate.lineage.committed import handover_column
from tidegate.lineage.layout import batch_folder_name, hour_dir


def write(output, **columns):
    folder = hour_dir(output, 0) / batch_folder_name(0)
    folder.mkdir(parents=True)
    pq.write_table(
        pa.table({name: pa.array(values, pa.timestamp("us")) for name, values in columns.items()}),
        folder / "part-0.parquet",
    )


def test_window_rows_hand_over_by_window_end_and_analytic_rows_by_system_time(tmp_path):
    write(tmp_path / "windows", window_start=[0], window_end=[60_000_000])
    write(tmp_path / "analytic", system_time=[5])
    assert handover_column(tmp_path / "windows") == "window_end"
    assert handover_column(tmp_path / "analytic") == "system_time"
    assert handover_column(tmp_path / "nothing yet") == "window_end"
