"""Operators: :mod:`.lifecycle` (deploy, start, stop: one controller call each) and
:mod:`.spark_submit` (the batch reference and the completeness check, on a region's Spark)."""
