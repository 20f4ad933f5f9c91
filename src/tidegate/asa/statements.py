"""The statements of a query and the ``WITH`` steps each reads.

A Stream Analytics query is one ``WITH`` list followed by one or more ``SELECT … INTO``, each
writing one output; every ``SELECT`` may read any step of the ``WITH``. The parser attaches the
``WITH`` to the first statement (:mod:`tidegate.asa.dialect`); here it belongs to them all, and
each statement gets the steps it reads, directly or through another step. A step no statement
reads is refused: nothing in the query is left out in silence.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

MAX_OUTPUTS = 60  # as a Stream Analytics job: each output may become a job and a spec file of its own
Refuse = Callable[[exp.Expr, str, str], Exception]
WithStep = tuple[str, exp.Select, exp.Expr]  # (its name, its SELECT, the node errors point at)


def statement_steps(statements: list[exp.Expr], refuse: Refuse) -> tuple[list[exp.Select], list[WithStep]]:
    """The statements, each a ``SELECT``, and the query's ``WITH`` steps in the order written;
    refuses any other statement and a ``WITH`` anywhere but before the first one."""
    for i, statement in enumerate(statements):
        if not isinstance(statement, exp.Select):
            what = type(statement).__name__.upper()
            raise refuse(statement, f"{what} is not a query Tidegate runs", "write SELECT … INTO output FROM input")
        if i and statement.args.get("with_") is not None:
            raise refuse(
                statement, "WITH after the first SELECT … INTO",
                "write every step in one WITH at the top of the query: each SELECT … INTO may read any of them",
            )  # fmt: skip
    steps: list[WithStep] = []
    for cte in (statements[0].args.get("with_") or exp.With(expressions=[])).expressions:
        if not isinstance(cte.this, exp.Select):
            raise refuse(cte, "a WITH step that is not one SELECT (UNION?)", "UNION is not supported")
        steps.append((cte.alias, cte.this, cte))
    return [s for s in statements if isinstance(s, exp.Select)], steps


def steps_read(
    statements: list[exp.Select], steps: list[WithStep], refuse: Refuse
) -> list[tuple[exp.Select, set[str]]]:
    """Each statement of a query of several, with the names (lower case) of the ``WITH`` steps
    it reads. Each must write a distinct output, and each step must be read by one of them."""
    if len(statements) > MAX_OUTPUTS:
        raise refuse(
            statements[MAX_OUTPUTS], f"{len(statements)} SELECT … INTO, more than {MAX_OUTPUTS}",
            f"a query writes at most {MAX_OUTPUTS} outputs, as a Stream Analytics job does: split it into queries",
        )  # fmt: skip
    names = {name.lower() for name, _, _ in steps}
    reads = {name.lower(): _tables(select) & names for name, select, _ in steps}
    written: dict[str, exp.Expr] = {}
    out: list[tuple[exp.Select, set[str]]] = []
    for statement in statements:
        into = statement.args.get("into")
        if into is None:
            raise refuse(
                statement, "a SELECT without INTO in a query of several",
                "name the output each SELECT writes: SELECT … INTO output FROM …",
            )  # fmt: skip
        key = into.this.name.lower()
        if key in written:
            raise refuse(into, f"a second SELECT … INTO {into.this.name}", "write each output from one SELECT")
        written[key] = into
        needed, todo = set(), list(_tables(statement) & names)
        while todo:
            name = todo.pop()
            if name not in needed:
                needed.add(name)
                todo.extend(reads[name])
        out.append((statement, needed))
    used = set().union(*(needed for _, needed in out))
    for name, _, node in steps:
        if name.lower() not in used:
            raise refuse(
                node, f"step {name} is read by no SELECT … INTO",
                f"remove it, or read it in a SELECT: SELECT … INTO output FROM {name}",
            )  # fmt: skip
    return out


def _tables(select: exp.Select) -> set[str]:
    """The names (lower case) a SELECT reads in its FROM and JOINs, not its INTO nor a WITH."""
    parts = [select.args.get("from_"), *(select.args.get("joins") or [])]
    names = set()
    for part in parts:
        if part is None:
            continue
        for node in part.walk():
            if isinstance(node, exp.Table) and not node.args.get("db"):
                names.add(node.name.lower())
    return names
