"""Column expressions built once and reused by every micro-batch.

Why: a PySpark ``Column`` is a JVM object. Building one takes two to four calls through the
Py4J gateway and, on the JVM, a walk of the calling thread's stack for the column's origin.
A micro-batch of the demo job builds a few hundred of them, every batch the same ones: the
job's spec does not change between batches. For a small batch that is a large part of what
the batch costs (docs/benchmarks/bench_engine.md).

:func:`reused` builds the columns of a pure function of hashable arguments (names, types,
frozen dataclasses) once per JVM gateway and hands the same objects to every later call. A
``Column`` describes an expression and holds no data, so the same one may appear in any
number of DataFrames, of any batch or session of that JVM.

Contract: a function under :func:`reused` returns a ``Column``, or a tuple (or read-only
mapping) of them, and depends on nothing but its arguments — never on a batch's DataFrame,
its id or its clock. Arguments that cannot be a dictionary key (a ``Column`` among them) build anew each call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from pyspark import SparkContext

T = TypeVar("T")


def reused(build: Callable[..., T]) -> Callable[..., T]:
    """``build`` called once per (JVM gateway, arguments); the same columns after that."""
    built: dict[tuple, T] = {}

    @functools.wraps(build)
    def columns(*args):
        key = (id(SparkContext._gateway), args)  # a new JVM (a gateway launched again) builds them anew
        try:
            found = built.get(key)
        except TypeError:  # an argument that cannot be a key (one holding a Column): built each call
            return build(*args)
        if found is None:
            found = built[key] = build(*args)
        return found

    return columns


@reused
def col(name: str):
    """``F.col(name)``, built once."""
    from pyspark.sql import functions as F

    return F.col(name)


def cols(names) -> tuple:
    """:func:`col` of each of ``names``."""
    return tuple(col(name) for name in names)
