"""What the docs quote stays true (issue 40, item 11): every repository path, `make` target, `python -m`
module and `trt-plugin-kit` command that a Markdown page of the repository names in its code (inline `code`
and fenced blocks) exists. Records under records/ are history (what ran then) and are not checked.

Paths a doc's own commands create are not quoted facts: the folders of an op the page scaffolds
(`new-plugin NAME`), placeholders (`NAME`, `<...>`, globs) and build outputs (build/).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

from trt_plugin_kit.__main__ import COMMANDS
from trt_plugin_kit.interface import REPO_ROOT

# Top-level folders and files a quoted path may start with.
PATH_ROOTS = (
    "plugins", "trt_plugin_kit", "scripts", "tests", "docs", "clients", "loadtests", "models",
    "model_repository", "deploy", "docker", "records", "samples",
)  # fmt: skip
# Possessive: a path followed by a placeholder or a brace list (`NAME.{md,json}`) is a pattern, not a path.
QUOTED_PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(PATH_ROOTS) + r")/[\w./-]*+)(?![<*{])")
MAKE_TARGET = re.compile(r"(?:^|[\s`(;&|])make ([a-z][\w-]*)", re.M)
PYTHON_MODULE = re.compile(r"python3? -m ([A-Za-z_][\w.]*)")
FRONT_DOOR = re.compile(r"(?<![\w-])(?<!-n )trt-plugin-kit ([a-z][\w-]*)")  # not `kubectl -n trt-plugin-kit`
SCAFFOLDED = re.compile(r"new-plugin ([a-z_][a-z0-9_]*)")


def documents() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [REPO_ROOT / name for name in listed if not name.startswith("records/")]


def code_of(text: str) -> str:
    """The code a page quotes: fenced blocks and inline spans, one per line."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)
    return "\n".join(fenced + re.findall(r"`([^`\n]+)`", prose))


def make_targets() -> set[str]:
    makefile = (REPO_ROOT / "Makefile").read_text()
    rules = re.findall(r"^([\w.%-]+(?: [\w.%-]+)*) ?:(?!=)", makefile, re.M)
    return {target for rule in rules for target in rule.split()}


# Folders a run makes, quoted where they are made or read: the compiled gRPC front staged for the image build
# (scripts/compose_test.py; git-ignored under docker/wheelhouse/).
MADE_BY_A_RUN = {"docker/wheelhouse/edge-native/"}


def generated(path: str, scaffolded: set[str]) -> bool:
    """A placeholder (`NAME`, `YYYYMMDD`: a capitalised word) or the folder of an op the page scaffolds."""
    parts = path.split("/")
    return bool(re.search(r"[A-Z]{3,}", path)) or (len(parts) > 1 and parts[1] in scaffolded)


def sources() -> list[Path]:
    """Files whose comments and docstrings quote paths too (tests name made-up paths on purpose)."""
    patterns = [
        "*.py",
        "*.sh",
        "*.tmpl",
        "*.yml",
        "*.yaml",
        "*.toml",
        "Makefile",
        "Dockerfile*",
        "*.Dockerfile",
    ]
    listed = subprocess.run(
        ["git", "ls-files", *patterns], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [REPO_ROOT / name for name in listed if not name.startswith(("tests/", "records/"))]


DOCS = documents()


@pytest.mark.parametrize("doc", DOCS, ids=[str(doc.relative_to(REPO_ROOT)) for doc in DOCS])
def test_every_quoted_path_and_command_exists(doc):
    text = doc.read_text()
    code = code_of(text)
    scaffolded = set(SCAFFOLDED.findall(text))
    wrong = []
    for path in sorted({found.rstrip(".") for found in QUOTED_PATH.findall(code)}):
        if generated(path, scaffolded):
            continue
        # A path relative to the page's own folder counts too (plugins/README.md quoting `harness/...`).
        if not (REPO_ROOT / path).exists() and not (doc.parent / path).exists():
            wrong.append(f"path {path}")
    targets = make_targets()
    wrong += [f"make {t}" for t in sorted(set(MAKE_TARGET.findall(code))) if t not in targets]
    for module in sorted(set(PYTHON_MODULE.findall(code))):
        if importlib.util.find_spec(module.split(".")[0]) is None or importlib.util.find_spec(module) is None:
            wrong.append(f"python -m {module}")
    wrong += [f"trt-plugin-kit {c}" for c in sorted(set(FRONT_DOOR.findall(code))) if c not in COMMANDS]
    assert not wrong, f"{doc.relative_to(REPO_ROOT)} quotes what does not exist: {wrong}"


def test_every_path_a_source_file_quotes_exists():
    wrong = []
    for source in sources():
        for path in sorted(
            {found.rstrip(".") for found in QUOTED_PATH.findall(source.read_text(errors="replace"))}
        ):
            if not generated(path, set()) and path not in MADE_BY_A_RUN and not (REPO_ROOT / path).exists():
                wrong.append(f"{source.relative_to(REPO_ROOT)}: {path}")
    assert not wrong, "paths that do not exist:\n" + "\n".join(wrong)


def test_the_checker_finds_a_stale_path_a_missing_target_and_an_unknown_command():
    page = "Run `make no-such-target`, then `python -m no_such_module` on `scripts/soak.py`.\n"
    code = code_of(page)
    assert QUOTED_PATH.findall(code) == ["scripts/soak.py"] and not (REPO_ROOT / "scripts/soak.py").exists()
    assert MAKE_TARGET.findall(code) == ["no-such-target"] and "no-such-target" not in make_targets()
    assert PYTHON_MODULE.findall(code) == ["no_such_module"]
    assert {"serve", "check", "plugins"} <= make_targets() | set(COMMANDS)
