"""Where a job spec named from outside may come from: the configured spec folders.

A spec path that reaches the platform through a DAG's parameter (the deploy and planned
stop DAGs, and the Tidegate page, which triggers them) is chosen by whoever may trigger
that DAG, and it is read by the Airflow worker with the platform's rights. So it must
name a ``.yaml``/``.yml`` file inside one of the spec folders — ``TIDEGATE_SPEC_DIRS``
(folders separated by ``:``), by default the checkout's ``jobs/`` — after symlinks are
resolved: a link inside a folder that points outside it is refused, and so is any ``..``.

The command line (``tidegate job deploy PATH``) does not go through here: its operator
runs it with their own rights and could read the file anyway.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

from tidegate.errors import ConfigError

SPEC_DIRS_ENV = "TIDEGATE_SPEC_DIRS"
SPEC_SUFFIXES = (".yaml", ".yml")
MAX_SPEC_BYTES = 1 << 20  # a spec is a page or two of YAML


def spec_dirs(env: Mapping[str, str], default: Path, base: Path) -> tuple[Path, ...]:
    """The spec folders ``env`` configures (relative ones against ``base``), else ``default``."""
    text = (env.get(SPEC_DIRS_ENV) or "").strip()
    if not text:
        return (default,)
    folders = tuple(Path(item) if Path(item).is_absolute() else base / item
                    for item in (part.strip() for part in text.split(os.pathsep)) if item)
    if not folders:
        raise ConfigError(f"{SPEC_DIRS_ENV}={text!r} names no folder", "e.g. /opt/tidegate/jobs:/srv/specs")
    return folders


def confined_spec_path(given: object, folders: Sequence[Path], base: Path) -> Path:
    """The real path of the spec ``given`` names, when it is a YAML file in one of
    ``folders``; a relative path is taken from ``base`` (the checkout), then from each
    folder. Raises :class:`ConfigError` otherwise. Never reads the file."""
    if not isinstance(given, str) or not given.strip():
        raise ConfigError("the spec path is empty or not text",
                          "give the path of a YAML spec under the spec folders, e.g. jobs/device_fleet.yaml")
    where = " or ".join(str(folder) for folder in folders)
    allowed = f"put the spec under {where}, or add its folder to {SPEC_DIRS_ENV}"
    if "\0" in given or any(ord(c) < 32 for c in given):
        raise ConfigError("the spec path holds control characters", allowed)
    path = Path(given.strip())
    if ".." in path.parts:
        raise ConfigError(f"the spec path {given!r} contains '..'", f"name the file itself; {allowed}")
    candidates = [path] if path.is_absolute() else [base / path, *(folder / path for folder in folders)]
    found = next((c for c in candidates if os.path.lexists(c)), None)
    if found is None:
        raise ConfigError(f"{given}: no such job spec file", f"check the path; {allowed}")
    try:
        real = found.resolve(strict=True)
    except (OSError, RuntimeError):  # a dangling or looping link
        raise ConfigError(f"{given}: a link that leads nowhere", allowed) from None
    roots = [folder.resolve() for folder in folders]
    if not any(real.is_relative_to(root) for root in roots):
        via = " (through a symlink)" if real != found.absolute() else ""
        raise ConfigError(f"the spec path {given!r} is outside the spec folders{via}", allowed)
    if not real.is_file():
        raise ConfigError(f"{given}: not a regular file", "give the path of a YAML spec file")
    if real.suffix not in SPEC_SUFFIXES:
        raise ConfigError(f"{given}: a job spec is a .yaml or .yml file", "rename it, or give the spec's own file")
    if real.stat().st_size > MAX_SPEC_BYTES:
        raise ConfigError(f"{given}: larger than {MAX_SPEC_BYTES >> 20} MiB, far beyond any job spec",
                          "give the spec's own file")
    return real
