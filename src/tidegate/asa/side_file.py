"""The side file of ``tidegate asa import --inputs``: what a Stream Analytics job keeps beside
its query — the event ordering policy, the inputs and the outputs — in the names of the job's
JSON definition where it has them.

```yaml
eventsOutOfOrderPolicy: Adjust               # Adjust (default) or Drop: out-of-order and late events alike
eventsOutOfOrderMaxDelayInSeconds: 30        # default 0
eventsLateArrivalMaxDelayInSeconds: 120      # default 5
inputs:
  input:                                     # the name the query reads FROM
    payload: {deviceId: string, eventTime: string, temperature: double}
    source: {event_log: var/event-log}       # Tidegate's source block; default the default event log
  devices:                                   # reference data: the query JOINs it
    type: Reference                          # Stream (default) or Reference, as the job's input type
    serialization: Csv                       # Csv (default) or Parquet
    path: jobs/samples/device_sites          # a folder of valid_from=<time>/ snapshots (jobspec.md#reference)
    columns: {deviceId: string, max_temperature: double}
outputs:
  output: {}                                 # the names the query writes INTO: when given, all of them and no other
```

Stream Analytics has one action for events out of order and events late beyond their
tolerances (``eventsOutOfOrderPolicy``); the spec has one each, and both get it. Its inputs carry
no schema, so ``payload`` is Tidegate's: without it the translator infers the fields from the
query (:mod:`tidegate.asa.translate`). A reference input's blob ``pathPattern`` with its
``{date}/{time}`` becomes Tidegate's folder of ``valid_from=<time>`` snapshots, ``path``; its
``columns`` are Tidegate's too (a CSV names them, but not their types). Without a side file
every value is its default, which are Stream Analytics' defaults too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tidegate.errors import ConfigError, excerpt
from tidegate.jobspec.hints import did_you_mean
from tidegate.jobspec.spec_yaml import SpecLoader, yaml_error

MAX_SIDE_FILE_BYTES = 64 * 1024
POLICY_FIELDS = (
    "eventsOutOfOrderPolicy",
    "eventsOutOfOrderMaxDelayInSeconds",
    "eventsLateArrivalMaxDelayInSeconds",
)
TOP_FIELDS = ("name", "description", *POLICY_FIELDS, "inputs", "outputs")
INPUT_FIELDS = ("type", "payload", "source", "time_format", "serialization", "path", "columns")
REFERENCE_FIELDS = ("type", "serialization", "path", "columns")
SERIALIZATIONS = {"csv": "csv", "parquet": "parquet"}
ACTIONS = {"adjust": "adjust", "drop": "drop"}
DEFAULT_LATE_S = 5
MAX_DELAY_S = 20 * 86_400  # the spec's bound on a tolerance


@dataclass(frozen=True)
class InputSide:
    payload: dict[str, str] | None = None
    source: dict[str, Any] | None = None
    time_format: str | None = None
    reference: dict[str, Any] | None = None  # a Reference input: path, format, columns


@dataclass(frozen=True)
class SideFile:
    """The side file's values, each at its default when not given."""

    name: str | None = None
    description: str | None = None
    out_of_order_s: float = 0
    late_arrival_s: float = DEFAULT_LATE_S
    action: str = "adjust"
    inputs: dict[str, InputSide] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    origin: str | None = None  # None: no side file, every value its default

    def references(self) -> frozenset[str]:
        """The names of the Reference inputs, lower case (the query's names are case-insensitive)."""
        return frozenset(name.lower() for name, side in self.inputs.items() if side.reference is not None)

    def payloads(self) -> dict[str, list[str]]:
        """Each stream input's payload fields, where the side file gives them."""
        return {name: list(side.payload) for name, side in self.inputs.items() if side.payload}

    def reference(self, name: str) -> dict[str, Any]:
        return next(s.reference for n, s in self.inputs.items() if n.lower() == name.lower() and s.reference)

    def policy(self) -> dict[str, str]:
        """The spec's ``policy`` section."""
        return {
            "out_of_order_tolerance": _seconds(self.out_of_order_s),
            "out_of_order_action": self.action,
            "late_arrival_tolerance": _seconds(self.late_arrival_s),
            "late_arrival_action": self.action,
        }


def _seconds(value: float) -> str:
    return f"{int(value)}s" if float(value).is_integer() else f"{int(round(value * 1000))}ms"


def read_side_file(path: Path | None) -> SideFile:
    """The side file at ``path``; the defaults when ``path`` is None."""
    if path is None:
        return SideFile()
    where = str(path)
    try:
        if path.stat().st_size > MAX_SIDE_FILE_BYTES:
            raise ConfigError(f"{where}: more than {MAX_SIDE_FILE_BYTES:,} bytes", "a side file is a few lines")
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=SpecLoader)  # noqa: S506 — a SafeLoader
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file", "check the path given to --inputs") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read it ({type(exc).__name__})", "give a UTF-8 YAML file") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested too deeply to read", "a side file is a few levels deep") from None
    except yaml.YAMLError as exc:  # as a spec's: where, and what kind of wrong, never the file's text
        raise yaml_error(path, exc) from None
    return parse_side_file(data or {}, where)


def parse_side_file(data: Any, where: str) -> SideFile:
    top = _mapping(data, where, "the side file")
    _known(top, TOP_FIELDS, where, "")
    action = top.get("eventsOutOfOrderPolicy", "Adjust")
    if not isinstance(action, str) or action.lower() not in ACTIONS:
        raise ConfigError(
            f"{where}: eventsOutOfOrderPolicy is {excerpt(action)}",
            "write Adjust (events get the time the tolerance allows) or Drop (they are dropped, counted)",
        )
    inputs = {
        str(name): _input(value, where, f"inputs.{name}")
        for name, value in _mapping(top.get("inputs", {}), where, "inputs").items()
    }
    outputs = tuple(str(n) for n in _mapping(top.get("outputs", {}), where, "outputs"))
    return SideFile(
        name=_text(top.get("name"), where, "name"),
        description=_text(top.get("description"), where, "description"),
        out_of_order_s=_delay(top, "eventsOutOfOrderMaxDelayInSeconds", 0, where),
        late_arrival_s=_delay(top, "eventsLateArrivalMaxDelayInSeconds", DEFAULT_LATE_S, where),
        action=ACTIONS[action.lower()],
        inputs=inputs,
        outputs=outputs,
        origin=where,
    )


def _input(value: Any, where: str, path: str) -> InputSide:
    side = _mapping(value if value is not None else {}, where, path)
    _known(side, INPUT_FIELDS, where, path)
    kind = side.get("type", "Stream")
    if not isinstance(kind, str) or kind.lower() not in ("stream", "reference"):
        raise ConfigError(f"{where}: {path}.type is {excerpt(kind)}", "write Stream (the default) or Reference")
    if kind.lower() == "reference":
        return InputSide(reference=_reference(side, where, path))
    for key in REFERENCE_FIELDS[1:]:
        if key in side:
            raise ConfigError(f"{where}: {path}.{key} on a stream input", f"write {path}.type: Reference, or remove it")
    payload = side.get("payload")
    if payload is not None:
        payload = {str(k): str(v) for k, v in _mapping(payload, where, f"{path}.payload").items()}
    source = side.get("source")
    if source is not None:
        source = dict(_mapping(source, where, f"{path}.source"))
    return InputSide(payload=payload, source=source, time_format=_text(side.get("time_format"), where, path))


def _reference(side: Mapping, where: str, path: str) -> dict[str, Any]:
    """A Reference input as the spec's reference fields (without name, keys and type)."""
    for key in ("payload", "source", "time_format"):
        if key in side:
            raise ConfigError(f"{where}: {path}.{key} on reference data", "a Reference input has path and columns")
    serialization = side.get("serialization", "Csv")
    if not isinstance(serialization, str) or serialization.lower() not in SERIALIZATIONS:
        raise ConfigError(f"{where}: {path}.serialization is {excerpt(serialization)}", "write Csv or Parquet")
    folder = side.get("path")
    if not isinstance(folder, str) or not folder or "{" in folder:
        raise ConfigError(
            f"{where}: {path}.path is {excerpt(folder)}",
            "give the folder of the snapshots, each in valid_from=<ISO-8601 time>/ (a blob pathPattern's "
            "{date}/{time} has no Tidegate form: jobspec.md#reference)",
        )
    columns = side.get("columns")
    if not columns:
        raise ConfigError(f"{where}: {path}.columns is missing", f"give {path}.columns: {{column: type}}")
    columns = {str(k): str(v) for k, v in _mapping(columns, where, f"{path}.columns").items()}
    return {"path": folder, "format": SERIALIZATIONS[serialization.lower()], "columns": columns}


def _delay(top: Mapping, key: str, default: float, where: str) -> float:
    value = top.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_DELAY_S:
        raise ConfigError(
            f"{where}: {key} is {excerpt(value)}",
            f"give a number of seconds from 0 to {MAX_DELAY_S:,} (20 days; Stream Analytics' -1, "
            "'wait forever', has no Tidegate form)",
        )
    return value


def _mapping(value: Any, where: str, path: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: {path} is {excerpt(value)}, not a mapping", f"write {path} as name: value lines")
    return value


def _known(mapping: Mapping, known: tuple[str, ...], where: str, path: str) -> None:
    for key in mapping:
        if key not in known:
            name = f"{path}.{key}" if path else str(key)
            raise ConfigError(
                f"{where}: unknown field {excerpt(name)}" + did_you_mean(str(key), known),
                f"known fields here: {', '.join(known)}",
            )


def _text(value: Any, where: str, path: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{where}: {path} is {excerpt(value)}", f"write {path} as text")
    return value
