"""``build_engines.py``: arguments, the build loop and the exit codes (see that file for examples)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from trt_plugin_kit.engines import tensorrt_api
from trt_plugin_kit.engines.builder import (
    atomic_write,
    build_engine,
    engine_io_specs,
    load_plugins,
    timing_cache_name,
)
from trt_plugin_kit.engines.consistency import check_io_against_config, check_profile_covers_config
from trt_plugin_kit.engines.cuda_runtime import CudaRuntime
from trt_plugin_kit.engines.errors import (
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_USAGE,
    BuildFailure,
    EnvironmentMissing,
    UsageError,
)
from trt_plugin_kit.engines.jobs import describe, make_build_jobs
from trt_plugin_kit.engines.plugin_config import (
    PluginLibrary,
    collect_plugin_libraries,
    default_plugin_library,
)
from trt_plugin_kit.engines.precision import parse_trt_major
from trt_plugin_kit.engines.verify import verify
from trt_plugin_kit.interface import (
    BUILD_DIR,
    FLAVOURS,
    MNIST,
    MODEL_REPOSITORY,
    ONNX_DIR,
    PLUGIN_LIBRARY_NAME,
    PRECISIONS,
    SAMPLES_DIR,
)
from trt_plugin_kit.interface import TENSORRT_MODELS as MODELS
from trt_plugin_kit.models import export
from trt_plugin_kit.tritonserver import options as cli_options

DEFAULT_ENGINE_DIR = BUILD_DIR / "engines"  # native-flavour engines (compared with, never served)
DEFAULT_DRY_RUN_VERSION = "10.13.3"

ENVIRONMENT_HELP = (
    "build_engines.py needs NVIDIA TensorRT >= 10 (its Python package `tensorrt`), the CUDA runtime and an "
    "NVIDIA GPU. Run it in NVIDIA's TensorRT container on a GPU host, for example\n"
    '    docker run --rm --gpus all -v "$PWD":/workspace -w /workspace nvcr.io/nvidia/tensorrt:26.09-py3 \\\n'
    '        bash -c \'pip install onnx tqdm pillow "tritonclient[grpc]" && python3 build_engines.py '
    "--plugin-library <lib>'\n"
    "or let `docker compose up --build` do it (the builder service compiles the plugins and builds the "
    "engines). `python3 build_engines.py --dry-run` shows the build jobs and runs the checks without "
    "TensorRT."
)


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def dim_range(text: str) -> tuple[int, int, int]:
    try:
        low, opt, high = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"MIN:OPT:MAX, three integers, got {text!r}") from None
    if not 1 <= low <= opt <= high:
        raise argparse.ArgumentTypeError(f"need 1 <= MIN <= OPT <= MAX, got {text!r}")
    return low, opt, high


def add_timing_cache_arguments(parser: argparse.ArgumentParser) -> None:
    """One cache per TensorRT version and GPU model: the tactics TensorRT timed on that GPU (issue 42)."""
    parser.add_argument(
        "--timing-cache",
        type=Path,
        help="timing cache file (default: in --timing-cache-dir, named after TensorRT and the GPU)",
    )
    parser.add_argument(
        "--timing-cache-dir",
        type=Path,
        default=BUILD_DIR,
        help="where the timing caches are kept, one per TensorRT version and GPU model: "
        "timing_cache_trt<version>_<GPU>.bin (default build/)",
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="build_engines.py",
        description="Build the TensorRT engines of the Triton models with the trt_plugin_kit plugins.",
        epilog="Exit codes: 0 ok, 1 build/check/verify failed, 2 bad input, 3 TensorRT/GPU missing.",
    )
    parser.add_argument(
        "--model",
        default="all",
        help=f"model to build: {', '.join(MODELS)}, all (both; the default) or the folder name of any model "
        "of --model-repository holding a TensorRT config.pbtxt and its plugin-flavour ONNX, model.onnx "
        "(new-plugin writes such a folder)",
    )
    parser.add_argument(
        "--flavour",
        choices=[*FLAVOURS, "both"],
        default=None,
        help="plugin: custom layers as our plugins, written to the model repository (default); native: "
        "standard TensorRT layers only, written to --engine-dir for comparison (the default and the only "
        "choice with --tensorrt-rtx); both",
    )
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32")
    parser.add_argument(
        "--plugin-library",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help=f"plugin library to load (repeatable); default build/trt-<version>/{PLUGIN_LIBRARY_NAME}",
    )
    parser.add_argument(
        "--plugin-config",
        type=Path,
        metavar="FILE",
        help="JSON or YAML file listing plugin libraries: {plugins: [paths]} or DriveWorks style "
        "{path: [layer names]}; relative paths are relative to the file",
    )
    parser.add_argument("--model-repository", type=Path, default=MODEL_REPOSITORY)
    parser.add_argument("--onnx-dir", type=Path, default=ONNX_DIR, help="where <model>_<flavour>.onnx are")
    parser.add_argument("--int8-scales", type=Path, default=export.INT8_SCALES_PATH)
    parser.add_argument(
        "--engine-dir",
        type=Path,
        help=f"native-flavour engines (default {DEFAULT_ENGINE_DIR}, with --tensorrt-rtx its tensorrt_rtx/)",
    )
    add_timing_cache_arguments(parser)
    parser.add_argument("--workspace-mib", type=positive_int, default=1024, help="builder workspace limit")
    parser.add_argument(
        "--opt-batch", type=positive_int, help="batch size to optimize for (default max_batch_size)"
    )
    parser.add_argument(
        "--dim-range",
        type=dim_range,
        metavar="MIN:OPT:MAX",
        help="optimization profile range of the dynamic (-1) non-batch dims of a model of yours",
    )
    parser.add_argument(
        "--strongly-typed",
        action="store_true",
        help="TensorRT 10: build FP16 strongly typed from the FP16 graph (as on TensorRT 11), not by flag",
    )
    parser.add_argument(
        "--network-api",
        action="store_true",
        help="l2norm: define the network with TensorRT's Python API (registry -> create_plugin -> "
        "add_plugin_v3) instead of parsing ONNX",
    )
    parser.add_argument(
        "--tensorrt-rtx",
        action="store_true",
        help="build with TensorRT for RTX (Python package tensorrt_rtx) instead of TensorRT: no GPU needed, "
        "native flavour only, engines for RTX GPUs that are not served (this is how the tests run this "
        "code against a real TensorRT API)",
    )
    parser.add_argument("--verify", action="store_true", help="run and check each engine after building it")
    cli_options.add_mnist_dir_argument(parser, "for --verify")
    parser.add_argument("--samples-dir", type=Path, default=SAMPLES_DIR, help="0.png .. 9.png (--verify)")
    parser.add_argument(
        "--latency-runs", type=positive_int, default=100, help="runs averaged for the latency"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the build jobs and run the checks; no TensorRT"
    )
    parser.add_argument(
        "--trt-version",
        default=None,
        help=f"TensorRT version assumed by --dry-run when tensorrt is not importable "
        f"(default {DEFAULT_DRY_RUN_VERSION})",
    )
    parser.add_argument("--verbose", action="store_true", help="TensorRT's INFO log")
    args = parser.parse_args(argv)
    if args.flavour is None:
        args.flavour = "native" if args.tensorrt_rtx else "plugin"
    if args.engine_dir is None:
        args.engine_dir = (
            DEFAULT_ENGINE_DIR / tensorrt_api.TENSORRT_RTX if args.tensorrt_rtx else DEFAULT_ENGINE_DIR
        )
    if args.network_api and args.model == MNIST:
        parser.error("--network-api is implemented for l2norm (use --model l2norm or --model all)")
    if args.network_api and args.flavour != "plugin":
        parser.error("--network-api builds the plugin flavour only")
    if args.tensorrt_rtx and args.flavour != "native":
        parser.error(
            f"--tensorrt-rtx builds the native flavour only: {tensorrt_api.TENSORRT_RTX_CUSTOM_PLUGIN_LIMIT}"
        )
    if args.tensorrt_rtx and args.verify:
        parser.error(
            "--verify runs engines with TensorRT; --tensorrt-rtx engines are for RTX GPUs, not verified here"
        )
    return args


def dry_run(args: argparse.Namespace, libraries: Sequence[PluginLibrary]) -> int:
    version = tensorrt_api.installed_version(args.tensorrt_rtx)
    if args.tensorrt_rtx:
        name, rules_major = "TensorRT-RTX", tensorrt_api.TENSORRT_RTX_RULES_MAJOR
        version = version or "(not installed)"
    else:
        name = "TensorRT"
        version = version or args.trt_version or DEFAULT_DRY_RUN_VERSION
        rules_major = parse_trt_major(version)
    print(f"build jobs for {name} {version} (dry run: nothing is built)")
    for job in make_build_jobs(args, rules_major):
        print(describe(job))
        print("  checks         ONNX inputs/outputs and optimization profile match config.pbtxt")
    for library in libraries:
        print(f"plugin library {library.path}")
    return 0


def run(args: argparse.Namespace) -> int:
    libraries = collect_plugin_libraries(args.plugin_library, args.plugin_config)
    if args.dry_run:
        return dry_run(args, libraries)

    api = tensorrt_api.load(args.tensorrt_rtx)
    # TensorRT's builder needs a GPU; TensorRT-RTX's does not, and then the engine is checked where one is.
    cuda = None if api.builds_without_gpu and not args.verify else CudaRuntime()
    jobs = make_build_jobs(args, api.rules_major)
    if not libraries and any(job.required_plugins() for job in jobs):
        libraries = [PluginLibrary(default_plugin_library(api.version), source="default location")]
    trt = api.trt
    logger = trt.Logger(trt.Logger.INFO if args.verbose else trt.Logger.WARNING)
    required = sorted({name for job in jobs for name in job.required_plugins()})
    handles = load_plugins(api, libraries, required)  # noqa: F841 (keeps the libraries registered)
    device = cuda.device_name() if cuda else None
    timing_cache = args.timing_cache or args.timing_cache_dir / timing_cache_name(api.file_tag, device)
    print(f"{api.name} {api.version} on {device or 'no GPU (not needed to build)'}")

    runtime = trt.Runtime(logger) if cuda else None
    failures = []
    for job in jobs:
        print(describe(job))
        try:
            plan = build_engine(api, job, logger, timing_cache, args.workspace_mib)
            if runtime is None:
                checked = f"network I/O matches {job.config.path} (the engine itself runs on RTX GPUs only)"
                engine = None
            else:
                engine = runtime.deserialize_cuda_engine(plan)
                if engine is None:
                    raise BuildFailure(f"{job.title}: the freshly built plan does not deserialize")
                specs, profiles = engine_io_specs(trt, engine)
                check_io_against_config(specs, job.config, f"engine {job.title}")
                check_profile_covers_config(profiles, job.config)
                checked = f"I/O matches {job.config.path}"
            atomic_write(job.output, plan)
            print(f"{job.title}: wrote {job.output} ({len(plan) / 1e6:.2f} MB), {checked}")
            if args.verify and not verify(trt, cuda, engine, job, args):
                failures.append(f"{job.title}: verification failed")
        except BuildFailure as error:
            print(f"ERROR: {error}", file=sys.stderr)
            failures.append(job.title)
    if failures:
        print("FAILED: " + "; ".join(failures), file=sys.stderr)
        return EXIT_FAILED
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except UsageError as error:
        print(f"build_engines.py: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except EnvironmentMissing as error:
        help_text = "" if args.tensorrt_rtx else f"\n\n{ENVIRONMENT_HELP}"
        print(f"build_engines.py: {error}.{help_text}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except BuildFailure as error:
        print(f"build_engines.py: {error}", file=sys.stderr)
        return EXIT_FAILED
