"""The platform's settings as an operator finds them: every variable the code reads is in the
configuration guide (docs/guide/configuration.md)."""

from __future__ import annotations

import re
from pathlib import Path

from tidegate.runtime.config import ENVIRONMENT

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "configuration.md"


def test_the_configuration_guides_table_names_every_variable():
    section = GUIDE.read_text()
    rows = "\n".join(line for line in section.splitlines() if line.startswith("| `"))
    named = set(re.findall(r"`(TIDEGATE_[A-Z0-9_<>]+)`", rows))
    wanted = {name.replace("<NAME>", "<R>") for name in ENVIRONMENT}
    missing = sorted(wanted - named - {"TIDEGATE_CONFIG"})  # TIDEGATE_CONFIG: the paragraph above the table
    assert not missing, f"docs/guide/configuration.md does not list {missing}: add a row each"
    assert "TIDEGATE_CONFIG" in section
