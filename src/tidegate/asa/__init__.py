"""Stream Analytics queries as job specs: ``tidegate asa import`` and ``tidegate asa check``.

* :mod:`~tidegate.asa.dialect` — the query language as a parse tree (sqlglot's T-SQL, with
  ``TIMESTAMP BY`` and ``LIMIT DURATION``);
* :mod:`~tidegate.asa.translate` — each SELECT as a step of spec fields, or an error with its
  line and column; :mod:`~tidegate.asa.windows` — the window functions and time units;
  :mod:`~tidegate.asa.analytics` — ``LAG``, ``LAST``, ``ISFIRST``; :mod:`~tidegate.asa.joins` —
  joins of two streams and of reference data; :mod:`~tidegate.asa.cross_apply` — ``CROSS
  APPLY``; :mod:`~tidegate.asa.windowed` — a windowed SELECT's keys, aggregates and HAVING;
  :mod:`~tidegate.asa.expressions` — Spark SQL text;
  :mod:`~tidegate.asa.parts` — the steps and inputs a translation is made of;
* :mod:`~tidegate.asa.side_file` — the policy, inputs and outputs kept beside a query;
* :mod:`~tidegate.asa.spec_text` — the spec's YAML, loaded by the spec loader before it is written.
"""

from __future__ import annotations

from pathlib import Path

from tidegate.asa.side_file import read_side_file
from tidegate.asa.spec_text import job_name, render
from tidegate.asa.translate import translate
from tidegate.errors import ConfigError


def spec_text(query: Path, inputs: Path | None, name: str | None = None) -> str:
    """The job spec's YAML for the query file ``query`` with the side file ``inputs``."""
    try:
        text = query.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{query}: no such query file", "give the path of a .asaql file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{query}: cannot read it ({type(exc).__name__})", "give a UTF-8 text file") from None
    side = read_side_file(inputs)
    translation = translate(text, str(query), side.references())
    return render(translation, side, job_name(name or side.name or query.stem), str(query))


__all__ = ["spec_text"]
