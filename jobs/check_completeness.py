"""spark-submit entry point: the Great Expectations completeness check of a job's output.

    spark-submit jobs/check_completeness.py JOB --target east|west|consumer|pair \
        [--run N | --from T --to T] [--reference DIR] [--result FILE.json]

Exits 1 when the check fails, naming the missing, doubled or differing windows. The same
as ``tidegate output check``.
"""

import sys

from tidegate.cli import main

if __name__ == "__main__":
    sys.exit(main(["check", *sys.argv[1:]]))
