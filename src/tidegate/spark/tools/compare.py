"""Compare two outputs row for row — streaming vs batch, region vs region, run vs run.

Floating-point aggregates are compared after rounding: the same events summed in another
order (another partitioning) may differ in the last bits, and that is not a difference
in content.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType

from tidegate.lineage.layout import LAYOUT_COLUMNS

DIGITS = 9
IGNORED = LAYOUT_COLUMNS  # where and by which batch a row was written: not its content


@dataclass(frozen=True)
class Difference:
    missing: int  # rows in the reference, not in the candidate
    extra: int  # rows in the candidate, not in the reference (doubles included)
    missing_sample: list
    extra_sample: list

    @property
    def equal(self) -> bool:
        return self.missing == 0 and self.extra == 0


def normalised(df: DataFrame) -> DataFrame:
    cols = []
    for f in df.schema.fields:
        if f.name in IGNORED:
            continue
        if isinstance(f.dataType, (DoubleType, FloatType)):
            cols.append(F.round(F.col(f.name), DIGITS).alias(f.name))
        else:
            cols.append(F.col(f.name))
    return df.select(*cols)


def compare(reference: DataFrame, candidate: DataFrame, sample: int = 5) -> Difference:
    ref, cand = normalised(reference), normalised(candidate)
    cand = cand.select(*ref.columns)
    missing = ref.exceptAll(cand)
    extra = cand.exceptAll(ref)
    return Difference(
        missing.count(),
        extra.count(),
        [r.asDict() for r in missing.limit(sample).collect()],
        [r.asDict() for r in extra.limit(sample).collect()],
    )
