"""A job spec file read as YAML, safely: at most :data:`~tidegate.jobspec.folders.MAX_SPEC_BYTES`,
UTF-8, a key written twice and aliases refused (:class:`SpecLoader`), and every error naming
the file and the line — never quoting the file's text back, which for a file that is not a spec
would be its contents. :func:`tidegate.jobspec.parse.load_spec` parses what this reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tidegate.errors import ConfigError
from tidegate.jobspec.folders import MAX_SPEC_BYTES


def read_spec_yaml(path: Path) -> Mapping[str, Any]:
    """The mapping the YAML spec file at ``path`` holds; :class:`ConfigError` naming the file
    (and for YAML syntax its line and column) when it is not one."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0  # reading it says what is wrong
    if size > MAX_SPEC_BYTES:
        raise ConfigError(
            f"{path}: the job spec is {size:,} bytes, more than {MAX_SPEC_BYTES:,}",
            "a spec is a few kilobytes: check that the path names the spec, not a data file",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such job spec file", "check the path; example specs are in jobs/") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at position {exc.start})",
            "save the spec as UTF-8 (most editors offer it under 'Save with encoding')",
        ) from None
    except OSError as exc:
        problem = f"{path}: cannot read the job spec ({exc.strerror})"
        raise ConfigError(problem, "check the path and its permissions") from None
    try:
        data = yaml.load(text, Loader=SpecLoader)  # noqa: S506 — a SafeLoader subclass
    except RecursionError:  # PyYAML composes nested brackets recursively
        raise ConfigError(f"{path}: {TOO_DEEP[0]}", TOO_DEEP[1]) from None
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc) from None
    if data is None:
        raise ConfigError(f"{path}: the job spec is empty", "write at least name, version and payload")
    if not isinstance(data, Mapping):  # named by its kind: the file's text is never quoted back
        raise ConfigError(
            f"{path}: the job spec is {_kind(data)}, not a mapping of name: value",
            "a spec starts with `name:`, `version:` and `payload:` (see docs/jobspec.md)",
        )
    return data


def yaml_error(path: Path, exc: yaml.YAMLError) -> ConfigError:
    """Where the YAML is wrong and what kind of wrong — never the file's text: PyYAML's own
    message prints the offending line, and its problems quote tags, aliases and
    characters, which for a file that is not a spec at all would be its contents."""
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        where = f"{path}:{mark.line + 1}:{mark.column + 1}"
    elif isinstance(exc, yaml.reader.ReaderError):
        where = f"{path}: character {exc.position + 1}"
    else:
        where = str(path)
    if isinstance(exc, _AliasRefused):
        return ConfigError(
            f"{where}: {exc.problem}",
            "write the value out where it is used (a spec is short enough"
            " to need no aliases; an alias can expand a short file to gigabytes)",
        )
    if isinstance(exc, _DuplicateKey):
        return ConfigError(f"{where}: {exc.problem}", "keep one of them (YAML would silently use the last)")
    if isinstance(exc, yaml.reader.ReaderError):
        return ConfigError(
            f"{where}: a character YAML does not accept ({_unquoted(exc.reason)})",
            "remove control characters; save the spec as UTF-8 text",
        )
    problem = _unquoted(getattr(exc, "problem", None) or "not valid YAML")
    context = _unquoted(getattr(exc, "context", None) or "")
    return ConfigError(
        f"{where}: YAML syntax error: {problem}" + (f" ({context})" if context else ""),
        "fix the YAML at or just before that line (indentation, a missing ':' or an unclosed quote or bracket)",
    )


# what PyYAML quotes of its own grammar (an expected ':' or ']', the end of the stream); every
# other quoted piece of its messages (a tag, an alias, an escape, a character) is the file's text
_GRAMMAR = re.compile(r"'(?:[-,:\[\]{}?|>!&*#%@`]|<[a-z ]+>)'")
_QUOTED = re.compile(r"""\s*(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


def _unquoted(message: str) -> str:
    if "'\\t'" in message:
        return "a tab character (YAML indents with spaces, never tabs)"
    kept: list[str] = []

    def keep(match: re.Match) -> str:
        kept.append(match.group(0))
        return f"\0{len(kept) - 1}\0"

    text = _QUOTED.sub("", _GRAMMAR.sub(keep, message))
    return re.sub(r"\0(\d+)\0", lambda m: kept[int(m.group(1))], text).strip()


def _kind(data: Any) -> str:
    if isinstance(data, str):
        return "a piece of text"
    if isinstance(data, bool):
        return "a yes/no value"
    if isinstance(data, (int, float)):
        return "a number"
    if isinstance(data, list):
        return "a list"
    return f"a {type(data).__name__}"


TOO_DEEP = (
    "the job spec is nested too deeply to read",
    "a spec is a few levels deep: look for runaway brackets, or YAML anchors that refer to themselves",
)


class _DuplicateKey(yaml.constructor.ConstructorError):
    pass


class _AliasRefused(yaml.composer.ComposerError):
    pass


class SpecLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key written twice (plain YAML keeps the last silently), and
    aliases before they are expanded: nested ones turn a few hundred bytes into megabytes."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise _AliasRefused(None, None, "YAML aliases (*name) are not allowed in a job spec", mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        self.flatten_mapping(node)
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)):
                continue  # a list or mapping as a key: SafeLoader refuses it, with its line
            if key in seen:  # where, not which: the key is the file's text
                raise _DuplicateKey(
                    None,
                    None,
                    f"a key written first at line {seen[key].line + 1} appears again in the same mapping",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)
