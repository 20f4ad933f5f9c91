"""Stream Analytics queries as job specs: ``tidegate asa import`` and ``tidegate asa check``.

* :mod:`~tidegate.asa.dialect` — the query language as a parse tree (sqlglot's T-SQL, with
  ``TIMESTAMP BY``, ``LIMIT DURATION`` and statements without ``;``);
  :mod:`~tidegate.asa.statements` — the ``WITH`` steps each ``SELECT … INTO`` reads;
* :mod:`~tidegate.asa.translate` — each SELECT as a step of spec fields, or an error with its
  line and column; :mod:`~tidegate.asa.windows` — the window functions and time units;
  :mod:`~tidegate.asa.analytics` — ``LAG``, ``LAST``, ``ISFIRST``; :mod:`~tidegate.asa.joins` —
  joins of two streams and of reference data; :mod:`~tidegate.asa.cross_apply` — ``CROSS
  APPLY``; :mod:`~tidegate.asa.windowed` — a windowed SELECT's keys, aggregates and HAVING;
  :mod:`~tidegate.asa.expressions` — Spark SQL text;
  :mod:`~tidegate.asa.parts` — the steps and inputs a translation is made of;
* :mod:`~tidegate.asa.outputs` — several outputs as one job, or one job per output;
* :mod:`~tidegate.asa.side_file` — the policy, inputs and outputs kept beside a query;
* :mod:`~tidegate.asa.spec_text` — the spec's YAML, loaded by the spec loader before it is written.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tidegate.asa.outputs import TranslatedJob, check_declared, one_job, output_name
from tidegate.asa.parts import Translation
from tidegate.asa.side_file import SideFile, read_side_file
from tidegate.asa.spec_text import checked_spec, job_name, render
from tidegate.asa.translate import translate
from tidegate.errors import ConfigError
from tidegate.jobspec.model import PRIMARY_OUTPUT


def translated_jobs(query: Path, inputs: Path | None, name: str | None = None) -> list[TranslatedJob]:
    """The jobs the query file ``query`` (with the side file ``inputs``) becomes: one, unless its
    ``SELECT … INTO`` statements fork at the input (:mod:`tidegate.asa.outputs`); then one per
    output, each named ``<name>-<output>``."""
    try:
        text = query.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{query}: no such query file", "give the path of a .asaql file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{query}: cannot read it ({type(exc).__name__})", "give a UTF-8 text file") from None
    side = read_side_file(inputs)
    each = translate(text, str(query), side.references(), side.payloads())
    check_declared(side.outputs, [t.output_name or "" for t in each], side.origin)
    base = job_name(name or side.name or query.stem)
    joined = one_job(each)
    if joined is not None:
        job = TranslatedJob(base, render(joined, side, base, str(query)), _outputs(joined))
        if len(each) == 1 or _loads(job.text):
            return [job]
    names = [job_name(f"{base}-{t.output_name}") for t in each]
    return [
        TranslatedJob(n, render(t, side, n, str(query)), {t.output_name or "": PRIMARY_OUTPUT})
        for n, t in zip(names, each, strict=True)
    ]


def spec_text(query: Path, inputs: Path | None, name: str | None = None) -> str:
    """The job spec's YAML for the query file ``query`` with the side file ``inputs``: a query
    that becomes one job (:func:`translated_jobs`)."""
    jobs = translated_jobs(query, inputs, name)
    if len(jobs) > 1:
        raise ConfigError(
            f"{query}: its {len(jobs)} SELECT … INTO fork at the input (other filters of it, or it timed two "
            f"ways), so they are {len(jobs)} jobs: " + ", ".join(j.name for j in jobs),
            f"write them with tidegate asa import {query} --out jobs/NAME.yaml (one spec per output) and deploy "
            "each, or change the query so every output reads one first step (a WITH step)",
        )
    return jobs[0].text


def _outputs(t: Translation) -> dict[str, str]:
    if not t.outputs:
        return {t.output_name or "": PRIMARY_OUTPUT}
    first, *named = t.outputs
    return {first: PRIMARY_OUTPUT, **{n: output_name(n) for n in named}}


def _loads(text: str) -> bool:
    """Whether the spec loader accepts ``text`` (a joined job it refuses is written as several)."""
    with tempfile.TemporaryDirectory(prefix="tidegate-asa-") as folder:
        try:
            checked_spec(text, Path(folder))
        except ConfigError:
            return False
    return True


__all__ = ["SideFile", "TranslatedJob", "spec_text", "translated_jobs"]
