"""The job spec as the runtime sees it: frozen dataclasses, and what follows from them.

A :class:`JobSpec` is what a job reads (:class:`SourceSpec`), how it times events (the
payload field, :class:`~tidegate.eventtime.policy.TimePolicy`), what it computes (filter,
select, or a window with group_by and aggregates) and where it writes (:class:`SinksSpec`).
Values are already checked and normalised when they get here: :mod:`tidegate.jobspec.parse`
builds them; nothing in this module reads YAML.

Two numbers the runtime takes from a spec:

* :attr:`JobSpec.lookback_us` — semantics §6: largest span of a stateful element (window span,
  session: max duration; LAG / LAST: LIMIT DURATION; ISFIRST: its period; a join: its
  DATEDIFF bound) + late-arrival tolerance + early-arrival window (5 min). With
  :class:`StepSpec` steps, each step's span adds to the span of the step it reads.
* :attr:`JobSpec.fingerprint` — a hash of exactly the parts that change results, so a
  checkpoint is never resumed under changed logic, and renaming, re-versioning,
  reformatting or turning the audit off does not force a replay.

:meth:`JobSpec.to_dict` writes the spec back in the form :func:`~tidegate.jobspec.parse_spec`
reads (``parse_spec(spec.to_dict()) == spec``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from tidegate.eventtime.durations import format_duration
from tidegate.eventtime.policy import EARLY_WINDOW_US, TimePolicy
from tidegate.eventtime.windows import Window
from tidegate.jobspec.analytics import AnalyticSpec
from tidegate.jobspec.cross_apply import CrossApplySpec, row_fields
from tidegate.jobspec.expressions import canonical_expression
from tidegate.jobspec.joins import InputSpec, JoinSpec
from tidegate.jobspec.reference import ReferenceSpec
from tidegate.jobspec.references import joined_columns, references_canonical, references_describe, references_dict
from tidegate.jobspec.source import InputSource, PayloadLimits, SourceSpec, policy_dict
from tidegate.jobspec.step_spec import EVENT_OUTPUT, FIRST_STEP_READS, JOIN_OUTPUT, WINDOW_OUTPUT, NamedExprs, StepSpec
from tidegate.jobspec.timestamp_by import timestamp_by_key
from tidegate.jobspec.window_form import window_dict as _window_dict
from tidegate.jobspec.window_form import window_text as _window_text

FINGERPRINT_FORMAT = 1  # bump when the normalisation below changes (it forces replays)
# The fields of a step's query: at the top level of a job without steps, in its first step otherwise.
QUERY_FIELDS = ("analytics", "join", "filter", "select", "window", "group_by", "aggregates", "having")

PRIMARY_OUTPUT = "output"  # the job's own output's name, beside the named ones of ``sinks.outputs``


@dataclass(frozen=True)
class SinksSpec:
    """What a job writes — not where: the platform places every output in the lineage's folder
    under the region's storage root (:mod:`tidegate.lineage.layout`); quarantine is always
    written (semantics §9)."""

    output_format: str = "parquet"
    output_step: str | None = None  # the step the output emits (jobs with steps: the last one)
    outputs: tuple[tuple[str, str], ...] = ()  # named outputs beside it: (name, the step it holds), as written
    audit: bool = True  # one row per event: kept / adjusted / dropped, with the reason


@dataclass(frozen=True)
class JobSpec:
    name: str
    version: int
    payload: dict[str, str]  # field → Spark SQL type, in the order written
    description: str = ""
    source: SourceSpec = SourceSpec()
    timestamp_by: str | None = None  # a payload field or an expression (jobspec.timestamp_by); None: arrival time
    time_format: str | None = None  # None: ISO-8601
    over: str | None = None
    policy: TimePolicy = TimePolicy()
    filter: str | None = None
    select: NamedExprs = ()  # output column → expression; queries without a window
    window: Window | None = None
    group_by: NamedExprs = ()  # (name, expression); a plain field is (field, field)
    aggregates: NamedExprs = ()
    having: str | None = None  # over the window's rows, after it (Stream Analytics' HAVING)
    sinks: SinksSpec = SinksSpec()
    analytics: tuple[AnalyticSpec, ...] = ()  # LAG / LAST / ISFIRST columns; per-event queries
    watermark_percentile: float | None = None  # semantics §4's lossy early-output mode; None: min over units
    inputs: tuple[InputSpec, ...] = ()  # two named views of the source, for a join; () : one input
    join: JoinSpec | None = None
    # Steps (Stream Analytics' WITH): the query fields above are the first step, named
    # ``first_step``, reading the job's events; each of ``steps`` reads it or an earlier step.
    first_step: str | None = None
    steps: tuple[StepSpec, ...] = ()
    references: tuple[ReferenceSpec, ...] = ()  # tables each event of the first step joins, in order
    cross_apply: CrossApplySpec | None = None  # one event to many rows, after the policy (jobspec.cross_apply)

    @property
    def row_fields(self) -> dict[str, str]:
        """What each row of the query reads besides the engine's columns: the payload, and the
        columns ``cross_apply`` adds (:func:`~tidegate.jobspec.cross_apply.row_fields`)."""
        return row_fields(self.payload, self.cross_apply)

    @property
    def output_window(self) -> Window | None:
        """The window of the step the job emits: its output rows are that window's rows
        (timed by ``window_end``); None when it emits per-event or join rows."""
        return self.emitted.window

    @property
    def emitted(self) -> JobSpec:
        """The job as its output's readers see it: the emitted step's query in the job's
        own fields (the spec itself when it has no steps)."""
        return self.step_view(self.sinks.output_step or self.steps[-1].name) if self.steps else self

    @property
    def output_names(self) -> tuple[str, ...]:
        """``output`` (the job's own output), then each named output of ``sinks.outputs``."""
        return (PRIMARY_OUTPUT,) + tuple(name for name, _ in self.sinks.outputs)

    def output_step_of(self, name: str) -> str | None:
        """The step output ``name`` holds (None for the output of a job without steps)."""
        if name == PRIMARY_OUTPUT:
            return (self.sinks.output_step or self.steps[-1].name) if self.steps else None
        return dict(self.sinks.outputs)[name]

    def output_view(self, name: str) -> JobSpec:
        """The job as the readers of output ``name`` see it (:meth:`step_view` of its step)."""
        return self.emitted if name == PRIMARY_OUTPUT else self.step_view(dict(self.sinks.outputs)[name])

    def step_view(self, name: str) -> JobSpec:
        """Step ``name``'s query in the job's own fields: what the readers of its rows see. The
        first step is the job's query fields; a later step is a window over the rows it reads, or
        a per-event projection of them (its ``select``: every column it reads, then its analytic
        columns, when it has none)."""
        bare = replace(self.sinks, output_step=None, outputs=())
        if name == self.first_step:
            return replace(self, first_step=None, steps=(), sinks=bare)
        step = next(s for s in self.steps if s.name == name)
        if step.join is not None:  # its selected columns, by its time: a per-event row
            return replace(self, window=None, group_by=(), aggregates=(), having=None, filter=step.filter,
                           select=step.select, analytics=(), join=None, inputs=(), references=(), first_step=None,
                           steps=(), sinks=bare)  # fmt: skip
        if step.window is None:  # per event: the columns it selects, or every column it reads
            values = [c for c in step_columns(self, name) if c not in EVENT_OUTPUT]
            joined = joined_columns(step.references, step.select, named=True) if step.select else []
            select = step.select + tuple((c, c) for c in joined) if step.select else tuple((c, c) for c in values)
            return replace(self, window=None, group_by=(), aggregates=(), having=None, filter=step.filter,
                           select=select, analytics=(), join=None, references=(), first_step=None, steps=(),
                           sinks=bare)  # fmt: skip
        return replace(
            self,
            window=step.window,
            group_by=step.group_by,
            aggregates=step.aggregates,
            having=step.having,
            filter=step.filter,
            select=(),
            analytics=(),
            join=None,
            first_step=None,
            steps=(),
            sinks=bare,
        )

    @property
    def reference_tables(self) -> tuple[ReferenceSpec, ...]:
        """Every reference table the job joins: the first step's, then each later step's."""
        return self.references + tuple(r for s in self.steps for r in s.references)

    @property
    def own_logs(self) -> bool:
        """Whether the inputs read their own logs (each with its own partitions), not one source."""
        return any(i.own is not None for i in self.inputs)

    @property
    def policies(self) -> tuple[TimePolicy, ...]:
        """Every policy the job's events are judged by: the job's, or each input's."""
        return tuple(_own(i).policy for i in self.inputs) if self.own_logs else (self.policy,)

    @property
    def late_arrival_tolerance_us(self) -> int:
        """The largest late-arrival tolerance of the job: how far its watermark may trail arrival."""
        return max(p.late_arrival_tolerance_us for p in self.policies)

    @property
    def needs_lookback(self) -> bool:
        """semantics §3: queries with no stateful temporal element (no window, no analytic
        function, no join) emit each event once judged; nothing to rebuild."""
        return self.window is not None or bool(self.analytics) or self.join is not None or bool(self.steps)

    @property
    def replay_lookback_us(self) -> int:
        """How far a fresh start reads back before its first output. A query with a stateful
        element: its look-back. A per-event query with an event time of its own: the policy's
        stretch, late-arrival tolerance + early-arrival window — the events arriving in it
        decide the outcomes (kept, adjusted, dropped; semantics §2) of the first ones emitted,
        and none of them is emitted. With event time = arrival time nothing is decided: 0."""
        return self.lookback_us if self.needs_lookback or self.timestamp_by else 0

    @property
    def span_us(self) -> int:
        """The largest time span of the query's stateful elements: window span (session: max
        duration), LIMIT DURATION, ISFIRST period, the join's DATEDIFF bound; 0 without any.
        Steps add up along the steps each reads: a step's row at ``t`` needs its input back to
        ``t − its span``, and each of those rows needs the input of the step it reads back by
        that step's span; of several steps reading one, the longest way counts."""
        spans = [a.span_us for a in self.analytics] + ([self.window.span_us] if self.window is not None else [])
        spans += [self.join.span_us] if self.join is not None else []
        reach = {FIRST_STEP_READS: 0, self.first_step: max(spans, default=0)}
        for step in self.steps:  # each reads an earlier one (a join two)
            reach[step.name] = max(reach[r] for r in step.reads_all) + step.span_us
        return max(reach.values())

    @property
    def lookback_us(self) -> int:
        """semantics §6: L = largest span (:attr:`span_us`) + late-arrival tolerance + early-arrival window.

        Without a stateful element the span is 0; what is left is the stretch that decides the
        policy outcomes around the start time (:attr:`replay_lookback_us` says what a start reads).
        """
        return self.span_us + self.late_arrival_tolerance_us + EARLY_WINDOW_US

    @property
    def fingerprint(self) -> str:
        """sha256 of the normalised parts that change results (not name, version,
        description, source, rate limits or sinks but their named outputs; payload limits only when not the defaults,
        so that adding them left every earlier fingerprint as it was)."""
        # with neither window nor select, the output columns follow the payload's order
        payload = list(self.payload.items())
        parts = {
            "format": FINGERPRINT_FORMAT,
            "payload": payload if self.window is None and not self.select else sorted(payload),
            "timestamp_by": timestamp_by_key(self.timestamp_by, self.payload),
            "time_format": self.time_format,
            "over": self.over,
            "policy": policy_dict(self.policy, us=True),
            "filter": canonical_expression(self.filter) if self.filter else None,
            "select": [[n, canonical_expression(e)] for n, e in self.select],
            "window": _window_dict(self.window, us=True),
            "group_by": [[n, canonical_expression(e)] for n, e in self.group_by],
            "aggregates": [[n, canonical_expression(e)] for n, e in self.aggregates],
        }
        if self.analytics:  # absent otherwise, so that every earlier fingerprint stays as it was
            parts["analytics"] = [a.canonical() for a in self.analytics]
        if self.having:  # likewise
            parts["having"] = canonical_expression(self.having)
        if self.watermark_percentile is not None:  # likewise
            parts["watermark_percentile"] = self.watermark_percentile
        if self.join is not None:  # likewise
            parts["inputs"] = [i.canonical() for i in self.inputs]
            parts["join"] = self.join.canonical()
        if self.steps:  # likewise; a step reading another than the one before it says which, by position
            position = {n: i for i, n in enumerate([self.first_step, *(s.name for s in self.steps)])}
            position[FIRST_STEP_READS] = -1  # the job's events, read by the first step and any later one
            parts["steps"] = [
                s.canonical() | ({} if position[s.reads] == i else {"reads": position[s.reads]})
                for i, s in enumerate(self.steps)
            ]
        if self.references:  # likewise; one table hashed as before there could be several
            parts["reference"] = references_canonical(self.references)
        if self.cross_apply is not None:  # likewise
            parts["cross_apply"] = self.cross_apply.canonical()
        if self.sinks.outputs:  # likewise; steps by position, as above (a step's name changes no result)
            position = {n: i for i, n in enumerate([self.first_step, *(s.name for s in self.steps)])}
            parts["outputs"] = sorted([n, position[self.output_step_of(n)]] for n in self.output_names)
        limits = self.source.payload_limits
        if limits != PayloadLimits():  # they decide which events are quarantined
            parts["payload_limits"] = [limits.max_payload_bytes, limits.max_payload_depth]
        text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """The normalised spec: durations in their shortest form, expressions with single
        spaces, defaults written out. ``parse_spec(spec.to_dict()) == spec``."""
        src, kafka = self.source, self.source.kafka
        source: dict[str, Any] = {"event_log": src.event_log}
        if kafka:
            source = {"kafka": kafka.to_dict()}
        if src.max_events_per_batch is not None:
            source["max_events_per_batch"] = src.max_events_per_batch
        if src.max_arrival_span_per_batch_us is not None:
            source["max_arrival_span_per_batch"] = format_duration(src.max_arrival_span_per_batch_us)
        for name in ("max_payload_bytes", "max_payload_depth"):
            if getattr(src.payload_limits, name) != getattr(PayloadLimits(), name):
                source[name] = getattr(src.payload_limits, name)
        if src.on_corrupt_frame != "fail":
            source["on_corrupt_frame"] = src.on_corrupt_frame
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "source": source,
            "payload": dict(self.payload),
            "timestamp_by": self.timestamp_by,
            "time_format": self.time_format,
            "over": self.over,
        }
        if self.timestamp_by is not None:  # without it the tolerances cannot be set
            out["policy"] = policy_dict(self.policy, us=False)
        if self.analytics:
            out["analytics"] = {a.name: a.text() for a in self.analytics}
        if self.watermark_percentile is not None:
            out["watermark"] = {"percentile": self.watermark_percentile}
        if self.join is not None:
            out["inputs"] = {i.name: i.to_dict() for i in self.inputs}
            out["join"] = self.join.to_dict()
        if self.references:
            out["reference"] = references_dict(self.references)
        if self.cross_apply is not None:
            out["cross_apply"] = self.cross_apply.to_dict()
        out["filter"] = self.filter
        if self.window is None:
            out["select"] = dict(self.select) or None
        else:
            out["window"] = _window_dict(self.window, us=False)
            # a plain name reads back as a payload field; anything else keeps its {name: expression}
            out["group_by"] = [n if n == e and n in self.payload else {n: e} for n, e in self.group_by]
            out["aggregates"] = dict(self.aggregates)
            if self.having:
                out["having"] = self.having
        out["sinks"] = {"output": {"format": self.sinks.output_format}, "audit": self.sinks.audit}
        if self.steps:  # the query fields above are the first step's
            first = {"name": self.first_step, **({} if self.join is not None else {"from": FIRST_STEP_READS})}
            first |= {k: out.pop(k) for k in QUERY_FIELDS if k in out}
            out["steps"] = [first] + [s.to_dict() for s in self.steps]
            out["sinks"]["output"]["step"] = self.sinks.output_step
        if self.sinks.outputs:
            out["sinks"]["outputs"] = {name: {"step": step} for name, step in self.sinks.outputs}
        return out

    def describe(self) -> str:
        """One line an operator can read: what is computed, how events are timed."""
        if self.join is not None:
            what = self.join.describe() + " as " + ", ".join(n for n, _ in self.select)
        elif self.window is None:
            what = "each event"
            if self.analytics:
                what += " with " + ", ".join(f"{a.name}={a.text()}" for a in self.analytics)
            if self.references:
                what += " " + references_describe(self.references)
            if self.select:
                what += " as " + ", ".join(n for n, _ in self.select)
        else:
            by = ", ".join(n for n, _ in self.group_by)
            what = f"{_window_text(self.window)} windows " + (f"by {by}" if by else "over all events")
            what += " → " + ", ".join(f"{n}={e}" for n, e in self.aggregates)
            what += f" having {self.having}" if self.having else ""
        if self.filter:
            what += f" where {self.filter}"
        if self.cross_apply is not None:
            what = f"{self.cross_apply.describe()}; {what}"
        timing = _timing(self.timestamp_by, self.policy, self.over)
        if self.own_logs:
            timing = "; ".join(f"{i.name}: {_timing(_own(i).timestamp_by, _own(i).policy)}" for i in self.inputs)
        if self.watermark_percentile is not None:
            timing += f"; percentile watermark {self.watermark_percentile:g} % (lossy: events behind it go aside)"
        if self.steps:
            what = f"{self.first_step}: {what}; " + "; ".join(s.describe() for s in self.steps)
        if self.sinks.outputs:
            what += "; outputs " + ", ".join(f"{n} ← {self.output_step_of(n)}" for n in self.output_names)
        lookback = format_duration(self.replay_lookback_us) if self.replay_lookback_us else "none"
        return f"{what}; {timing}; look-back {lookback}"


def first_step_columns(spec: JobSpec) -> tuple[str, ...]:
    """The columns of the rows the first step of ``spec`` emits (its query fields are the job's)."""
    if spec.join is not None:
        return tuple(n for n, _ in spec.select) + JOIN_OUTPUT
    if spec.window is not None:
        return WINDOW_OUTPUT + tuple(n for n, _ in spec.group_by + spec.aggregates)
    fields = [n for n, _ in spec.select] or [*spec.payload, *(a.name for a in spec.analytics)]
    fields += joined_columns(spec.references, spec.select) if spec.references else []
    return tuple(fields) + EVENT_OUTPUT


def step_columns(spec: JobSpec, name: str) -> tuple[str, ...]:
    """The columns of the rows step ``name`` of ``spec`` emits, as a step reading it sees them;
    for FIRST_STEP_READS, what a per-event step over the job's events keeps of each: its
    payload, position and time."""
    if name == FIRST_STEP_READS:
        return (*spec.row_fields, *EVENT_OUTPUT)
    if name == spec.first_step:
        return first_step_columns(spec)
    step = next(s for s in spec.steps if s.name == name)
    if step.window is not None:
        return WINDOW_OUTPUT + tuple(n for n, _ in step.group_by + step.aggregates)
    if step.join is not None:
        return tuple(n for n, _ in step.select) + JOIN_OUTPUT
    read = [c for c in step_columns(spec, step.reads) if c not in EVENT_OUTPUT]
    values = [n for n, _ in step.select] or [*read, *(a.name for a in step.analytics)]
    values += joined_columns(step.references, step.select, named=True) if step.references else []
    return (*values, *EVENT_OUTPUT)


def has_position(spec: JobSpec, name: str) -> bool:
    """Whether each row of step ``name`` of ``spec`` comes from one event (a per-event,
    analytic or join row, and a per-event step's row of one of them), so that its ``partition``
    and ``offset`` identify it; a window row, and a per-event step's row of one, has none."""
    if name in (FIRST_STEP_READS, spec.first_step):
        return name == FIRST_STEP_READS or spec.window is None
    step = next(s for s in spec.steps if s.name == name)
    # a join step's rows: their sides' positions may be NULL (a window's) or repeat (a join's)
    return step.per_event and has_position(spec, step.reads)


def _own(i: InputSpec) -> InputSource:
    """The own log, payload and event time of an input of a job whose inputs read their own logs."""
    assert i.own is not None  # parse_inputs gives every input its own when one has any
    return i.own


def _timing(timestamp_by: str | None, policy: TimePolicy, over: str | None = None) -> str:
    timing = f"event time {timestamp_by}" if timestamp_by else "event time = arrival time"
    if over:
        timing += f", substreams over {over}"
    return timing + (f"; {policy.describe()}" if timestamp_by else "")
