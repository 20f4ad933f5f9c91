"""A micro-batch's writes and its commit, once the engine has planned them.

Every output of the batch is written at once, each filed by its own event time and made
visible by a rename inside the fence (:mod:`.sink.files`); the next state version's frames
are staged beside them; the version is committed last (:class:`.sink.state.StateStore`), so
a crash anywhere before the commit re-runs the batch whole and rewrites the same bytes.
What the batch emits and holds is the engine's to decide; this module only files it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePath

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tidegate.eventtime import policy as P
from tidegate.eventtime.policy import NONE
from tidegate.jobspec import JobSpec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.columns import cols, reused
from tidegate.spark.pipeline.held_stage import UNIT
from tidegate.spark.pipeline.named_outputs import output_time
from tidegate.spark.pipeline.sink.files import run_together, write_batch, write_batch_table, write_table
from tidegate.spark.pipeline.sink.state import StateStore
from tidegate.spark.pipeline.window_partials import FRAME as PARTIALS


class BatchWriter:
    """Writes a job's micro-batches into its lineage and commits their state versions."""

    def __init__(self, spec: JobSpec, paths: JobPaths, store: StateStore, partitions: list[int], fence, *,
                 audit: bool) -> None:  # fmt: skip
        self.spec = spec
        self.paths = paths
        self.store = store
        self.partitions = partitions
        self.fence = fence  # every write and commit of a batch passes it (tidegate.lineage.fence)
        self.audit = audit

    def write(
        self,
        batch_id: int,
        *,
        held: str,
        emitted: DataFrame | None,
        emitted_table: pa.Table | None,
        buffer: DataFrame | None,
        buffer_table: pa.Table | None,
        step_buffers: list[tuple[str, DataFrame]],
        quarantine: DataFrame,
        quarantine_table: pa.Table | None,
        quarantined: int,
        policy_state: DataFrame,
        held_state: pa.Table | None,
        behind: DataFrame | None,
        outcomes: DataFrame,
        judged_events: int,
        named: dict[str, DataFrame] | None = None,
    ) -> tuple[PurePath, list[PurePath], dict[str, float]]:
        """Every output of the batch at once, each filed by its own event time and made visible
        by renames; the next state version's frames staged for :meth:`commit`. (The staging
        folder, the output's folders of the batch, the seconds of each write.)

        ``held`` is the state frame of the stage that holds rows between batches, asked each
        batch (a lineage that held events may go on with parts). The emitted rows are
        ``emitted_table`` when the driver holds them, else ``emitted``; ``buffer`` (or
        ``buffer_table``, window parts on the driver) is the held stage's next frame and
        ``step_buffers`` each later step's; ``quarantine_table``, when it holds all
        ``quarantined`` rows, is written instead of ``quarantine`` (which Spark writes: many
        rows, or large ones); ``held_state``, when the
        driver collected every unit's state, instead of ``policy_state``. ``judged_events``
        counts ``outcomes``, the rows of the audit. ``named``: each named output's rows
        (``sinks.outputs``), filed as the output's are, each in its own folder."""
        staged = self.store.staging(batch_id)
        store = self.paths.store
        visible: list[PurePath] = []
        output_time_column = output_time(self.spec)

        def write_output() -> None:
            if emitted_table is not None:
                # the output folder exists from the lineage's first batch, window or not, as a Spark
                # write leaves it: a region's output begins with its oldest lineage that has one
                if not self.paths.on_object_store:  # a local store's paths are local paths
                    Path(self.paths.output).mkdir(parents=True, exist_ok=True)
                visible.extend(
                    write_batch_table(emitted_table, self.paths.output, batch_id, fence=self.fence, store=store)
                )
                return
            if emitted is None:
                raise ValueError(f"batch {batch_id}: neither the emitted rows nor their table to write")
            visible.extend(
                write_batch(
                    emitted,
                    self.paths.output,
                    batch_id,
                    time_column=output_time_column,
                    probe=True,
                    fence=self.fence,
                    store=store,
                )
            )

        def state_write(name: str, df: DataFrame) -> tuple[str, Callable[[], object]]:
            if name == PARTIALS:  # a row per open window and group: the driver writes it, no commit protocol
                return f"state_{name}", lambda: write_table(df.toArrow(), staged / name, store)
            return f"state_{name}", lambda: df.write.mode("overwrite").parquet(store.uri(staged / name))

        # the output lane fills the window step's cache that the buffer write then reads
        lanes: list[list[tuple[str, Callable[[], object]]]] = [  # what a write returns is not needed
            [("output", write_output)]
            + ([state_write(held, buffer)] if buffer is not None else [])
            + [state_write(name, rows) for name, rows in step_buffers]
            + ([(f"state_{PARTIALS}", lambda: write_table(buffer_table, staged / PARTIALS, store))]
               if buffer_table is not None else []),
            [("quarantine", lambda: write_batch_table(quarantine_table, self.paths.quarantine, batch_id,
                                                      fence=self.fence, store=store)
              if quarantine_table is not None and quarantine_table.num_rows == quarantined
              else write_batch(quarantine, self.paths.quarantine, batch_id,  # many, or large: Spark writes
                               time_column=F.col("arrival_time"), fence=self.fence, store=store)),
             ("state_policy", lambda: write_table(held_state, staged / "policy", store))
             if held_state is not None else state_write("policy", policy_state)],
        ]  # fmt: skip
        for name, rows in (named or {}).items():
            lanes.append([(f"output_{name}", self._named_write(name, rows, batch_id))])
        if behind is not None:
            lanes.append(
                [
                    (
                        "behind_watermark",
                        lambda: write_batch(
                            behind,
                            self.paths.behind_watermark,
                            batch_id,
                            time_column=F.col("system_time"),
                            fence=self.fence,
                            store=store,
                        ),
                    )
                ]
            )
        if self.audit:
            audit_time = _audit_time()
            # one audit row per judged event: counted already, so up to DRIVER_WRITE_ROWS the driver
            # writes them, without a Spark write job (on S3A its commit protocol copies every file)
            lanes.append([("audit", lambda: write_batch(_audit_rows(outcomes), self.paths.audit, batch_id,
                                                        time_column=audit_time, rows=judged_events,
                                                        fence=self.fence, store=store))])  # fmt: skip
        seconds = run_together(lanes)
        return staged, visible, seconds

    def _named_write(self, name: str, rows: DataFrame, batch_id: int) -> Callable[[], None]:
        """Named output ``name``'s write of the batch: its folder exists from the lineage's
        first batch, as the output's does; a re-run batch finds its folders there and keeps them."""
        folder = self.paths.output_of(name)

        def write() -> None:
            if not self.paths.on_object_store:  # a local store's paths are local paths
                Path(folder).mkdir(parents=True, exist_ok=True)
            write_batch(
                rows,
                folder,
                batch_id,
                time_column=output_time(self.spec, name),
                probe=True,
                fence=self.fence,
                store=self.paths.store,
            )

        return write

    def commit(self, batch_id: int, staged: PurePath, frontier: int, clock_us: int | None, documents: dict,
               processed_through_us: int | None = None) -> None:  # fmt: skip
        """The state version, last: a crash anywhere before it re-runs the batch whole."""
        meta = {
            "batch_id": batch_id,
            "partitions": self.partitions,
            "frontier_us": None if frontier == NONE else frontier,
            "clock_us": clock_us,
            "fingerprint": self.spec.fingerprint,
        }
        if self.spec.reference_tables:
            meta["processed_through_us"] = processed_through_us
        self.store.commit(batch_id, staged, meta, documents)


def _audit_rows(outcomes: DataFrame) -> DataFrame:
    """One audit row per judged event: its position and times, its action and reason by name,
    and the watermark it was judged against."""
    return outcomes.select(*_audit_columns(UNIT in outcomes.columns))


@reused
def _audit_time() -> Column:
    return F.coalesce(F.col("system_time"), F.col("arrival_time"))


@reused
def _audit_columns(with_unit: bool) -> tuple[Column, ...]:
    action = F.element_at(F.array(*[F.lit(n) for n in P.ACTION_NAMES]), F.col("action").cast("int") + 1)
    reason = F.element_at(F.array(*[F.lit(n) for n in P.REASON_NAMES]), F.col("reason").cast("int") + 1)
    return (
        *cols(["partition", "offset", "arrival_time", "event_time"] + ([UNIT] if with_unit else [])),
        action.alias("action"),
        reason.alias("reason"),
        F.timestamp_micros("system_us").alias("system_time"),
        F.timestamp_micros("watermark_us").alias("watermark"),
    )
