"""The compose stack as the tests see it: docker-compose.yaml, .env.example and docker/Dockerfile
parsed, with compose's variable interpolation, and nothing started (no Docker engine needed)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yaml"
ENV_EXAMPLE = REPO / ".env.example"
DOCKERFILE = REPO / "docker" / "Dockerfile"
DOCKERIGNORE = REPO / "docker" / "Dockerfile.dockerignore"
POSTGRES_INIT = REPO / "docker" / "postgres" / "init-databases.sh"
HEALTHCHECK = REPO / "docker" / "healthcheck.py"
AIRFLOW_INIT = REPO / "docker" / "airflow-init.sh"

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?message}, ${NAME?message}; $$ is a literal $
_REFERENCE = re.compile(
    r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
)


class MissingVariable(Exception):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


@dataclass(frozen=True)
class Reference:
    name: str
    op: str | None  # None, ':-', '-', ':?', '?'
    arg: str

    @property
    def required(self) -> bool:
        return self.op in (None, ":?", "?")


def references(text: str) -> list[Reference]:
    """Every variable reference in ``text`` (escaped ``$$`` skipped)."""
    out = []
    for m in _REFERENCE.finditer(text):
        if m.group(0) == "$$":
            continue
        out.append(Reference(m.group("name") or m.group("bare"), m.group("op"), m.group("arg") or ""))
    return out


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's interpolation of one string (the compose spec's rules)."""

    def one(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("name") or m.group("bare")
        op, arg = m.group("op"), m.group("arg") or ""
        value = env.get(name)
        if op == ":-":
            return value if value else arg
        if op == "-":
            return arg if value is None else value
        if op in (":?", "?"):
            if value is None or (op == ":?" and value == ""):
                raise MissingVariable(name, arg)
            return value
        if value is None:
            raise MissingVariable(name, "referenced without a default and not set")
        return value

    return _REFERENCE.sub(one, text)


def interpolate_tree(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [interpolate_tree(v, env) for v in node]
    if isinstance(node, dict):
        return {k: interpolate_tree(v, env) for k, v in node.items()}
    return node


def strings(node: Any) -> list[str]:
    """Every string value of a parsed YAML tree (what compose interpolates; comments excluded)."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [s for v in node for s in strings(v)]
    if isinstance(node, dict):
        return [s for v in node.values() for s in strings(v)]
    return []


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a .env file (comments and blank lines skipped)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: {line!r} is not KEY=VALUE"
        out[key.strip()] = value.strip()
    return out


def commented_defaults(path: Path) -> dict[str, str]:
    """``# KEY=VALUE`` lines: optional settings documented with their defaults."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.fullmatch(r"#\s*([A-Z][A-Z0-9_]*)=(\S*)\s*", line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool

    @property
    def named_volume(self) -> bool:
        return not self.source.startswith((".", "/", "~"))


class Service:
    def __init__(self, name: str, spec: dict[str, Any]) -> None:
        self.name = name
        self.spec = spec

    def __repr__(self) -> str:
        return f"Service({self.name})"

    @property
    def labels(self) -> dict[str, str]:
        labels = self.spec.get("labels") or {}
        if isinstance(labels, list):
            labels = dict(item.split("=", 1) for item in labels)
        return labels

    @property
    def component(self) -> str | None:
        return self.labels.get("io.tidegate.component")

    @property
    def region(self) -> str | None:
        return self.labels.get("io.tidegate.region")

    @property
    def env(self) -> dict[str, str]:
        env = self.spec.get("environment") or {}
        if isinstance(env, list):
            env = dict(item.split("=", 1) for item in env)
        return {k: str(v) for k, v in env.items()}

    @property
    def command(self) -> list[str]:
        cmd = self.spec.get("command") or []
        return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]

    def option(self, flag: str) -> str | None:
        """The value after ``flag`` in the command (None if absent)."""
        cmd = self.command
        return cmd[cmd.index(flag) + 1] if flag in cmd and cmd.index(flag) + 1 < len(cmd) else None

    @property
    def mounts(self) -> list[Mount]:
        out = []
        for item in self.spec.get("volumes") or []:
            if isinstance(item, dict):
                out.append(Mount(str(item.get("source", "")), item["target"], bool(item.get("read_only"))))
                continue
            parts = item.split(":")
            mode = parts[2] if len(parts) > 2 else "rw"
            out.append(Mount(parts[0], parts[1], "ro" in mode.split(",")))
        return out

    def mount_of(self, volume: str) -> Mount | None:
        found = [m for m in self.mounts if m.source == volume]
        return found[0] if found else None

    @property
    def expose(self) -> set[int]:
        return {int(str(p).split("/")[0]) for p in self.spec.get("expose") or []}

    @property
    def published(self) -> list[tuple[int, int]]:
        """(host port, container port) pairs."""
        out = []
        for p in self.spec.get("ports") or []:
            parts = str(p).split("/")[0].split(":")
            out.append((int(parts[-2]), int(parts[-1])))
        return out

    @property
    def healthcheck(self) -> list[str] | None:
        hc = self.spec.get("healthcheck")
        if not hc or hc.get("disable"):
            return None
        test = hc["test"]
        return shlex.split(test) if isinstance(test, str) else [str(t) for t in test]

    @property
    def image(self) -> str | None:
        return self.spec.get("image")


def active(spec: Mapping[str, Any], profiles: frozenset[str]) -> bool:
    """Compose starts a service without ``profiles`` always, one with them when one is on."""
    return not spec.get("profiles") or bool(profiles & set(spec["profiles"]))


class Stack:
    """The compose file, interpolated with ``env`` (default: .env.example's values), as
    compose starts it with ``profiles`` on (default: none, the small stack). ``all_services``
    holds every profile's."""

    def __init__(self, env: Mapping[str, str] | None = None, profiles: frozenset[str] = frozenset()) -> None:
        self.text = COMPOSE_FILE.read_text()
        self.raw = yaml.safe_load(self.text)  # anchors and << merges resolved, ${...} not
        self.env = dict(read_env_file(ENV_EXAMPLE) if env is None else env)
        self.data = interpolate_tree(self.raw, self.env)
        self.all_services = {name: Service(name, spec) for name, spec in self.data["services"].items()}
        self.services = {n: s for n, s in self.all_services.items() if active(s.spec, profiles)}
        self.raw_services = {name: Service(name, spec) for name, spec in self.raw["services"].items()}

    @property
    def references(self) -> list[Reference]:
        return [r for s in strings(self.raw) for r in references(s)]

    def by_component(self, component: str, region: str | None = None) -> list[Service]:
        return [
            s for s in self.services.values() if s.component == component and (region is None or s.region == region)
        ]

    @property
    def tidegate_services(self) -> list[Service]:
        """Containers that run Tidegate code: Airflow (DAGs, controller in tasks), the
        driver hosts, and the Spark workers (executors run the event-time core)."""
        return [s for s in self.services.values() if s.component in ("airflow", "drivers", "spark-worker")]


class Dockerfile:
    def __init__(self, path: Path = DOCKERFILE) -> None:
        self.path = path
        self.text = path.read_text()
        joined = re.sub(r"\\\n", " ", self.text)
        self.instructions: list[tuple[str, str]] = []
        for line in joined.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            keyword, _, rest = line.partition(" ")
            self.instructions.append((keyword.upper(), rest.strip()))

    def all(self, keyword: str) -> list[str]:
        return [rest for k, rest in self.instructions if k == keyword]

    @cached_property
    def args(self) -> dict[str, str]:
        out = {}
        for rest in self.all("ARG"):
            name, sep, default = rest.partition("=")
            out[name.strip()] = default.strip().strip('"') if sep else ""
        return out

    @cached_property
    def env(self) -> dict[str, str]:
        out = {}
        for rest in self.all("ENV"):
            for token in shlex.split(rest):
                key, sep, value = token.partition("=")
                if sep:
                    out[key] = value
        return out

    @property
    def base_image(self) -> str:
        (rest,) = self.all("FROM")
        image = rest.split()[0]
        return re.sub(r"\$\{?(\w+)\}?", lambda m: self.args.get(m.group(1), m.group(0)), image)

    @property
    def workdir(self) -> PurePosixPath:
        return PurePosixPath(self.all("WORKDIR")[-1])

    @property
    def copies(self) -> dict[PurePosixPath, list[str]]:
        """Destination (absolute) -> sources of every COPY."""
        out: dict[PurePosixPath, list[str]] = {}
        for rest in self.all("COPY"):
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            dest = PurePosixPath(parts[-1])
            dest = dest if dest.is_absolute() else self.workdir / dest
            out.setdefault(dest, []).extend(parts[:-1])
        return out

    @property
    def symlinks(self) -> dict[PurePosixPath, PurePosixPath]:
        """Link -> target of every ``ln -s TARGET LINK`` in RUN."""
        out = {}
        for rest in self.all("RUN"):
            for target, link in re.findall(r"ln -s[f]? (\S+) (\S+)", rest):
                out[PurePosixPath(link)] = PurePosixPath(target)
        return out

    @cached_property
    def created_dirs(self) -> set[PurePosixPath]:
        """Directories ``mkdir -p`` creates in RUN (``${region}`` expanded over TIDEGATE_REGIONS)."""
        out = set()
        for rest in self.all("RUN"):
            for args in re.findall(r"mkdir -p ([^&;]+)", rest):
                for token in shlex.split(args):
                    names = self.args.get("TIDEGATE_REGIONS", "").split() if "${region}" in token else [None]
                    for name in names:
                        path = PurePosixPath(token.replace("${region}", name) if name else token)
                        out.add(path if path.is_absolute() else self.workdir / path)
        return out

    @cached_property
    def owned_by_user(self) -> set[PurePosixPath]:
        """Paths ``chown -R`` hands to the image's user."""
        out = set()
        for rest in self.all("RUN"):
            for args in re.findall(r"chown -R \S+ ([^&;]+)", rest):
                out.update(PurePosixPath(t) for t in shlex.split(args))
        return out

    def resolve(self, path: PurePosixPath) -> PurePosixPath:
        """``path`` with the image's symlinks followed."""
        for link, target in self.symlinks.items():
            if path == link or link in path.parents:
                return target / path.relative_to(link)
        return path
