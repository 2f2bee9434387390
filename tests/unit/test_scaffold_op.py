"""A scaffolded plugin becomes one's own op by changing op() alone, whatever its inputs (issue 40, item 3):
the generated kernels give op() every input's value, reference.py's <name>_op() gets the inputs one by one,
and harness/cases.cpp's evaluate() too. Shown with (x0 - x1)^2, a two-input op that is no sum: its Triton
kernel checked by Triton's interpreter against the edited reference, its CUDA kernel compiled warning-free."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trt_plugin_kit import scaffold
from trt_plugin_kit.interface import PLUGINS_DIR, REPO_ROOT

SQUARED_DIFFERENCE_REFERENCE = """    scale, _ = _fields(scale)
    d = xs[0] - xs[1]
    value = scale * d * d
    return value, np.abs(value)
"""


def scaffold_into(plugins: Path, name: str, kernel: str) -> Path:
    options = scaffold.Options(name, scaffold.camel_case(name), inputs=2, kernel=kernel)
    return scaffold.create(options, f"{name} --inputs 2 --kernel {kernel}", plugins, model_repository=None)


def replace_body(source: str, header: str, body: str) -> str:
    """`source` with the body (after its docstring) of the function at `header` replaced by `body`."""
    pattern = re.compile(rf"({re.escape(header)}.*?\n)(    .*?)(?=\n\S|\n\n\n|\Z)", re.S)
    docstring_end = '"""\n'
    match = pattern.search(source)
    assert match, f"no {header!r} in the generated file"
    head, old = match.group(1), match.group(2)
    keep = old[: old.index(docstring_end, old.index('"""') + 3) + len(docstring_end)] if '"""' in old else ""
    return source[: match.start()] + head + keep + body.rstrip("\n") + source[match.end() :]


def interpret(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trt_plugin_kit.triton_interpret", str(folder)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_two_input_op_in_triton_is_op_and_the_reference_alone(tmp_path):
    folder = scaffold_into(tmp_path, "sq_diff", "triton")
    kernel = folder / "kernel.py"
    assert "def op(x0, x1, scale):" in kernel.read_text()
    squared_difference = "    d = x0 - x1\n    return scale * d * d\n"
    kernel.write_text(replace_body(kernel.read_text(), "def op(x0, x1, scale):", squared_difference))
    # The kernel alone changed: the reference still says x0 + x1, and the check says so.
    stale = interpret(folder)
    assert stale.returncode == 1 and "off by" in stale.stdout, stale.stdout + stale.stderr
    reference = folder / "reference.py"
    reference.write_text(replace_body(reference.read_text(), "def sq_diff_op(", SQUARED_DIFFERENCE_REFERENCE))
    result = interpret(folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 of 4 variant runs match reference.py" in result.stdout


@pytest.mark.skipif(
    shutil.which("nvcc") is None, reason="needs the CUDA toolkit's nvcc (the CI machine has it)"
)
def test_a_two_input_op_in_cuda_is_op_alone_and_compiles_without_warnings(tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "common").symlink_to(PLUGINS_DIR / "common")
    folder = scaffold_into(plugins, "sq_diff", "cuda")
    source = (folder / "sq_diff_kernel.cu").read_text()
    header = re.search(
        r"__device__ __forceinline__ float op\(float const \(&x\)\[kSqDiffInputs\],[^)]*\)", source
    )
    assert header, "op() does not receive every input's value"
    start = source.index("{", header.end())
    end = source.index("\n}\n", start)
    edited = (
        source[: start + 1]
        + "\n    float const d = x[0] - x[1];\n    return args.scale * d * d;"
        + source[end:]
    )
    (folder / "sq_diff_kernel.cu").write_text(edited)
    result = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_75", "-Werror", "all-warnings", "-Xcompiler", "-Wall,-Wextra",
         "-c", str(folder / "sq_diff_kernel.cu"), "-I", str(plugins), "-o", str(tmp_path / "k.o")],
        capture_output=True, text=True, timeout=600, env={**os.environ},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    cases = (folder / "harness" / "cases.cpp").read_text()
    assert re.search(r"void evaluate\(Fields const ?& ?f,\s*std::vector<double> const ?& ?x,", cases), cases


@pytest.mark.parametrize("kernel", ["cuda", "triton"])
def test_a_long_name_still_gives_lint_clean_python(tmp_path, kernel):
    """Docstrings that quote the name keep a long one within the line length (a ten-letter name broke
    `make lint` on the fresh-clone run of issue 40)."""
    name = "a_rather_long_plugin_name_for_lint"
    options = scaffold.Options(name, scaffold.camel_case(name), inputs=2, array_field="cc", kernel=kernel)
    folder = scaffold.create(options, name, tmp_path, model_repository=None)
    config = str(REPO_ROOT / "pyproject.toml")
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--config", config, str(folder)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout
