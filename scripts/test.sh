#!/usr/bin/env bash
# Command 2: install everything, then run the whole test suite (real Spark, real files).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/prerequisites.sh
bash scripts/jvm_deps.sh  # again, should maven only now have been installed: a no-op otherwise
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
# lint, format and types first: a finding fails the run before the tests start (pyproject.toml)
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
set +e
# two workers by default (TIDEGATE_TEST_WORKERS=0 runs in one process); a file's tests stay
# together, so its module-scoped platforms and Spark sessions are built once; files go out
# in path order, so tests/bench/ (the drill matrix alone takes a quarter of an hour) starts
# first instead of last
.venv/bin/python -m pytest -n "${TIDEGATE_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test: pytest collected no tests — that is a failure here: the suite must not be empty" >&2
  exit 1
fi
exit "$status"
