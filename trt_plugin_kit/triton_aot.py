"""Ahead-of-time compilation of a plugin folder's OpenAI Triton kernels (``plugins/<name>/kernel.py``).

The CMake build runs ``python -m trt_plugin_kit.triton_aot build`` for every plugin folder with a
``kernel.py``: each variant the file declares is compiled with ``triton.compile`` for an explicit
``GPUTarget`` per configured architecture (no GPU, no driver), the cubins and one PTX (the newest
architecture's, for GPUs that come later) are packed into one fatbin per variant by the CUDA toolkit's
``fatbinary``, and a C++ source embedding the fatbins is written. The library loads them with CUDA's library
API (``plugins/common/triton_kernel.h``); nothing of Python or Triton is needed at run time.

``kernel.py`` holds ``@triton.jit`` kernels and ``VARIANTS``, what the C++ side cannot infer from them::

    VARIANTS = {
        "fp32": {                                   # the name the plugin's C++ asks for
            "kernel": swiglu_kernel,                # a @triton.jit function of this file
            "signature": {"x": "*fp32", "y": "*fp32", "rows": "i32", "half": "i32"},   # run-time arguments
            "constants": {"BLOCK_C": 1024},         # every tl.constexpr argument's value
            "divisible_by_16": ["x", "y", "half"],  # optional: what the C++ side promises when it picks it
            "num_warps": 4,                         # optional (default 4); num_stages likewise (default 3)
        },
    }

The launch grid and the choice of variant are the plugin's C++ (it knows the shapes); the constants are
readable there by name (``TritonKernel::constant``).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Triton argument types a plugin may pass, and their C++ parameter kind (triton_kernel.h's TritonParamType).
SCALAR_TYPES = {"i32": "kI32", "u32": "kU32", "i64": "kI64", "u64": "kU64", "fp32": "kF32"}
POINTER_TYPES = {"fp32", "fp16", "bf16", "fp64", "i8", "u8", "i16", "i32", "i64", "u32", "u64", "i1"}
VARIANT_KEYS = {"kernel", "signature", "constants", "divisible_by_16", "num_warps", "num_stages"}
# Triton 3.6 kernels take two pointers after the user's arguments (global and profile scratch); the library
# passes null for both and refuses, here, any kernel that would need either buffer.
SCRATCH_PARAMS = 2
KERNEL_FILE = "kernel.py"


class AotError(RuntimeError):
    """A kernel.py the build cannot compile, with the reason (the CMake build prints it and stops)."""


@dataclass(frozen=True)
class Arch:
    """One entry of CMAKE_CUDA_ARCHITECTURES: ``90-real`` (cubin), ``90-virtual`` (PTX), ``90`` (both)."""

    number: int
    cubin: bool
    ptx: bool


def parse_archs(text: str) -> list[Arch]:
    archs = []
    for entry in filter(None, re.split(r"[;,\s]+", text)):
        match = re.fullmatch(r"(\d+)[a-z]?(-real|-virtual)?", entry)
        if not match:
            raise AotError(
                f"CUDA architecture {entry!r}: the Triton kernels need numbers (e.g. 90-real;120), "
                "not 'native' or 'all': pass -DCMAKE_CUDA_ARCHITECTURES=..."
            )
        number, kind = int(match.group(1)), match.group(2)
        archs.append(Arch(number, cubin=kind != "-virtual", ptx=kind != "-real"))
    if not archs:
        raise AotError("no CUDA architecture given")
    return archs


def load_variants(kernel_file: Path) -> dict:
    """Imports kernel.py (as a file: plugin folders are not packages) and checks its VARIANTS."""
    spec = importlib.util.spec_from_file_location(
        f"trt_plugin_kit_kernels_{kernel_file.parent.name}", kernel_file
    )
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as error:
        raise AotError(f"{kernel_file}: {error} (the Triton kernels need `pip install triton`)") from error
    variants = getattr(module, "VARIANTS", None)
    where = f"{kernel_file}: VARIANTS"
    if not isinstance(variants, dict) or not variants:
        raise AotError(f"{where} must be a non-empty dict: variant name -> its description")
    for name, variant in variants.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise AotError(f"{where}: variant name {name!r} must be an identifier")
        if not isinstance(variant, dict):
            raise AotError(f"{where}[{name!r}] must be a dict")
        unknown = set(variant) - VARIANT_KEYS
        if unknown:
            raise AotError(
                f"{where}[{name!r}]: unknown keys {sorted(unknown)} (known: {sorted(VARIANT_KEYS)})"
            )
        for key in ("kernel", "signature"):
            if key not in variant:
                raise AotError(f"{where}[{name!r}] needs {key!r}")
        _check_variant(where, name, variant)
    return variants


def _check_variant(where: str, name: str, variant: dict) -> None:
    fn = variant["kernel"]
    arg_names = getattr(fn, "arg_names", None)
    if arg_names is None:
        raise AotError(f"{where}[{name!r}]['kernel'] is not a @triton.jit function")
    signature, constants = variant["signature"], variant.get("constants", {})
    for arg, kind in signature.items():
        if arg not in arg_names:
            raise AotError(f"{where}[{name!r}]: {arg!r} is not an argument of {fn.__name__}")
        if not (kind in SCALAR_TYPES or (kind.startswith("*") and kind[1:] in POINTER_TYPES)):
            raise AotError(
                f"{where}[{name!r}]: argument {arg!r} has type {kind!r}; supported: pointers "
                f"(*{', *'.join(sorted(POINTER_TYPES))}) and {', '.join(SCALAR_TYPES)}"
            )
    for arg in constants:
        if arg not in arg_names:
            raise AotError(f"{where}[{name!r}]: constant {arg!r} is not an argument of {fn.__name__}")
        if not isinstance(constants[arg], (int, float, bool)):
            raise AotError(f"{where}[{name!r}]: constant {arg!r} must be a number")
    missing = [a for a in arg_names if a not in signature and a not in constants]
    if missing:
        raise AotError(
            f"{where}[{name!r}]: arguments {missing} of {fn.__name__} have no type or constant value"
        )
    both = set(signature) & set(constants)
    if both:
        raise AotError(f"{where}[{name!r}]: {sorted(both)} both in signature and constants")
    for arg in variant.get("divisible_by_16", []):
        if arg not in signature:
            raise AotError(f"{where}[{name!r}]: divisible_by_16 names {arg!r}, not a run-time argument")


def _compile(variant: dict, capability: int):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = variant["kernel"]
    constants = variant.get("constants", {})
    # Arguments in the kernel's order: the run-time ones typed, the constexpr ones marked as such.
    signature = {
        a: variant["signature"][a] if a in variant["signature"] else "constexpr" for a in fn.arg_names
    }
    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in variant.get("divisible_by_16", [])}
    source = ASTSource(fn, signature=signature, constexprs=dict(constants), attrs=attrs)
    options = {"num_warps": variant.get("num_warps", 4), "num_stages": variant.get("num_stages", 3)}
    return triton.compile(source, target=GPUTarget("cuda", capability, 32), options=options)


def _check_compiled(where: str, compiled, run_time_args: int) -> None:
    md = compiled.metadata
    problems = []
    if getattr(md, "global_scratch_size", 0):
        problems.append(f"a global scratch buffer of {md.global_scratch_size} bytes")
    if getattr(md, "profile_scratch_size", 0):
        problems.append(f"a profile scratch buffer of {md.profile_scratch_size} bytes")
    if getattr(md, "tensordesc_meta", None):
        problems.append("host-side tensor descriptors (TMA)")
    if getattr(md, "num_ctas", 1) != 1:
        problems.append(f"clusters of {md.num_ctas} CTAs")
    if getattr(md, "launch_cooperative_grid", False) or getattr(md, "launch_pdl", False):
        problems.append("a cooperative or programmatic-dependent launch")
    if problems:
        raise AotError(f"{where} needs {', '.join(problems)}: the plugin launcher passes none of these")
    entry = re.search(r"\.visible \.entry \w+\(([^)]*)\)", compiled.asm["ptx"], re.S)
    params = len(re.findall(r"\.param\s", entry.group(1))) if entry else -1
    if params != run_time_args + SCRATCH_PARAMS:
        raise AotError(
            f"{where}: the compiled kernel takes {params} parameters, the launcher passes {run_time_args} "
            f"arguments + {SCRATCH_PARAMS} null scratch pointers (a Triton release with another convention?)"
        )


def portable_ptx(ptx: str, capability: int) -> str:
    """Triton targets ``sm_90a``-style PTX from Hopper on; the PTX kept for newer GPUs must target the plain
    ``sm_NN``, which the driver can JIT for any later GPU (checked with ptxas by the caller)."""
    return re.sub(rf"^\.target sm_{capability}a\b", f".target sm_{capability}", ptx, flags=re.M)


def _ptxas(capability: int) -> str:
    from triton.backends.nvidia.compiler import get_ptxas

    return get_ptxas(capability).path


def _cubin_sm(capability: int) -> str:
    return f"{capability}a" if capability >= 90 else str(capability)


def compile_folder(kernel_file: Path, archs: list[Arch], fatbinary: str, work_dir: Path) -> dict:
    """Compiles every variant for every architecture into work_dir/<variant>.fatbin; returns the manifest."""
    variants = load_variants(kernel_file)
    work_dir.mkdir(parents=True, exist_ok=True)
    ptx_arch = max((a.number for a in archs if a.ptx), default=None)
    manifest = {"folder": kernel_file.parent.name, "variants": []}
    for name, variant in variants.items():
        where = f"{kernel_file} variant {name!r}"
        images, compiled_meta, shared = [], None, 0
        for number in sorted({a.number for a in archs if a.cubin or a.ptx}):
            try:
                compiled = _compile(variant, number)
            except Exception as error:  # Triton's compile errors are many types; say which variant and arch
                raise AotError(f"{where}, sm_{number}: {type(error).__name__}: {error}") from error
            _check_compiled(f"{where}, sm_{number}", compiled, len(variant["signature"]))
            shared = max(shared, compiled.metadata.shared)  # the largest any architecture needs
            if any(a.number == number and a.cubin for a in archs):
                path = work_dir / f"{name}.sm_{number}.cubin"
                path.write_bytes(compiled.asm["cubin"])
                images.append(f"--image3=kind=elf,sm={_cubin_sm(number)},file={path}")
            if number == ptx_arch:
                path = work_dir / f"{name}.compute_{number}.ptx"
                ptx = portable_ptx(compiled.asm["ptx"], number)
                path.write_text(ptx)
                # Below Hopper the PTX is Triton's own, which its ptxas has just assembled for sm_<number>:
                # checking it again would only repeat that (a third of a variant's compile time).
                check = (
                    subprocess.run(
                        [_ptxas(number), f"--gpu-name=sm_{number}", str(path), "-o", os.devnull],
                        capture_output=True,
                        text=True,
                    )
                    if ptx != compiled.asm["ptx"]
                    else None
                )
                if check is not None and check.returncode != 0:
                    raise AotError(
                        f"{where}: its PTX uses sm_{number}a-only instructions, so no PTX for later GPUs can "
                        f"be kept; build for -real architectures only. ptxas: {check.stderr.strip()[:500]}"
                    )
                images.append(f"--image3=kind=ptx,sm={number},file={path}")
            if compiled_meta is None or number == max(a.number for a in archs):
                compiled_meta = compiled.metadata
        fatbin = work_dir / f"{name}.fatbin"
        result = subprocess.run(
            [fatbinary, "-64", f"--create={fatbin}", *images], capture_output=True, text=True
        )
        if result.returncode != 0:
            raise AotError(f"{where}: fatbinary failed: {result.stderr.strip()[:800]}")
        manifest["variants"].append(
            {
                "name": name,
                "symbol": compiled_meta.name,
                "num_warps": compiled_meta.num_warps,
                "shared": shared,
                "params": [[arg, kind] for arg, kind in variant["signature"].items()],
                "constants": dict(variant.get("constants", {})),
                "divisible_by_16": list(variant.get("divisible_by_16", [])),
                "cubins": [f"sm_{_cubin_sm(a.number)}" for a in archs if a.cubin],
                "ptx": f"compute_{ptx_arch}" if ptx_arch else None,
                "fatbin": fatbin.name,
            }
        )
    return manifest


def _param_kind(kind: str) -> str:
    return "kPointer" if kind.startswith("*") else SCALAR_TYPES[kind]


def render_cpp(manifest: dict, work_dir: Path) -> str:
    """The C++ source: each fatbin embedded with the assembler's .incbin (a few lines instead of megabytes of
    array literal) and registered for TritonKernel."""
    folder = manifest["folder"]
    out = [
        f"// Generated by `python -m trt_plugin_kit.triton_aot build` from plugins/{folder}/{KERNEL_FILE}:",
        "// do not edit. Each variant's fatbin (cubins + PTX) is embedded and registered for TritonKernel.",
        '#include "common/triton_kernel.h"',
        "",
    ]
    for n, v in enumerate(manifest["variants"]):
        symbol = f"trt_plugin_kit_triton_{folder}_{n}"
        path = (work_dir / v["fatbin"]).resolve()
        # The digest makes this text change with the fatbin's bytes: ccache keys an object on the source and
        # its #includes, not on what .incbin reads: without it, an edit of kernel.py that left names and
        # sizes as they were would get the old kernel's object back.
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        out += [
            f"// {v['name']}: {v['fatbin']}, sha256 {digest}",
            '__asm__(".pushsection .rodata\\n.balign 16\\n"',
            f'        ".globl {symbol}\\n.hidden {symbol}\\n{symbol}:\\n"',
            f'        ".incbin \\"{path}\\"\\n.globl {symbol}_end\\n.hidden {symbol}_end\\n{symbol}_end:\\n'
            '.popsection\\n");',
            f'extern "C" unsigned char const {symbol}[];',
            f'extern "C" unsigned char const {symbol}_end[];',
        ]
    out += ["", "namespace trt_plugin_kit", "{", "namespace", "{"]
    for n, v in enumerate(manifest["variants"]):
        symbol = f"trt_plugin_kit_triton_{folder}_{n}"
        params = ", ".join(f'{{"{arg}", TritonParamType::{_param_kind(kind)}}}' for arg, kind in v["params"])
        constants = ", ".join(f'{{"{k}", {int(value)}}}' for k, value in v["constants"].items())
        archs = " ".join(v["cubins"] + ([v["ptx"]] if v["ptx"] else []))
        out += [
            f"TritonParam const kParams{n}[] = {{{params}}};",
            f"TritonConstant const kConstants{n}[] = {{{constants or '{nullptr, 0}'}}};",
            f'TritonKernelImage const kImage{n}{{"{folder}", "{v["name"]}", "{v["symbol"]}",',
            f"    {v['num_warps']}, "
            f"{v['shared']}, kParams{n}, {len(v['params'])}, kConstants{n}, {len(v['constants'])}, {symbol},",
            f'    static_cast<size_t>({symbol}_end - {symbol}), "{archs}"}};',
            f"TritonKernelRegistration const kRegistration{n}(kImage{n});",
        ]
    out += ["}  // namespace", "}  // namespace trt_plugin_kit", ""]
    return "\n".join(out)


def build(kernel_file: Path, archs: str, fatbinary: str, out: Path, work_dir: Path | None = None) -> dict:
    kernel_file = kernel_file.resolve()
    work_dir = work_dir or out.parent / f"{kernel_file.parent.name}_triton"
    if shutil.which(fatbinary) is None:
        raise AotError(f"fatbinary not found at {fatbinary!r} (it comes with the CUDA toolkit, beside nvcc)")
    # Triton's own cache, content-addressed (the kernel's source and what it calls, the signature, constants
    # and options, the target architecture, Triton's version and its compiler's sources, ptxas's version): the
    # Makefile points every build at one (build/triton-cache), so that each variant is compiled once for both
    # header sets and the copies tests build. Alone, a build keeps its own beside its fatbins.
    os.environ.setdefault("TRITON_CACHE_DIR", str(work_dir / "cache"))
    manifest = compile_folder(kernel_file, parse_archs(archs), fatbinary, work_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = render_cpp(manifest, work_dir)
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False, suffix=".tmp") as tmp:
        tmp.write(text)
    os.replace(tmp.name, out)  # make never sees a half-written source
    (work_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trt_plugin_kit.triton_aot",
        description="Compile a plugin folder's Triton kernels (kernel.py) ahead of time into an embeddable "
        "C++ source (what plugins/CMakeLists.txt runs).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="kernel.py -> fatbins (cubin per architecture + PTX) -> C++ source")
    b.add_argument("--kernel", type=Path, required=True, help="plugins/<name>/kernel.py")
    b.add_argument("--archs", required=True, help="CMAKE_CUDA_ARCHITECTURES, e.g. '75-real;90-real;120'")
    b.add_argument("--fatbinary", default="fatbinary", help="the CUDA toolkit's fatbinary")
    b.add_argument("--out", type=Path, required=True, help="the C++ source to write")
    b.add_argument("--work-dir", type=Path, help="cubins, PTX, fatbins, manifest.json (default beside --out)")
    args = parser.parse_args(argv)
    try:
        manifest = build(args.kernel, args.archs, args.fatbinary, args.out, args.work_dir)
    except AotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for v in manifest["variants"]:
        images = " ".join(v["cubins"] + ([v["ptx"]] if v["ptx"] else []))
        print(
            f"{manifest['folder']}/{v['name']}: {v['symbol']}, {v['num_warps']} warps, "
            f"{v['shared']} B shared, {images}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
