"""The plugins folder is on Airflow's path; the tests import from it the same way."""

import sys

from airflow_support import REPO

if str(REPO / "plugins") not in sys.path:
    sys.path.insert(0, str(REPO / "plugins"))
