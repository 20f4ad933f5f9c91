"""Which java Tidegate starts: the one Spark's launcher starts.

Every JVM of the platform — Spark's, the local Kafka broker's, the class archive's build —
finds java here, so that all of them run the same build (a class archive made by one JDK is
refused by another).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path


def java_binary(env: Mapping[str, str] | None = None) -> Path | None:
    """The java Spark's launcher starts: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    env = os.environ if env is None else env
    home = env.get("JAVA_HOME")
    found = (
        str(Path(home) / "bin" / "java")
        if home and (Path(home) / "bin" / "java").is_file()
        else shutil.which("java", path=env.get("PATH"))
    )
    return Path(found).resolve() if found else None
