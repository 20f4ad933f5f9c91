"""How the benchmarks score an output against the batch path: key by key (window and group).

``missing`` keys are in the reference and not in the output, ``extra`` the reverse,
``duplicated`` counts rows beyond the first for a key, ``differing`` keys whose values
differ (doubles compared after rounding to 9 digits: another summation order may differ in
the last bits).
"""

from __future__ import annotations


def keyed_difference(reference, ours, keys: list[str]) -> dict:
    from pyspark.sql import functions as F

    values = [col for col in reference.columns if col not in keys]
    ours = ours.select(*reference.columns)

    def rounded(df):
        return df.select(*keys, *[F.round(F.col(v), 9).alias(v) if dict(df.dtypes)[v] == "double" else F.col(v)
                                  for v in values])

    ref, got = rounded(reference), rounded(ours)
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
