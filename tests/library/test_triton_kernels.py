"""Plugins whose kernel is OpenAI Triton (plugins/<name>/kernel.py), compiled ahead of time into the library.

What the CI machine (no GPU) can check: the AOT compiler refuses what the launcher cannot run with a message
naming the variant; the library `make plugins` built embeds, for each variant, a fatbin holding a cubin for
every configured architecture (and PTX for the newest where CMAKE_CUDA_ARCHITECTURES asks for it), read back
with cuobjdump from the build and found byte for byte in libtrt_plugin_kit.so; the library registers the
SwiGLUSplit creator and refuses its bad shapes (`plugin_harness`, TensorRT's call sequence up to enqueue). The
GPU side (launch, graph capture, sanitizers, speed) runs in scripts/gpu_check.sh and scripts/gpu_bench.sh.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trt_plugin_kit import triton_aot
from trt_plugin_kit.interface import PLUGINS_DIR, REPO_ROOT

BUILD_DIR = Path(os.environ.get("BUILD_DIR", REPO_ROOT / "build"))
if not BUILD_DIR.is_absolute():
    BUILD_DIR = REPO_ROOT / BUILD_DIR
TRT_VERSIONS = os.environ.get("TRT_VERSIONS", "10.13.3 11.1").split()
TRITON_FOLDERS = sorted(
    p.parent.name for p in PLUGINS_DIR.glob("*/kernel.py") if (p.parent / "spec.yaml").exists()
)


def cuobjdump() -> str:
    """The CUDA toolkit's cuobjdump, else the one Triton's wheel ships (the same tool)."""
    found = shutil.which("cuobjdump") or shutil.which("cuobjdump", path="/usr/local/cuda/bin")
    if found:
        return found
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    assert bundled.is_file(), "no cuobjdump: neither the CUDA toolkit's nor triton's"
    return str(bundled)


def configured_archs(build: Path) -> list[triton_aot.Arch]:
    cache = (build / "CMakeCache.txt").read_text()
    value = re.search(r"^CMAKE_CUDA_ARCHITECTURES:\w+=(.*)$", cache, re.M).group(1)
    return triton_aot.parse_archs(value)


@pytest.mark.parametrize("version", TRT_VERSIONS)
def test_library_embeds_a_cubin_per_architecture(version):
    build = BUILD_DIR / f"trt-{version}"
    library = build / "libtrt_plugin_kit.so"
    if not library.is_file():
        pytest.fail(f"{library} is missing: build it with `make plugins`", pytrace=False)
    assert TRITON_FOLDERS, "no plugin folder with a kernel.py (SwiGLU has one)"
    archs = configured_archs(build)
    want_elf = sorted(f"sm_{a.number}{'a' if a.number >= 90 else ''}" for a in archs if a.cubin)
    newest_ptx = max((a.number for a in archs if a.ptx), default=None)
    binary = library.read_bytes()
    for folder in TRITON_FOLDERS:
        work = build / "triton" / f"{folder}_triton"
        manifest = json.loads((work / "manifest.json").read_text())
        assert [v["name"] for v in manifest["variants"]] == list(
            triton_aot.load_variants(PLUGINS_DIR / folder / "kernel.py")
        )
        for variant in manifest["variants"]:
            fatbin = work / variant["fatbin"]
            listing = subprocess.run(
                [cuobjdump(), "--list-elf", "--list-ptx", str(fatbin)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            elf = sorted(re.findall(r"\.(sm_\d+a?)\.cubin", listing))
            ptx = re.findall(r"\.(sm_\d+a?)\.ptx", listing)
            assert elf == want_elf, f"{fatbin}: cubins {elf}, configured {want_elf}"
            assert ptx == ([f"sm_{newest_ptx}"] if newest_ptx else []), f"{fatbin}: PTX {ptx}"
            assert fatbin.read_bytes() in binary, f"{fatbin.name} is not embedded in {library}"


@pytest.mark.parametrize("version", TRT_VERSIONS)
def test_harness_cpu_checks_cover_swiglu(version):
    build = BUILD_DIR / f"trt-{version}"
    harness, library = build / "plugin_harness", build / "libtrt_plugin_kit.so"
    if not harness.is_file():
        pytest.fail(f"{harness} is missing: build it with `make plugins`", pytrace=False)
    result = subprocess.run(
        [str(harness), "--library", str(library), "--cpu-only", "--filter", "SwiGLU"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(r"harness: \d+ passed, 0 failed", result.stdout)
    for check in (
        "getFieldNames SwiGLUSplit matches its spec",
        "SwiGLUSplit reports odd last axis",
        "SwiGLUSplit reports rank 0",
    ):
        assert check in result.stdout, result.stdout[-3000:]


# ------------------------------------------------------------------------------------- the AOT compiler


def test_archs_follow_cmake_semantics():
    archs = triton_aot.parse_archs("75-real;90-real,120")
    assert [(a.number, a.cubin, a.ptx) for a in archs] == [
        (75, True, False),
        (90, True, False),
        (120, True, True),
    ]
    assert [(a.number, a.cubin, a.ptx) for a in triton_aot.parse_archs("90-virtual")] == [(90, False, True)]
    with pytest.raises(triton_aot.AotError, match="native"):
        triton_aot.parse_archs("native")


def test_ptx_for_later_gpus_drops_the_arch_specific_suffix():
    assert triton_aot.portable_ptx(".version 8.7\n.target sm_120a\n", 120) == ".version 8.7\n.target sm_120\n"


def _kernel(tmp_path: Path, variants: str) -> Path:
    folder = tmp_path / "demo"
    folder.mkdir()
    path = folder / "kernel.py"
    path.write_text(
        textwrap.dedent(
            """
            import triton
            import triton.language as tl

            @triton.jit
            def copy(x, y, n, BLOCK: tl.constexpr):
                i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(y + i, tl.load(x + i, mask=i < n), mask=i < n)
            """
        )
        + variants
    )
    return path


@pytest.mark.parametrize(
    ("variants", "message"),
    [
        ("VARIANTS = []", "non-empty dict"),
        ('VARIANTS = {"a": {"kernel": copy}}', "needs 'signature'"),
        ('VARIANTS = {"a": {"kernel": len, "signature": {}}}', "not a @triton.jit function"),
        ('VARIANTS = {"a": {"kernel": copy, "signature": {"x": "*fp32", "y": "*fp32", "n": "i32"}}}',
         r"\['BLOCK'\] of copy have no type"),
        ('VARIANTS = {"a": {"kernel": copy, "signature": {"x": "*fp32", "y": "*fp32", "n": "f16"}, '
         '"constants": {"BLOCK": 64}}}', "argument 'n' has type 'f16'"),
        ('VARIANTS = {"a": {"kernel": copy, "signature": {"x": "*fp32", "y": "*fp32", "n": "i32"}, '
         '"constants": {"BLOCK": 64}, "grid": 3}}', "unknown keys"),
    ],
)  # fmt: skip
def test_bad_variants_are_refused_naming_the_problem(tmp_path, variants, message):
    with pytest.raises(triton_aot.AotError, match=message):
        triton_aot.load_variants(_kernel(tmp_path, variants))


def test_compiles_without_a_gpu_into_a_registering_source(tmp_path):
    fatbinary = shutil.which("fatbinary") or "/usr/local/cuda/bin/fatbinary"
    if not Path(fatbinary).is_file():
        pytest.skip("needs the CUDA toolkit's fatbinary (the CI machine has it)")
    kernel = _kernel(
        tmp_path,
        'VARIANTS = {"f32": {"kernel": copy, "signature": {"x": "*fp32", "y": "*fp32", "n": "i32"}, '
        '"constants": {"BLOCK": 256}, "num_warps": 2}}',
    )
    out = tmp_path / "gen" / "demo_triton.cpp"
    result = subprocess.run(
        [sys.executable, "-m", "trt_plugin_kit.triton_aot", "build", "--kernel", str(kernel), "--archs",
         "80-real;90", "--fatbinary", fatbinary, "--out", str(out)],
        capture_output=True, text=True, cwd=REPO_ROOT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "demo/f32: copy, 2 warps" in result.stdout and "sm_80 sm_90a compute_90" in result.stdout
    source = out.read_text()
    assert 'TritonKernelImage const kImage0{"demo", "f32", "copy",' in source
    assert (
        '{"x", TritonParamType::kPointer}, {"y", TritonParamType::kPointer}, {"n", TritonParamType::kI32}'
        in source
    )
    assert '{"BLOCK", 256}' in source and ".incbin" in source


def test_the_source_changes_with_the_bytes_of_an_embedded_fatbin(tmp_path):
    """ccache keys an object on its source and #includes, not on the files `.incbin` reads: after a kernel.py
    edit that kept the variants' names, parameters and sizes, the same source would get the object with the
    old kernel back. The source names each fatbin's digest, so new bytes are a new source."""
    variant = {"name": "f32", "fatbin": "f32.fatbin", "symbol": "copy", "params": [["x", "*fp32"]],
               "constants": {"BLOCK": 256}, "cubins": ["sm_75"], "ptx": "compute_75", "num_warps": 2,
               "shared": 0}  # fmt: skip
    manifest = {"folder": "demo", "variants": [variant]}
    sources = []
    for image in (b"first kernel", b"edited kernel", b"first kernel"):
        (tmp_path / "f32.fatbin").write_bytes(image)
        sources.append(triton_aot.render_cpp(manifest, tmp_path))
    assert sources[0] != sources[1]
    assert sources[0] == sources[2]  # the same bytes, the same source
