"""Compare two outputs — streaming vs batch, region vs region, run vs run: row for row
(:func:`compare`), or key by key, a window and its group (:func:`keyed_difference`, which the
benchmarks score with).

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


def keyed_difference(reference: DataFrame, candidate: DataFrame, keys: list[str]) -> dict[str, int]:
    """``candidate`` against ``reference`` key by key (``keys``: a window and its group), both
    :func:`normalised`: ``rows`` the candidate holds; ``missing`` keys in the reference and not
    in the candidate, ``extra`` the reverse; ``duplicated`` the candidate's rows beyond the first
    of a key; ``differing`` keys whose values differ."""
    ref = normalised(reference)
    got = normalised(candidate).select(*ref.columns)
    values = [c for c in ref.columns if c not in keys]
    rows = got.count()
    distinct = got.select(*keys).distinct()
    joined = ref.alias("r").join(got.dropDuplicates(keys).alias("g"), keys, "inner")
    differing = joined.where(" OR ".join(f"NOT (r.`{v}` <=> g.`{v}`)" for v in values)).count() if values else 0
    return {
        "rows": rows,
        "missing": ref.select(*keys).exceptAll(distinct).count(),
        "extra": distinct.exceptAll(ref.select(*keys)).count(),
        "duplicated": rows - distinct.count(),
        "differing": differing,
    }
