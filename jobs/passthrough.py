"""spark-submit entry point: copy the event log to Parquet, exactly once.

    spark-submit jobs/passthrough.py --event-log PATH --output DIR --checkpoint DIR \
        [--available-now | --until-caught-up] [--max-events-per-batch N]

The logic lives in :mod:`tidegate.spark.tools.passthrough`; this file only calls it.
"""

import sys

from tidegate.spark.tools.passthrough import main

if __name__ == "__main__":
    sys.exit(main())
