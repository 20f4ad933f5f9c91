"""Python workers import the installed, byte-compiled pyspark instead of Spark's zip copy.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on the
``PYTHONPATH`` of every Python process it starts: the streaming source runner of each
query, the data source planners, the worker daemon of each executor. Imported from a zip,
pyspark's modules are compiled from source at every start, which roughly triples the import
paid by each query start of a Python data source such as ``tidegate``
(docs/benchmarks/bench_source.md).
With a pip-installed pyspark, ``SPARK_HOME`` is that package, so the zip holds exactly the
code installed (and byte-compiled) beside it.

:func:`install` writes a ``.pth`` file into the environment's site-packages. At interpreter
start it removes from ``sys.path`` the zips of *that* site-packages' pyspark only — a
Spark distribution elsewhere (another version) keeps its own zips. It imports nothing of
Tidegate, so it stays harmless if Tidegate is uninstalled.

    python -m tidegate.spark.tools.workerpath      # what scripts/bootstrap.sh and the image run
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

PTH_NAME = "tidegate-pyspark-workers.pth"
# one line: .pth files execute lines that start with "import"; ``sitedir`` is the
# site-packages directory being processed (a local of site.addpackage)
PTH_LINE = (
    "import os, sys; exec(\"lib = os.path.realpath(os.path.join(sitedir, 'pyspark', 'python', 'lib'))\\n"
    "for p in list(sys.path):\\n"
    "    if p.endswith('.zip') and os.path.realpath(os.path.dirname(p)) == lib:\\n"
    '        sys.path.remove(p)")'
)
PTH_TEXT = (
    "# Tidegate: import pyspark from this site-packages (byte-compiled), not from the copy of the\n"
    "# same code zipped in pyspark/python/lib, which Spark puts first on its workers' PYTHONPATH.\n"
    f"{PTH_LINE}\n"
)


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def install(site_dir: Path | None = None) -> Path:
    """Write the ``.pth`` file into ``site_dir`` (default: this interpreter's site-packages)."""
    target = (site_dir or site_packages()) / PTH_NAME
    if not target.exists() or target.read_text() != PTH_TEXT:
        target.write_text(PTH_TEXT)
    return target


def main() -> int:
    path = install()
    print(f"workers of this environment import pyspark from {path.parent}: {path.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
