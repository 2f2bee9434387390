"""docs/SECURITY.md points every claim at a test: each test it names exists (a renamed test must take the doc
with it), and the limits it quotes are the edge's."""

from __future__ import annotations

import ast
import re

from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.serving.edge import limits

DOC = REPO_ROOT / "docs" / "SECURITY.md"


def functions_of(path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_test_the_security_notes_name_exists():
    text = DOC.read_text()
    files = {path.name: path for path in (REPO_ROOT / "tests").rglob("*.py")}
    cited = 0
    for line in text.splitlines():
        current = None  # "`file.py::a`, `::b`": b is in the file named last on the line
        # Test references only: `file.py::name` or `::name` (C++ names like `std::length_error` are not).
        for span in re.findall(r"`((?:[\w/]+\.py)?::test_\w+(?:\[[^`]*\])?)`", line):
            name, _, test = span.partition("::")
            current = name or current
            test = re.sub(r"\[.*\]$", "", test)
            assert current in files, f"docs/SECURITY.md names {current!r}, which is not a test file"
            assert test in functions_of(files[current]), f"docs/SECURITY.md names {current}::{test}"
            cited += 1
    assert cited >= 40


def test_the_quoted_limits_are_the_edges():
    text = DOC.read_text()
    assert f"{limits.MAX_REQUEST_BYTES // 2**20} MiB per request" in text
    assert f"{limits.HEADER_TIMEOUT_S:.0f} s for a request's line and headers" in text
    assert f"{limits.BODY_TIMEOUT_S:.0f} s for its body" in text
    assert f"at most {limits.MAX_GRPC_CONCURRENT_RPCS} gRPC calls in flight" in text
    assert "EDGE_COST_SUMMARY" not in text, "the edge's measured cost is missing"
