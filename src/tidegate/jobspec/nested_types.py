"""Payload types that hold more than one value: ``array<T>``, ``map<string,T>`` and
``struct<name:T,…>``, each ``T`` a payload type again (``array<struct<sensor:string,value:double>>``).

They are what :mod:`tidegate.jobspec.cross_apply` turns into rows, and any expression may read
them (``size(readings)``, ``rec.sensor``). Written back in one normal form, lower case without
spaces (``array<struct<sensor:string,value:double>>``), which Spark's own type parser reads.
A field name inside a struct keeps its case: JSON field names are case-sensitive.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tidegate.errors import ConfigError, excerpt

MAX_TYPE_DEPTH = 8  # levels of array/map/struct inside one another: a payload is a few deep
_FIELD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_FIX = (
    "write array<T>, map<string,T> or struct<name:T,…>, each T a payload type,"
    " e.g. array<double> or array<struct<sensor:string,value:double>>"
)


def is_nested(typ: str) -> bool:
    """Whether a normalised payload type is an array, a map or a struct."""
    return typ.startswith(("array<", "map<", "struct<"))


def nested_type(text: str, where: str, leaf: Callable[[str, str], str]) -> str:
    """``text`` (spaces removed, the leaf types lower case) as a normalised nested type;
    ``leaf(text, where)`` reads a plain payload type or raises. ConfigError names ``where``."""
    out, rest = _read(text, where, leaf, 0)
    if rest:
        raise ConfigError(f"{where}: {excerpt(text)} has {excerpt(rest)} after its type", _FIX)
    return out


def _read(text: str, where: str, leaf: Callable[[str, str], str], depth: int) -> tuple[str, str]:
    if depth > MAX_TYPE_DEPTH:
        raise ConfigError(f"{where}: the type nests deeper than {MAX_TYPE_DEPTH} levels", "declare fewer levels")
    lowered = text.lower()
    if lowered.startswith("array<"):
        element, rest = _read(text[6:], where, leaf, depth + 1)
        return f"array<{element}>", _close(rest, where, text)
    if lowered.startswith("map<"):
        if not lowered.startswith("map<string,"):
            raise ConfigError(f"{where}: {excerpt(text)}: a map's keys are JSON field names", "write map<string,T>")
        value, rest = _read(text[11:], where, leaf, depth + 1)
        return f"map<string,{value}>", _close(rest, where, text)
    if lowered.startswith("struct<"):
        return _struct(text[7:], where, leaf, depth)
    m = re.match(r"[a-z]+(?:\(\d+,\d+\))?", lowered)
    if m is None:
        raise ConfigError(f"{where}: {excerpt(text)} is not a type", _FIX)
    return leaf(m.group(0), where), text[m.end() :]


def _struct(text: str, where: str, leaf: Callable[[str, str], str], depth: int) -> tuple[str, str]:
    fields: list[str] = []
    rest = text
    while True:
        m = _FIELD.match(rest)
        if m is None or rest[m.end() : m.end() + 1] != ":":
            raise ConfigError(f"{where}: a struct field is written name:type, got {excerpt(rest)}", _FIX)
        name = m.group(0)
        if name.lower() in (f.split(":", 1)[0].lower() for f in fields):
            raise ConfigError(f"{where}: struct field {name} is declared twice", "keep one of them")
        typ, rest = _read(rest[m.end() + 1 :], where, leaf, depth + 1)
        fields.append(f"{name}:{typ}")
        if rest.startswith(","):
            rest = rest[1:]
            continue
        return "struct<" + ",".join(fields) + ">", _close(rest, where, text)


def _close(rest: str, where: str, text: str) -> str:
    if not rest.startswith(">"):
        raise ConfigError(f"{where}: {excerpt(text)} is missing a closing '>'", _FIX)
    return rest[1:]


def struct_fields(typ: str) -> list[tuple[str, str]]:
    """The (name, type) fields of a normalised ``struct<…>`` type, in order."""
    body, fields, depth, start = typ[7:-1], [], 0, 0
    for i, c in enumerate(body + ","):
        if c == "<" or c == "(":
            depth += 1
        elif c == ">" or c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            name, _, field_type = body[start:i].partition(":")
            fields.append((name, field_type))
            start = i + 1
    return fields
