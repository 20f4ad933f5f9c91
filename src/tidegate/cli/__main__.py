"""``python -m tidegate.cli``: the ``tidegate`` command under a given interpreter (the region
supervisor is started this way, with its parent's ``sys.executable``)."""

import sys

from tidegate.cli import main

sys.exit(main())
