"""The front door and the docs: the README stays short with the two commands CI runs first;
every relative link in README.md and docs/ leads to a file (and heading) that exists, every
repository path they name in code exists, and every ``tidegate.…`` module they name resolves;
CHANGELOG.md keeps Keep a Changelog's form."""

from __future__ import annotations

import ast
import re
from fnmatch import fnmatch
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to '-'."""
    text = FENCE.sub("", page.read_text())
    return {
        re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)
    }


def test_the_readme_is_a_front_door_of_at_most_200_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move detail under docs/"


def test_the_readmes_first_code_block_is_the_two_commands_ci_runs():
    first = re.search(r"^```\w*\n(.*?)^```", README.read_text(), re.MULTILINE | re.DOTALL).group(1)
    commands = [line.split("#")[0].strip() for line in first.splitlines() if line.strip()]
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"]


def test_every_relative_link_in_the_readme_and_docs_resolves():
    broken = []
    for page in PAGES:
        if not page.exists():
            continue
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(REPO)} → {target}"
            if not resolved.exists():
                broken.append(f"{where}: no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{where}: no such heading")
    assert not broken, "broken links:\n" + "\n".join(broken)


# -- paths and modules the docs name ---------------------------------------------------------------

CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)  # an inline code span (fenced blocks are removed first)
REPO_PATH = re.compile(
    r"(?<![\w./$<{~-])"  # not the tail of a longer path, a URL, `$TIDEGATE_HOME/…` or `<home>/…`
    r"((?:README|CHANGELOG)\.md|pyproject\.toml|docker-compose\.yaml|\.env\.example"
    r"|(?:src|tests|jobs|scripts|bench|docs|plugins|providers|dags|docker|expectations|tools|jvm|requirements)"
    r"/[^\s`'\"()\[\],;|]*)"
)
MODULE = re.compile(r"(?<![\w./$-])((?:tidegate|tidegate_airflow)(?:\.\w+)+)(?![\w/-])")
MODULE_ROOTS = {"tidegate": REPO / "src", "tidegate_airflow": REPO / "providers" / "tidegate-airflow" / "src"}
PLACEHOLDER = re.compile(r"[<>*?{}…$]")  # `tests/<area>/`, `jobs/*.yaml`: a pattern, not a file


def code_spans(page: Path) -> list[str]:
    return [span for _, span in CODE.findall(FENCE.sub("", page.read_text()))]


def ignored_by_git(path: str) -> bool:
    """Whether .gitignore leaves ``path`` out: a build product, not something the repository holds."""
    parts = path.strip("/").split("/")
    for line in (REPO / ".gitignore").read_text().splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith(("#", "!")):
            continue
        anchored = "/" in pattern.strip("/")
        pattern = pattern.strip("/")
        for end in range(1, len(parts) + 1):
            if fnmatch(("/".join(parts[:end]) if anchored else parts[end - 1]), pattern):
                return True
    return False


def named_paths(span: str) -> list[str]:
    """The repository paths a code span names (a command's arguments too), each without its
    `::test` or `:line` suffix."""
    found = []
    for token in REPO_PATH.findall(span):
        token = re.sub(r"(::\S*|:\d+(-\d+)?)$", "", token).rstrip(".:")
        if not PLACEHOLDER.search(token):
            found.append(token)
    return found


def top_level_names(source: Path) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
    return names


def java_classes() -> set[str]:
    """``package.Class`` of every Java source under src/ (the JVM side names its classes so)."""
    classes = set()
    for source in (REPO / "src").rglob("*.java"):
        package = re.search(r"^package ([\w.]+);", source.read_text(), re.MULTILINE)
        if package:
            classes.add(f"{package.group(1)}.{source.stem}")
    return classes


def resolves(dotted: str, java: set[str]) -> bool:
    """A module under src/ (or the provider's src/), or a module's attribute: a top-level name of it, or a
    name in the body of that top-level class; or a Java class of ours."""
    parts = dotted.split(".")
    root = MODULE_ROOTS[parts[0]]
    module, depth = None, 0
    for depth in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:depth])
        if (base / "__init__.py").exists():
            module = base / "__init__.py"
            break
        if base.with_suffix(".py").exists():
            module = base.with_suffix(".py")
            break
    if module is None:
        return False
    rest = parts[depth:]
    if not rest:
        return True
    names = top_level_names(module)
    if rest[0] not in names:
        return dotted in java
    if len(rest) == 1:
        return True
    owner = names[rest[0]]
    return isinstance(owner, ast.ClassDef) and rest[1] in top_level_names_of(owner)


def top_level_names_of(cls: ast.ClassDef) -> set[str]:
    names = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def test_the_path_finder_skips_placeholders_urls_and_runtime_data():
    assert named_paths("bash scripts/demo.sh") == ["scripts/demo.sh"]
    assert named_paths("tests/test_docs.py::test_x") == ["tests/test_docs.py"]
    assert named_paths("src/tidegate/cli/__init__.py:12") == ["src/tidegate/cli/__init__.py"]
    for skipped in (
        "jobs/<job>.yaml",
        "docs/*.md",
        "https://example.org/docs/x.md",
        "var/airflow/",
        "$TIDEGATE_HOME/jobs/x",
        "<home>/docs/x",
        "/opt/tidegate/docker/healthcheck.py",
        "s3a://bucket/tests/x",
        "tests/{a,b}.py",
    ):
        assert named_paths(skipped) == [], skipped
    assert ignored_by_git("docker/seaweedfs/bin/weed") and not ignored_by_git("docker/Dockerfile")


def test_the_module_finder_takes_modules_their_names_and_our_java_classes_only():
    java = java_classes()
    for dotted in (
        "tidegate.cli",
        "tidegate.cli.build_parser",
        "tidegate.inputs.log.PartitionedLog",
        "tidegate_airflow.hooks.tidegate.TidegateHook",
        "tidegate.jvm.PolicyScan",
    ):
        assert resolves(dotted, java), dotted
    for dotted in (
        "tidegate.nowhere",
        "tidegate.cli.no_such_name",
        "tidegate.inputs.log.PartitionedLog.no_such",
        "tidegate.jvm.NoSuchClass",
    ):
        assert not resolves(dotted, java), dotted
    found = MODULE.findall("python -m tidegate.spark.class_archive; tidegate.egg-info")
    assert found == ["tidegate.spark.class_archive"]


def test_every_repository_path_the_readme_and_docs_name_exists():
    missing = []
    for page in [README, *sorted((REPO / "docs").rglob("*.md"))]:
        for span in code_spans(page):
            for path in named_paths(span):
                if not (REPO / path).exists() and not ignored_by_git(path):
                    missing.append(f"{page.relative_to(REPO)}: `{path}`")
    assert not missing, "paths that do not exist:\n" + "\n".join(sorted(set(missing)))


def test_every_module_the_readme_and_docs_name_exists():
    java = java_classes()
    missing = []
    for page in [README, *sorted((REPO / "docs").rglob("*.md"))]:
        for span in code_spans(page):
            for dotted in MODULE.findall(span):
                if not resolves(dotted, java):
                    missing.append(f"{page.relative_to(REPO)}: `{dotted}`")
    assert not missing, "modules or attributes that do not exist:\n" + "\n".join(sorted(set(missing)))


# -- the changelog ---------------------------------------------------------------------------------

CHANGELOG = REPO / "CHANGELOG.md"
KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")  # Keep a Changelog 1.1.0


def changelog_versions() -> list[tuple[str, str]]:
    """(heading, body) of each ``## `` section, in the file's order."""
    parts = re.split(r"^## (.+)$", CHANGELOG.read_text(), flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def test_the_changelog_has_unreleased_then_dated_versions_newest_first():
    headings = [heading for heading, _ in changelog_versions()]
    assert headings[0] == "[Unreleased]"
    released = [re.fullmatch(r"\[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})", h) for h in headings[1:]]
    assert all(released), (
        f"not `## [x.y.z] - YYYY-MM-DD`: {[h for h, m in zip(headings[1:], released, strict=True) if not m]}"
    )
    versions = [tuple(int(n) for n in m.groups()[:3]) for m in released]
    dates = [m.group(4) for m in released]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    assert dates == sorted(dates, reverse=True)


def test_each_changelog_version_groups_its_entries_by_kind_one_sentence_each():
    for heading, body in changelog_versions():
        kinds = re.findall(r"^### (.+)$", body, re.MULTILINE)
        assert kinds and all(kind in KINDS for kind in kinds), f"{heading}: {kinds}"
        assert len(set(kinds)) == len(kinds), f"{heading}: a kind twice"
        for entry in re.findall(r"^- (.+?)(?=\n- |\n\n|\n#|\Z)", body, re.MULTILINE | re.DOTALL):
            prose = re.sub(r"`[^`]*`|\([^()]*\)", "", " ".join(entry.split()))
            assert entry.rstrip().endswith("."), f"{heading}: does not end a sentence: {entry[:80]}"
            assert not re.search(r"[.!?] [A-Z]", prose), f"{heading}: more than one sentence: {entry[:80]}"
