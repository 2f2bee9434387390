"""FlashAttentionTriton's kernel (plugins/flash_attention/kernel.py): its math runs on the CPU in Triton's
interpreter with every other plugin's kernel (tests/unit/test_triton_interpreter.py: each variant at its
interpreter_cases: several query and key blocks, partial ones, S_q != S_kv, causal or not, every type); here,
that the head sizes the reference (and the spec) accept are the ones compiled, and that a kernel whose online
softmax forgets to rescale its sums is caught by that check."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from trt_plugin_kit.interface import PLUGINS_DIR, REPO_ROOT

pytest.importorskip("triton", reason="OpenAI Triton is a build-time extra: pip install -e '.[triton]'")

FOLDER = PLUGINS_DIR / "flash_attention"


def _load(path, name):
    loader = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def test_the_head_sizes_the_reference_accepts_are_the_ones_compiled():
    """The plugin asks kernel.py for '<type>_d<D>' with D one of the reference's (and the spec's) sizes, and
    for its tactics' '<type>_d<D>_t<i>' (FP16/BF16 at the heads TACTICS lists, a handful each)."""
    kernel = _load(FOLDER / "kernel.py", "fa_kernel_variants")
    reference = _load(FOLDER / "reference.py", "fa_reference")
    assert kernel.HEAD_SIZES == reference.HEAD_SIZES
    defaults = {f"{t}_d{d}" for t in ("fp32", "fp16", "bf16") for d in kernel.HEAD_SIZES}
    tactics = {
        f"{t}_d{d}_t{i}"
        for t in kernel.TACTIC_TYPES
        for d, shapes in kernel.TACTICS.items()
        for i in range(len(shapes))
    }
    assert set(kernel.TACTICS) <= set(kernel.HEAD_SIZES)
    assert all(1 <= len(shapes) <= 6 for shapes in kernel.TACTICS.values())  # CI compiles every one
    assert set(kernel.VARIANTS) == defaults | tactics


def test_an_online_softmax_without_its_rescaling_is_caught(tmp_path):
    source = (FOLDER / "kernel.py").read_text()
    rescaled = "acc = tl.dot(p.to(v_tile.dtype), v_tile, acc * correction[:, None])"
    assert rescaled in source
    broken = tmp_path / "kernel.py"
    broken.write_text(source.replace(rescaled, "acc = tl.dot(p.to(v_tile.dtype), v_tile, acc)"))
    run = subprocess.run(
        [sys.executable, "-m", "trt_plugin_kit.triton_interpret", str(FOLDER), "--kernel", str(broken)],
        capture_output=True, text=True, timeout=600, cwd=REPO_ROOT,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert "variant bf16_d16, inputs [1, 2, 70, 16]: output 0 off by" in run.stdout
