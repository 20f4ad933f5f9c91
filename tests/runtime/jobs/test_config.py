"""The platform's settings as an operator finds them: every variable the code reads is in the README."""

from __future__ import annotations

import re
from pathlib import Path

from tidegate.runtime.jobs.config import ENVIRONMENT

README = Path(__file__).resolve().parents[3] / "README.md"


def test_the_readmes_configuration_table_names_every_variable():
    text = README.read_text()
    section = text[text.index("## Configuration"):text.index("\n## ", text.index("## Configuration") + 5)]
    rows = "\n".join(line for line in section.splitlines() if line.startswith("| `"))
    named = set(re.findall(r"`(TIDEGATE_[A-Z0-9_<>]+)`", rows))
    wanted = {name.replace("<NAME>", "<R>") for name in ENVIRONMENT}
    missing = sorted(wanted - named - {"TIDEGATE_CONFIG"})  # TIDEGATE_CONFIG: the paragraph above the table
    assert not missing, f"README's Configuration table does not list {missing}: add a row each"
    assert "TIDEGATE_CONFIG" in section
