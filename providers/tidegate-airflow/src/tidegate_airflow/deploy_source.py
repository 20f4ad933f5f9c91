"""What the deploy DAG's form asks to deploy: a job spec, or a Stream Analytics query and its
side file — exactly one of a spec and a query.

The form fills **spec** with the demo's spec, so a query given while the spec still holds that
default replaces it; a query and any other spec is refused, saying which field to clear. The
paths themselves are the hook's to confine (:meth:`~tidegate_airflow.hooks.tidegate.TidegateHook.translate`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tidegate.errors import ConfigError, excerpt
from tidegate_airflow.dag_defaults import SPEC


@dataclass(frozen=True)
class DeploySource:
    """A spec path, or a query path with its side file's (None when not given)."""

    spec: str | None = None
    query: str | None = None
    inputs: str | None = None


def deploy_source(spec: object, query: object = None, inputs: object = None, default_spec: str = SPEC) -> DeploySource:
    """The source the params ``spec``, ``query`` and ``inputs`` name, each text or empty.
    Raises :class:`ConfigError` saying which field to change."""
    spec, query, inputs = _text(spec, "spec"), _text(query, "query"), _text(inputs, "inputs")
    if query is None:
        if inputs is not None:
            raise ConfigError(
                "inputs is a query's side file, and no query is given",
                "give the query (.asaql) in query too, or clear inputs to deploy the spec",
            )
        if spec is None:
            raise ConfigError(
                "neither spec nor query is given",
                "give a job spec in spec (e.g. jobs/device_fleet.yaml), or a Stream Analytics query in query",
            )
        return DeploySource(spec=spec)
    if spec is not None and spec != default_spec:
        raise ConfigError(
            "both spec and query are given: a deploy takes one of them",
            "clear spec to deploy the query (a query replaces the default spec), or clear query",
        )
    return DeploySource(query=query, inputs=inputs)


def _text(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{field} is {excerpt(value)}, not a path", f"give {field} as text: a path, or nothing")
    return value.strip() or None
