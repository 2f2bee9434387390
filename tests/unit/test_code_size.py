"""The house's size limits: no Python function over 120 lines, no C++/CUDA function over 150, no C++/CUDA
file over 800. Read from the sources (ast for Python, lizard's C++ reader for C++ and CUDA), over every file
git tracks or would track (a new plugin folder counts before its first commit).

A function's length is its lines from the signature to the closing line, comments and blank lines included,
as lizard counts them (the issue's own figures: harness_main.cpp's main was 173)."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import lizard
import pytest

from trt_plugin_kit.interface import REPO_ROOT

MAX_PYTHON_FUNCTION = 120
MAX_CPP_FUNCTION = 150
MAX_CPP_FILE = 800
CPP_SUFFIXES = (".cpp", ".cc", ".h", ".cu", ".cuh")


def _sources(*patterns: str) -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *patterns],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return [REPO_ROOT / name.decode() for name in listed if name and (REPO_ROOT / name.decode()).is_file()]


def python_functions_over(limit: int, path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > limit
    ]


def cpp_functions_over(limit: int, path: Path) -> list[str]:
    # lizard picks its reader by the file name; CUDA is C++ to it.
    name = path.with_suffix(".cpp").name if path.suffix in (".cu", ".cuh") else path.name
    info = lizard.analyze_file.analyze_source_code(name, path.read_text())
    return [
        f"{path.relative_to(REPO_ROOT)}:{f.start_line} {f.name}: {f.length} lines"
        for f in info.function_list
        if f.length > limit
    ]


def test_no_python_function_over_the_limit():
    sources = _sources("*.py")
    assert len(sources) > 100, "git listed too few Python files: is this a checkout?"
    long = [line for path in sources for line in python_functions_over(MAX_PYTHON_FUNCTION, path)]
    assert long == [], f"Python functions over {MAX_PYTHON_FUNCTION} lines (split them along their phases)"


def test_no_cpp_function_or_file_over_the_limits():
    sources = _sources(*(f"*{suffix}" for suffix in CPP_SUFFIXES))
    assert len(sources) > 50, "git listed too few C++/CUDA files: is this a checkout?"
    long = [line for path in sources for line in cpp_functions_over(MAX_CPP_FUNCTION, path)]
    assert long == [], f"C++/CUDA functions over {MAX_CPP_FUNCTION} lines (split them along their phases)"
    big = [
        f"{path.relative_to(REPO_ROOT)}: {lines} lines"
        for path in sources
        if (lines := len(path.read_text().splitlines())) > MAX_CPP_FILE
    ]
    assert big == [], f"C++/CUDA files over {MAX_CPP_FILE} lines (split them by concern)"


@pytest.mark.parametrize(
    ("suffix", "body", "limit"),
    [
        (".py", "def f():\n" + "    x = 1\n" * 5, 5),
        (".cu", "__global__ void k()\n{\n" + "    int x = 1;\n" * 3 + "}\n", 5),
    ],
)
def test_the_check_sees_a_long_function(tmp_path, monkeypatch, suffix, body, limit):
    """The readers find a function one line over the limit (a check that cannot fail checks nothing)."""
    monkeypatch.setattr(f"{__name__}.REPO_ROOT", tmp_path)
    path = tmp_path / f"long{suffix}"
    path.write_text(body)
    found = (python_functions_over if suffix == ".py" else cpp_functions_over)(limit, path)
    assert len(found) == 1 and f": {limit + 1} lines" in found[0], found
    assert (python_functions_over if suffix == ".py" else cpp_functions_over)(limit + 1, path) == []
