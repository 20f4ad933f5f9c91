"""spark-submit entry point: the batch path of a registered job over a span of the log.

    spark-submit jobs/batch_reference.py JOB --from 2026-01-01T00:10:00Z --output DIR [--version N]

Writes what a stream started with that first output time emits, under DIR/output — the
reference a streaming output must equal. The same as ``tidegate job batch-reference``.
"""

import sys

from tidegate.cli import main

if __name__ == "__main__":
    sys.exit(main(["batch-reference", *sys.argv[1:]]))
