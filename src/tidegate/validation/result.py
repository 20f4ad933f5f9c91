"""What a completeness check found, in words an operator can act on.

Every finding names window rows as ``(start, end] key=value …`` — their true interval:
``[start, end)`` for ``edges: start_inclusive`` windows, ``[start, end]`` for sessions,
which hold their first event — with a few samples and the total, e.g.::

    missing 1 window row: (2026-01-01T00:03:00Z, 2026-01-01T00:04:00Z] deviceId=dev-0003
    doubled 1 window row: (2026-01-01T00:01:00Z, 2026-01-01T00:02:00Z] deviceId=dev-0001 (2 rows)
    1 window row differs from the reference: (2026-01-01T00:02:00Z, 2026-01-01T00:03:00Z] deviceId=dev-0002: readings expected 5, got 6

and a join's or an analytic job's rows by their output time and input position(s)::

    missing 1 join row: at 2026-01-01T12:05:00Z partition=0 offset=0 right_partition=1 right_offset=0
"""  # noqa: E501  (the samples above are verbatim one-line findings; wrapping would misquote them)

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidegate.errors import TidegateError
from tidegate.eventtime.durations import format_duration, format_time_us

SHOWN_SAMPLES = 5  # in messages; the result keeps every sample GX returned


@dataclass(frozen=True)
class Mismatch:
    column: str
    expected: str | None  # as Spark casts it to text; None for null
    got: str | None

    def __str__(self) -> str:
        return f"{self.column} expected {_text(self.expected)}, got {_text(self.got)}"


@dataclass(frozen=True)
class Sample:
    """One row of the comparison frame that broke a rule."""

    window_start_us: int
    window_end_us: int
    key: tuple[tuple[str, Any], ...]  # group-by column → value, in spec order; () without group-by
    output_rows: int
    reference_rows: int
    null_columns: tuple[str, ...] = ()
    mismatches: tuple[Mismatch, ...] = ()
    window_us: int | None = None
    brackets: str = "[)"  # how the window holds its edges: "(]" (Stream Analytics'), "[)" or "[]" (sessions)
    instant: bool = False  # a per-event row (join, analytic): named by its output time and position

    @classmethod
    def from_index(cls, row: dict[str, Any], brackets: str, instant: bool = False) -> Sample:
        """From one entry of GX's ``partial_unexpected_index_list`` (see project.INDEX_COLUMNS)."""
        key = json.loads(row.get("key") or "{}")
        mismatches = json.loads(row.get("mismatches") or "[]")
        nulls = row.get("null_columns") or ""
        return cls(
            window_start_us=int(row["window_start_us"]),
            window_end_us=int(row["window_end_us"]),
            key=tuple(key.items()),
            output_rows=int(row.get("output_rows") or 0),
            reference_rows=int(row.get("reference_rows") or 0),
            null_columns=tuple(c for c in nulls.split(",") if c),
            mismatches=tuple(Mismatch(m["column"], m["expected"], m["got"]) for m in mismatches),
            window_us=row.get("window_us"),
            brackets=brackets,
            instant=instant,
        )

    @property
    def identity(self) -> tuple:
        return self.window_start_us, self.window_end_us, self.key

    @property
    def window(self) -> str:
        """``(start, end] deviceId=dev-0003``: the window row as an operator searches for it; a
        per-event row as ``at 2026-01-01T12:05:00Z partition=0 offset=1 right_partition=1 …``."""
        start, end = format_time_us(self.window_start_us), format_time_us(self.window_end_us)
        if self.instant:
            interval = f"at {end}"
        else:
            interval = f"{self.brackets[0]}{start}, {end}{self.brackets[1]}"
        keys = " ".join(f"{k}={_text(v)}" for k, v in self.key)
        return f"{interval} {keys}" if keys else interval


@dataclass(frozen=True)
class Finding:
    """What one failed rule found: the total and the first rows GX reported.

    ``total`` is GX's count of offending comparison-frame rows, except for doubled rows,
    where it is the number of (window, key) that have more than one row (GX counts each
    copy). A doubled extra row therefore counts twice among the extras.
    """

    rule: str
    total: int
    samples: tuple[Sample, ...]
    expected_window: str = ""  # window_size_matches_spec: what the spec allows
    noun: str = "window row"  # what the job outputs: window rows, join rows, analytic rows

    def __str__(self) -> str:
        n = self.total
        rows = f"{n} {self.noun}{'' if n == 1 else 's'}"
        head = {
            "no_missing_rows": f"missing {rows}",
            "no_extra_rows": f"{n} extra {self.noun}{'' if n == 1 else 's'} (not in the reference)",
            "no_doubled_rows": f"doubled {rows}",
            "no_null_values": f"{rows} with null values",
            "values_equal_reference": f"{rows} {'differs' if n == 1 else 'differ'} from the reference",
            "window_size_matches_spec": f"{rows} not {self.expected_window}",
        }.get(self.rule, f"{self.rule}: {rows}")
        shown = [self._sample_text(s) for s in self.samples[:SHOWN_SAMPLES]]
        more = n - len(shown)
        if more > 0 and shown:
            shown.append(f"… and {more} more")
        return f"{head}: {', '.join(shown)}" if shown else head

    def _sample_text(self, s: Sample) -> str:
        if self.rule == "no_doubled_rows":
            if s.output_rows > 1:
                return f"{s.window} ({s.output_rows} rows)"
            return f"{s.window} (the reference has {s.reference_rows} rows)"
        if self.rule == "no_extra_rows" and s.output_rows > 1:
            return f"{s.window} ({s.output_rows} rows)"
        if self.rule == "no_null_values":
            return f"{s.window} (null {', '.join(s.null_columns)})"
        if self.rule == "values_equal_reference":
            return f"{s.window}: " + "; ".join(str(m) for m in s.mismatches)
        if self.rule == "window_size_matches_spec" and s.window_us is not None:
            return f"{s.window} is {format_duration(int(s.window_us))}"
        return s.window


@dataclass(frozen=True)
class RuleOutcome:
    """One expectation's verdict. ``unexpected`` counts comparison-frame rows."""

    rule: str
    success: bool
    description: str
    unexpected: int = 0
    error: str | None = None  # GX could not evaluate the expectation


@dataclass(frozen=True)
class CompletenessResult:
    label: str
    job: str
    span_us: tuple[int, int] | None  # window ends in (from, to]; None: the whole output
    success: bool
    rules: tuple[RuleOutcome, ...]
    findings: tuple[Finding, ...]
    compared_rows: int  # rows of the comparison frame
    replay_from_us: int | None  # where a replay must start to recompute the span
    data_docs_index: Path | None = None
    data_docs_page: Path | None = None  # this validation's page
    failures: tuple[str, ...] = field(default=())  # rules GX could not evaluate, with the error
    per_event: bool = False  # rows of events (spanned by their output time), not windows

    def rule(self, name: str) -> RuleOutcome:
        for outcome in self.rules:
            if outcome.rule == name:
                return outcome
        raise KeyError(f"no rule {name!r}; rules: {', '.join(r.rule for r in self.rules)}")

    def finding(self, name: str) -> Finding | None:
        return next((f for f in self.findings if f.rule == name), None)

    @property
    def span_text(self) -> str:
        if self.span_us is None:
            return "the whole output"
        low, high = self.span_us
        what = "output times" if self.per_event else "window ends"
        return f"{what} in ({format_time_us(low)}, {format_time_us(high)}]"

    def describe(self) -> str:
        """A few lines for a task log: the verdict, each rule, each finding."""
        verdict = "passed" if self.success else "FAILED"
        lines = [f"completeness {self.label!r} of {self.job} over {self.span_text}: {verdict} "
                 f"({self.compared_rows} rows compared)"]  # fmt: skip
        for r in self.rules:
            lines.append(f"  {'ok  ' if r.success else 'FAIL'} {r.rule}" + (f": {r.error}" if r.error else ""))
        lines += [f"  - {f}" for f in self.findings]
        if self.data_docs_page or self.data_docs_index:
            lines.append(f"  Data Docs: {self.data_docs_page or self.data_docs_index}")
        return "\n".join(lines)

    def raise_for_failure(self) -> None:
        """semantics §8: a failed check fails the operation and says what is missing."""
        if self.success:
            return
        what = "; ".join([str(f) for f in self.findings] + list(self.failures))
        problem = f"completeness check {self.label!r} of job {self.job} failed over {self.span_text}: {what}"
        if self.replay_from_us is None:
            replay = "replay the job into a fresh output from the start of its retained input"
        else:
            replay = (
                f"replay the job into a fresh output from {format_time_us(self.replay_from_us)} or earlier "
                "(the span's start minus the job's look-back), which recomputes the span"
            )
        replay += " (a replay over the old output keeps the rows already written), then check again"
        docs = self.data_docs_page or self.data_docs_index
        where = f"; the Data Docs at {docs} show every failed expectation" if docs else ""
        raise TidegateError(problem, replay + where)


def _text(value: Any) -> str:
    return "null" if value is None else str(value)
