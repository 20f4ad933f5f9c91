#!/usr/bin/env bash
# Command 1: install everything, then run the main job end to end on the embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/tidegate demo run "$@"
