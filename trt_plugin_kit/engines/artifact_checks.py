"""The checks between the image that builds the plugin library and engines and the image that serves them.

Engines and the plugin library load only under the TensorRT they were built with, so nothing here trusts a
pinned version: each container reads the TensorRT it really has, the whole version (major.minor.patch.build,
as ``tensorrt.__version__`` spells it), from the libnvinfer its dynamic loader finds.

    python3 -m trt_plugin_kit.engines.artifact_checks version
        the TensorRT of this container (the compose `builder` and `triton` services, gpu-host-check)
    python3 -m trt_plugin_kit.engines.artifact_checks library LIB [--creators] [--tensorrt-rtx]
        LIB links this container's libnvinfer and every dependency resolves; with --creators it is loaded
        as build_engines.py loads it and every plugin of plugins/*/spec.yaml must have registered itself
    python3 -m trt_plugin_kit.engines.artifact_checks serving --artifacts-dir DIR --library LIB
        the `triton` service's entrypoint: DIR/TENSORRT_VERSION (written by the builder) equals this
        container's TensorRT, and LIB's links resolve here too

Standard library only (``--creators`` excepted): it runs in the tritonserver image's Python as it is.
Exit codes: 0 checked, 1 a check failed, 2 bad arguments, 3 no TensorRT here.
"""

from __future__ import annotations

import argparse
import ctypes
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from trt_plugin_kit.engines.errors import CheckFailed
from trt_plugin_kit.engines.library_version import parse_version

TENSORRT_RUNTIME_SONAMES = ("libnvinfer.so.11", "libnvinfer.so.10")
VERSION_STAMP = "TENSORRT_VERSION"  # in the artifacts folder: the builder's TensorRT, written last
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_TENSORRT = 0, 1, 2, 3


# ---------------------------------------------------------------------------------------------- versions


def runtime_version(sonames: Sequence[str] = TENSORRT_RUNTIME_SONAMES) -> tuple[str, str] | None:
    """(soname, full version) of the first TensorRT runtime the dynamic loader finds, or None.

    getInferLib{Major,Minor,Patch,Build}Version exist since TensorRT 10; getInferLibVersion's
    major*10000+minor*100+patch has no build number."""
    for soname in sonames:
        try:
            library = ctypes.CDLL(soname)
        except OSError:
            continue
        parts = [
            getattr(library, f"getInferLib{part}Version", None)
            for part in ("Major", "Minor", "Patch", "Build")
        ]
        if all(parts):
            return soname, ".".join(str(function()) for function in parts)
        encoded = library.getInferLibVersion()
        return soname, f"{encoded // 10000}.{encoded // 100 % 100}.{encoded % 100}"
    return None


def compare_versions(built: str, serving: str) -> str | None:
    """None when the engines' TensorRT is the serving TensorRT, both read in full; else why not.

    A side known only to major.minor.patch (no build number) cannot prove the match: that is a mismatch."""
    built_parts, serving_parts = parse_version(built), parse_version(serving)
    if built_parts == serving_parts and len(built_parts) >= 4:
        return None
    if built_parts == serving_parts:
        return f"TensorRT {built} on both sides, but without a build number the match is not certain"
    return (
        f"the engines and the plugin library were built with TensorRT {built}, this container serves with "
        f"TensorRT {serving}: use one NGC release for both images (x-ngc-release in docker-compose.yml) "
        "and run the builder again"
    )


# ------------------------------------------------------------------------------------------------ links


def ldd_libraries(ldd_output: str) -> dict[str, str | None]:
    """What ``ldd`` says a library loads: {soname: path, or None where '=> not found'}.

    ldd lists the whole tree, not only the library's own DT_NEEDED entries; that is what matters here: the
    dynamic loader resolves the library's getPluginRegistry in that tree."""
    libraries: dict[str, str | None] = {}
    for name, target in re.findall(r"^\s*(\S+) => (.+?)(?: \(0x[0-9a-f]+\))?\s*$", ldd_output, re.MULTILINE):
        libraries[name] = None if target == "not found" else target
    return libraries


def link_problems(library: Path, linked: dict[str, str | None], runtime_soname: str) -> list[str]:
    """What stops ``library`` from registering its plugins with the TensorRT whose library is runtime_soname.

    Without libnvinfer among what it loads, the library's getPluginRegistry reference stays null when
    Triton's TensorRT backend dlopen()s it (RTLD_LOCAL): it loads, and registers nothing."""
    problems = []
    if runtime_soname not in linked:
        others = [name for name in linked if name.startswith("libnvinfer.so")]
        found = f"it links {', '.join(others)}" if others else "it links no libnvinfer"
        problems.append(
            f"{library} does not link {runtime_soname}, the TensorRT of this container ({found}): build it "
            "against this container's TensorRT (CMake links libnvinfer where it finds it)"
        )
    missing = [name for name, path in linked.items() if path is None]
    if missing:
        problems.append(f"{library}: the dynamic loader cannot find {', '.join(missing)} in this container")
    return problems


def check_links(library: Path, runtime_soname: str) -> str:
    """One line saying what was checked; CheckFailed listing every problem."""
    if not library.is_file():
        raise CheckFailed(f"{library} does not exist")
    if shutil.which("ldd") is None:
        raise CheckFailed("ldd is not installed in this container; it checks the library's links")
    result = subprocess.run(["ldd", str(library)], capture_output=True, text=True, timeout=60, check=False)
    linked = ldd_libraries(result.stdout)
    if result.returncode != 0 or not linked:
        raise CheckFailed(f"ldd {library} failed: {(result.stderr or result.stdout).strip()}")
    problems = link_problems(library, linked, runtime_soname)
    if problems:
        raise CheckFailed("; ".join(problems))
    return (
        f"{library}: links {runtime_soname} ({linked[runtime_soname]}), all {len(linked)} libraries resolve"
    )


# ------------------------------------------------------------------------------------------------ creators


def check_creators(library: Path, rtx: bool) -> str:
    """Loads ``library`` as build_engines.py does; every plugin of the specs must be registered by it."""
    from trt_plugin_kit.engines import tensorrt_api
    from trt_plugin_kit.engines.builder import load_plugins
    from trt_plugin_kit.engines.errors import BuildFailure
    from trt_plugin_kit.engines.plugin_config import PluginLibrary
    from trt_plugin_kit.interface import PLUGIN_NAMESPACE, PLUGIN_VERSION
    from trt_plugin_kit.specs.spec import all_specs

    api = tensorrt_api.load(rtx)
    expected = sorted(all_specs())
    try:
        (loaded,) = load_plugins(api, [PluginLibrary(library)], expected)
    except BuildFailure as error:
        raise CheckFailed(str(error)) from None
    ours = sorted(name for name, version, namespace in loaded.creators
                  if (version, namespace) == (PLUGIN_VERSION, PLUGIN_NAMESPACE))  # fmt: skip
    if ours != expected:
        raise CheckFailed(f"{library} registered {ours}, the specs (plugins/*/spec.yaml) name {expected}")
    return (
        f"{library}: {len(ours)} creators {loaded.how} in {api.name} {api.version}'s registry: "
        f"{', '.join(ours)} (version {PLUGIN_VERSION}, namespace {PLUGIN_NAMESPACE})"
    )


# --------------------------------------------------------------------------------------------- commands


def this_tensorrt() -> tuple[str, str]:
    found = runtime_version()
    if found is None:
        raise LookupError(f"no TensorRT runtime here ({' / '.join(TENSORRT_RUNTIME_SONAMES)} not loadable)")
    return found


def command_library(args: argparse.Namespace) -> list[str]:
    lines = []
    if args.tensorrt_rtx:
        lines.append(f"{args.library}: links not checked (TensorRT-RTX: the library never links it)")
    else:
        soname, version = this_tensorrt()
        lines.append(check_links(args.library, soname) + f" (TensorRT {version})")
    if args.creators:
        lines.append(check_creators(args.library, args.tensorrt_rtx))
    return lines


def command_serving(args: argparse.Namespace) -> list[str]:
    soname, version = this_tensorrt()
    stamp = args.artifacts_dir / VERSION_STAMP
    if not stamp.is_file():
        raise CheckFailed(f"{stamp} is missing: the builder has not completed (it writes it last)")
    built = stamp.read_text().strip()
    mismatch = compare_versions(built, version)
    if mismatch:
        raise CheckFailed(mismatch)
    return [f"TensorRT {version}: the artifacts were built with it", check_links(args.library, soname)]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python3 -m trt_plugin_kit.engines.artifact_checks",
        description="The TensorRT of this container, and the plugin library and engines against it.",
        epilog="Exit codes: 0 checked, 1 a check failed, 2 bad arguments, 3 no TensorRT here.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("version", help="print this container's TensorRT version in full")
    library = commands.add_parser("library", help="the plugin library's links (and creators) here")
    library.add_argument("library", type=Path)
    library.add_argument(
        "--creators", action="store_true", help="load it; every spec's creator must register"
    )
    library.add_argument("--tensorrt-rtx", action="store_true", help="creators through TensorRT-RTX (tests)")
    serving = commands.add_parser("serving", help="the triton service's start: stamp and links")
    serving.add_argument("--artifacts-dir", type=Path, required=True)
    serving.add_argument("--library", type=Path, required=True)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.command == "version":
            print(this_tensorrt()[1])
            return EXIT_OK
        for line in command_library(args) if args.command == "library" else command_serving(args):
            print(f"ok: {line}")
    except LookupError as error:
        print(f"artifact_checks: {error}", file=sys.stderr)
        return EXIT_NO_TENSORRT
    except CheckFailed as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
