"""spark-submit entry point of a planned run's streaming driver (client mode).

    spark-submit --master spark://HOST:7077 jobs/streaming_driver.py --run-id N

Normally the controller or a region supervisor starts drivers as
``python -m tidegate.runtime.jobs.driver --run-id N``; this file lets a site that launches
every Spark application through spark-submit do the same. The run must have been planned
by ``tidegate job start`` (with the region's launcher set to ``supervisor``).
"""

import sys

from tidegate.runtime.jobs.driver import main

if __name__ == "__main__":
    sys.exit(main())
