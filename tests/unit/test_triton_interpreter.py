"""Every OpenAI Triton kernel of the repository (plugins/*/kernel.py) computes its reference's math: run on
the CPU by Triton's interpreter (TRITON_INTERPRET=1, trt_plugin_kit/triton_interpret.py), every variant, at
small shapes (issue 40, item 16). A CUDA kernel's math runs only on a GPU (the harness)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from trt_plugin_kit.interface import PLUGINS_DIR, REPO_ROOT

KERNEL_FOLDERS = sorted(path.parent for path in PLUGINS_DIR.glob("*/kernel.py"))


def interpret(*args: str) -> subprocess.CompletedProcess:
    # A process of its own: triton.jit reads TRITON_INTERPRET when it wraps a kernel, at import.
    return subprocess.run(
        [sys.executable, "-m", "trt_plugin_kit.triton_interpret", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_repository_has_triton_kernels():
    assert PLUGINS_DIR / "swiglu" in KERNEL_FOLDERS


@pytest.mark.parametrize("folder", KERNEL_FOLDERS, ids=[folder.name for folder in KERNEL_FOLDERS])
def test_every_variant_of_the_kernel_matches_its_reference_in_the_interpreter(folder):
    result = interpret(str(folder))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "variant runs match reference.py" in result.stdout


def test_a_kernel_with_wrong_math_is_caught(tmp_path):
    """SwiGLU's kernel with silu(a) * b turned into a * b: every variant is reported, exit status 1."""
    source = (PLUGINS_DIR / "swiglu" / "kernel.py").read_text()
    assert "out = a * tl.sigmoid(a) * b" in source
    broken = tmp_path / "kernel.py"
    broken.write_text(source.replace("out = a * tl.sigmoid(a) * b", "out = a * b"))
    result = interpret(str(PLUGINS_DIR / "swiglu"), "--kernel", str(broken))
    assert result.returncode == 1, result.stdout + result.stderr
    # Every variant (each tactic, aligned and general, per type) is run and none matches.
    assert re.search(r"plugins/swiglu: 0 of [1-9]\d* variant runs match reference\.py", result.stdout), (
        result.stdout
    )
    assert re.search(r"variant fp16_t\d+_aligned, inputs \[2, 3, 128\]: output 0 off by", result.stdout)


def test_a_folder_without_a_triton_kernel_is_refused_with_the_reason():
    result = interpret(str(PLUGINS_DIR / "prelu"))
    assert result.returncode == 2
    assert "no kernel.py (a CUDA kernel's math runs only on a GPU)" in result.stderr
