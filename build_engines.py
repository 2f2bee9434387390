#!/usr/bin/env python3
"""Builds the TensorRT engines of the Triton models (mnist, l2norm) with our plugins, in NVIDIA's containers.

    python3 build_engines.py --plugin-library build/trt-10.13.3/libtrt_plugin_kit.so   # fp32, both models
    python3 build_engines.py --plugin-config plugins.yaml --model mnist --precision int8 --verify
    python3 build_engines.py --model all --precision fp16 --flavour both --verify   # with/without plugins
    python3 build_engines.py --model l2norm --network-api      # TensorRT network API instead of ONNX
    python3 build_engines.py --dry-run --precision int8        # the plan and the checks, no TensorRT needed

What it does, per model:
1. loads the plugin libraries (``--plugin-library``, repeatable, and/or ``--plugin-config`` JSON/YAML) through
   TensorRT's plugin registry and checks that every plugin the graph needs is registered;
2. reads ``model_repository/<model>/config.pbtxt``: ``max_batch_size`` sets the optimization profile, and the
   ONNX graph's inputs/outputs are checked against the config before anything is built;
3. parses ``models/onnx/<model>_<flavour>.onnx`` (or the FP16/INT8 variant made from it, see
   trt_plugin_kit.export) and builds the engine with a timing cache and a progress bar;
4. checks the engine's tensor names, dtypes and shapes against config.pbtxt and only then writes
   ``model_repository/<model>/1/model.plan`` (plugin flavour) or
   ``build/engines/<model>_native_<precision>.plan`` (native flavour, built for comparison);
5. with ``--verify``: runs the engine on the ten sample digits (PASS/FAIL each), on the validation split
   (accuracy), measures the average latency, and compares the outputs with the CPU reference (the NumPy
   evaluator running the same ONNX graph); l2norm is checked on random vectors of several lengths.

Precision (TensorRT 10: FP16 is a builder flag; TensorRT 11: networks are strongly typed, precision comes
from the graph's types): ``fp32`` builds FP32 (TF32 off); ``fp16`` sets the FP16 flag on TensorRT 10 and
builds the FP16 graph strongly typed on TensorRT 11; ``int8`` builds the INT8 graph (pools between Q/DQ with
the calibrated scales of models/lenet5_mnist_int8_scales.json) strongly typed on both. l2norm has no INT8
layer: its ``int8`` engine is FP32.

Needs TensorRT >= 10 (``import tensorrt``), an NVIDIA GPU and the CUDA runtime (libcudart), plus numpy, onnx,
pillow and tqdm (PyYAML only for YAML plugin configs). Without them it exits with a message saying so.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO_ROOT))  # trt_plugin_kit, also when run from elsewhere or without `pip install`

from trt_plugin_kit import PLUGIN_NAMESPACE, PLUGIN_VERSION, cli_options, export, mnist  # noqa: E402
from trt_plugin_kit.interface import (  # noqa: E402
    FLAVOURS,
    MODEL_REPOSITORY,
    PLUGIN_LIBRARY_NAME,
    PRECISIONS,
    SAMPLES_DIR,
)
from trt_plugin_kit.interface import TENSORRT_MODELS as MODELS  # noqa: E402
from trt_plugin_kit.triton_config import ModelConfig, TextProtoError, load_model_config  # noqa: E402

DEFAULT_MODEL_REPOSITORY = MODEL_REPOSITORY
DEFAULT_ENGINE_DIR = REPO_ROOT / "build" / "engines"
DEFAULT_SAMPLES_DIR = SAMPLES_DIR

# Range of the dynamic vector length of l2norm in the optimization profile (min, opt, max).
L2NORM_DIM_RANGE = (1, 512, export.L2NORM_MAX_DIM)
L2NORM_VERIFY_DIMS = (1, 7, 128, 1000, export.L2NORM_MAX_DIM)

EXIT_USAGE = 2  # bad arguments, plugin config, model config or ONNX/config mismatch (nothing was built)
EXIT_ENVIRONMENT = 3  # no TensorRT, no GPU, no CUDA runtime
EXIT_FAILED = 1  # a build failed, an engine does not match config.pbtxt, or --verify failed

ENVIRONMENT_HELP = (
    "build_engines.py needs NVIDIA TensorRT >= 10 (its Python package `tensorrt`), the CUDA runtime and an "
    "NVIDIA GPU. Run it in NVIDIA's TensorRT container on a GPU host, for example\n"
    '    docker run --rm --gpus all -v "$PWD":/workspace -w /workspace nvcr.io/nvidia/tensorrt:25.09-py3 \\\n'
    "        bash -c 'pip install onnx tqdm pillow && python3 build_engines.py --plugin-library <lib>'\n"
    "or let `docker compose up --build` do it (the builder service compiles the plugins and builds the "
    "engines). `python3 build_engines.py --dry-run` shows the build plan and runs the checks without "
    "TensorRT."
)


class UsageError(Exception):
    """Bad input from the user (arguments, files); reported without a traceback, exit code 2."""


class EnvironmentMissing(Exception):
    """TensorRT, the CUDA runtime or a GPU is missing; exit code 3."""


class BuildFailure(Exception):
    """Building, checking or verifying an engine failed; exit code 1."""


# ============================================================================================ arguments


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Build the TensorRT engines of the Triton models with the trt_plugin_kit plugins.",
        epilog="Exit codes: 0 ok, 1 build/check/verify failed, 2 bad input, 3 TensorRT/GPU missing.",
    )
    parser.add_argument(
        "--model", choices=[*MODELS, "all"], default="all", help="model(s) to build (default all)"
    )
    parser.add_argument(
        "--flavour",
        choices=[*FLAVOURS, "both"],
        default="plugin",
        help="plugin: custom layers as our plugins, written to the model repository (default); native: "
        "standard TensorRT layers only, written to --engine-dir for comparison; both",
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
    parser.add_argument("--model-repository", type=Path, default=DEFAULT_MODEL_REPOSITORY)
    parser.add_argument(
        "--onnx-dir", type=Path, default=export.ONNX_DIR, help="where <model>_<flavour>.onnx are"
    )
    parser.add_argument("--int8-scales", type=Path, default=export.INT8_SCALES_PATH)
    parser.add_argument("--engine-dir", type=Path, default=DEFAULT_ENGINE_DIR, help="native-flavour engines")
    parser.add_argument(
        "--timing-cache", type=Path, help="timing cache file (default build/timing_cache_trt<version>.bin)"
    )
    parser.add_argument("--workspace-mib", type=positive_int, default=1024, help="builder workspace limit")
    parser.add_argument(
        "--opt-batch", type=positive_int, help="batch size to optimize for (default max_batch_size)"
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
    parser.add_argument("--verify", action="store_true", help="run and check each engine after building it")
    cli_options.add_mnist_dir_argument(parser, "for --verify")
    parser.add_argument(
        "--samples-dir", type=Path, default=DEFAULT_SAMPLES_DIR, help="0.png .. 9.png (--verify)"
    )
    parser.add_argument(
        "--latency-runs", type=positive_int, default=100, help="runs averaged for the latency"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the plan and run the checks; no TensorRT"
    )
    parser.add_argument(
        "--trt-version",
        default=None,
        help="TensorRT version assumed by --dry-run when tensorrt is not importable (default 10.13.3)",
    )
    parser.add_argument("--verbose", action="store_true", help="TensorRT's INFO log")
    args = parser.parse_args(argv)
    if args.network_api and args.model == "mnist":
        parser.error("--network-api is implemented for l2norm (use --model l2norm or --model all)")
    if args.network_api and args.flavour != "plugin":
        parser.error("--network-api builds the plugin flavour only")
    return args


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def selected(choice: str, everything: Sequence[str]) -> tuple[str, ...]:
    return tuple(everything) if choice in ("all", "both") else (choice,)


# ======================================================================================= plugin config


@dataclass(frozen=True)
class PluginLibrary:
    path: Path
    layers: tuple[str, ...] = ()  # DriveWorks-style layer list (informational: TensorRT maps by op type)
    source: str = "command line"


def load_plugin_config(path: Path) -> list[PluginLibrary]:
    """Plugin libraries listed in a JSON or YAML file.

    Accepted layouts (relative paths are relative to the file; keys starting with ``__`` are comments)::

        {"plugins": ["lib_a.so", {"path": "lib_b.so", "layers": ["pool1"]}]}
        ["lib_a.so", "lib_b.so"]
        {"__comment": "DriveWorks --pluginConfig style", "lib_a.so": ["pool1", "fc1"]}
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"plugin config {path} does not exist")
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as error:
            raise UsageError(
                f"plugin config {path}: reading YAML needs PyYAML (pip install pyyaml)"
            ) from error
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise UsageError(f"plugin config {path} is not valid YAML: {error}") from error
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise UsageError(f"plugin config {path} is not valid JSON: {error}") from error

    entries: list[tuple[object, object]] = []
    if isinstance(data, dict) and "plugins" in data:
        if not isinstance(data["plugins"], list):
            raise UsageError(f"plugin config {path}: 'plugins' must be a list")
        for item in data["plugins"]:
            if isinstance(item, dict):
                unknown = set(item) - {"path", "layers"}
                if unknown or "path" not in item:
                    raise UsageError(
                        f"plugin config {path}: entries are paths or {{path, layers}}, got {item!r}"
                    )
                entries.append((item["path"], item.get("layers", [])))
            else:
                entries.append((item, []))
    elif isinstance(data, list):
        entries = [(item, []) for item in data]
    elif isinstance(data, dict):
        entries = [(key, value) for key, value in data.items() if not str(key).startswith("__")]
    else:
        raise UsageError(
            f"plugin config {path}: expected a list of libraries or a mapping, got {type(data).__name__}"
        )
    if not entries:
        raise UsageError(f"plugin config {path} lists no plugin library")

    libraries = []
    for library, layers in entries:
        if not isinstance(library, str) or not library.strip():
            raise UsageError(
                f"plugin config {path}: a library path must be a non-empty string, got {library!r}"
            )
        if not isinstance(layers, list) or not all(isinstance(layer, str) for layer in layers):
            raise UsageError(
                f"plugin config {path}: layers of {library} must be a list of names, got {layers!r}"
            )
        resolved = Path(library).expanduser()
        if not resolved.is_absolute():
            resolved = path.parent / resolved
        libraries.append(PluginLibrary(resolved, tuple(layers), source=str(path)))
    return libraries


def collect_plugin_libraries(cli_paths: Iterable[Path], config_path: Path | None) -> list[PluginLibrary]:
    """Libraries from the command line and the config file, deduplicated, each checked to exist."""
    libraries = [PluginLibrary(Path(p).expanduser()) for p in cli_paths]
    if config_path is not None:
        libraries += load_plugin_config(config_path)
    unique: dict[Path, PluginLibrary] = {}
    for library in libraries:
        if not library.path.is_file():
            raise UsageError(f"plugin library {library.path} (from {library.source}) does not exist")
        unique.setdefault(library.path.resolve(), library)
    return list(unique.values())


def default_plugin_library(trt_version: str, build_dir: Path = REPO_ROOT / "build") -> Path:
    """build/trt-<version>/libtrt_plugin_kit.so for the running TensorRT (as `make plugins` builds it)."""
    parts = trt_version.split(".")
    candidates = [".".join(parts[:n]) for n in (len(parts), 3, 2)]
    for version in dict.fromkeys(candidates):
        library = build_dir / f"trt-{version}" / PLUGIN_LIBRARY_NAME
        if library.is_file():
            return library
    raise UsageError(
        f"no plugin library given and none built for TensorRT {trt_version} in {build_dir}/trt-*/; "
        "build it (`make plugins TRT_VERSIONS=<version> TRT_VENDOR_DIR=...` or cmake -S plugins) and pass "
        "--plugin-library PATH or --plugin-config FILE"
    )


# ======================================================================================= precision plan


@dataclass(frozen=True)
class PrecisionPlan:
    """How one requested precision is built on one TensorRT major version."""

    precision: str  # what the user asked for
    graph: str  # ONNX variant whose types are built: fp32 | fp16 | int8
    strongly_typed: bool
    builder_flags: tuple[str, ...] = ()  # trt.BuilderFlag members to set
    cleared_flags: tuple[str, ...] = ()  # trt.BuilderFlag members to clear
    note: str = ""


def plan_precision(precision: str, trt_major: int, model: str, strongly_typed: bool = False) -> PrecisionPlan:
    if precision not in PRECISIONS:
        raise UsageError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if trt_major < 10:
        raise EnvironmentMissing(
            f"TensorRT {trt_major}.x is too old: the plugins are IPluginV3 (TensorRT >= 10)"
        )
    note = ""
    if precision == "int8" and model != "mnist":
        precision_built, note = "fp32", f"{model} has no INT8 layer (no pool): built in FP32"
    else:
        precision_built = precision
    no_tf32 = ("TF32",)  # FP32 means FP32: TF32 would make the comparison with the CPU reference loose
    if precision_built == "fp32":
        return PrecisionPlan(precision, "fp32", trt_major >= 11, (), no_tf32, note)
    if precision_built == "int8":
        return PrecisionPlan(
            precision, "int8", True, (), no_tf32, "pools INT8 between Q/DQ (graph types), the rest FP32"
        )
    if trt_major >= 11 or strongly_typed:  # fp16
        return PrecisionPlan(precision, "fp16", True, (), (), "FP16 graph, strongly typed")
    return PrecisionPlan(precision, "fp32", False, ("FP16",), (), "FP32 graph with the FP16 builder flag")


def parse_trt_major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        raise UsageError(f"cannot read a TensorRT version from {version!r}") from None


# =================================================================================== config consistency


@dataclass(frozen=True)
class TensorSpec:
    """One I/O tensor of an ONNX graph or an engine: Triton data type name and full shape (-1 = dynamic)."""

    name: str
    is_input: bool
    data_type: str
    shape: tuple[int, ...]


ONNX_TO_TRITON = {
    1: "TYPE_FP32",
    10: "TYPE_FP16",
    3: "TYPE_INT8",
    2: "TYPE_UINT8",
    6: "TYPE_INT32",
    7: "TYPE_INT64",
}
ONNX_TO_TRITON.update({9: "TYPE_BOOL", 16: "TYPE_BF16", 11: "TYPE_FP64"})
TRT_TO_TRITON = {
    "FLOAT": "TYPE_FP32",
    "HALF": "TYPE_FP16",
    "BF16": "TYPE_BF16",
    "INT8": "TYPE_INT8",
    "UINT8": "TYPE_UINT8",
    "INT32": "TYPE_INT32",
    "INT64": "TYPE_INT64",
    "BOOL": "TYPE_BOOL",
}


def onnx_io_specs(model) -> list[TensorSpec]:
    """The graph inputs/outputs of an ONNX model (symbolic dims become -1)."""
    specs = []
    initializers = {init.name for init in model.graph.initializer}
    for is_input, values in ((True, model.graph.input), (False, model.graph.output)):
        for value in values:
            if value.name in initializers:
                continue
            tensor_type = value.type.tensor_type
            shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim)
            data_type = ONNX_TO_TRITON.get(tensor_type.elem_type, f"ONNX_TYPE_{tensor_type.elem_type}")
            specs.append(TensorSpec(value.name, is_input, data_type, shape))
    return specs


def check_io_against_config(specs: Sequence[TensorSpec], config: ModelConfig, what: str) -> None:
    """Raises BuildFailure listing every difference between ``specs`` and the Triton config's I/O."""
    problems = []
    expected = {(t.name, True): t for t in config.inputs} | {(t.name, False): t for t in config.outputs}
    actual = {(s.name, s.is_input): s for s in specs}
    for key in expected.keys() - actual.keys():
        kind = "input" if key[1] else "output"
        problems.append(f"config.pbtxt {kind} '{key[0]}' is not an {kind} of the {what}")
    for key in actual.keys() - expected.keys():
        kind = "input" if key[1] else "output"
        problems.append(f"the {what} has {kind} '{key[0]}' that config.pbtxt does not declare")
    for key in sorted(expected.keys() & actual.keys()):
        tensor, spec = expected[key], actual[key]
        if tensor.data_type != spec.data_type:
            problems.append(
                f"'{tensor.name}': config.pbtxt says {tensor.data_type}, the {what} has {spec.data_type}"
            )
        want = ((-1,) if config.max_batch_size > 0 else ()) + tuple(tensor.model_dims)
        if tuple(spec.shape) != want:
            problems.append(
                f"'{tensor.name}': the {what} has shape {list(spec.shape)}, config.pbtxt needs {list(want)} "
                f"(max_batch_size {config.max_batch_size}, dims {list(tensor.model_dims)})"
            )
    if problems:
        source = config.path or "config.pbtxt"
        raise BuildFailure(f"{what} does not match {source}:\n  - " + "\n  - ".join(problems))


def check_profile_covers_config(
    profiles: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]], config: ModelConfig
) -> None:
    """The optimization profile must accept batch 1..max_batch_size and every warmup sample of the config."""
    problems = []
    for tensor in config.inputs:
        if tensor.name not in profiles:
            problems.append(f"no optimization profile for input '{tensor.name}'")
            continue
        low, _, high = profiles[tensor.name]
        if config.max_batch_size > 0 and (low[0] > 1 or high[0] < config.max_batch_size):
            problems.append(
                f"'{tensor.name}': profile batch range {low[0]}..{high[0]} does not cover "
                f"1..max_batch_size={config.max_batch_size}"
            )
    for sample in config.warmup:
        for name, dims in sample.input_dims.items():
            if name not in profiles:
                continue
            low, _, high = profiles[name]
            shape = ((sample.batch_size,) if config.max_batch_size > 0 else ()) + tuple(dims)
            inside = len(shape) == len(low) and all(
                lo <= s <= hi for s, lo, hi in zip(shape, low, high, strict=True)
            )
            if not inside:
                problems.append(
                    f"warmup '{sample.name}' sends '{name}' {list(shape)}, outside the profile "
                    f"{list(low)}..{list(high)}"
                )
    if problems:
        raise BuildFailure(
            f"optimization profile vs {config.path or 'config.pbtxt'}:\n  - " + "\n  - ".join(problems)
        )


def profile_shapes(model: str, config: ModelConfig, opt_batch: int | None = None) -> dict:
    """``{input: (min, opt, max)}``: batch 1..max_batch_size, l2norm's length in :data:`L2NORM_DIM_RANGE`."""
    if config.max_batch_size <= 0:
        raise UsageError(f"{config.path}: max_batch_size must be > 0 for {model} (dynamic batch engines)")
    batch_opt = min(opt_batch or config.max_batch_size, config.max_batch_size)
    shapes = {}
    for tensor in config.inputs:
        low, opt, high = [1], [batch_opt], [config.max_batch_size]
        for dim in tensor.model_dims:
            if dim >= 0:
                low.append(dim), opt.append(dim), high.append(dim)
            elif model == "l2norm":
                (
                    low.append(L2NORM_DIM_RANGE[0]),
                    opt.append(L2NORM_DIM_RANGE[1]),
                    high.append(L2NORM_DIM_RANGE[2]),
                )
            else:
                raise UsageError(
                    f"{config.path}: '{tensor.name}' has a dynamic dimension; {model} has no range for it"
                )
        shapes[tensor.name] = (tuple(low), tuple(opt), tuple(high))
    return shapes


# =========================================================================================== build jobs


@dataclass
class BuildJob:
    model: str
    flavour: str
    plan: PrecisionPlan
    config: ModelConfig
    onnx_source: Path
    output: Path
    profile: dict
    network_api: bool = False
    onnx_model: object = field(default=None, repr=False)  # the ONNX variant to parse

    @property
    def title(self) -> str:
        return f"{self.model} {self.flavour} {self.plan.precision}"

    def required_plugins(self) -> list[str]:
        if self.network_api:
            return ["L2Normalize"]
        nodes = self.onnx_model.graph.node
        return sorted({node.op_type for node in nodes if node.domain == export.PLUGIN_DOMAIN})


def plan_jobs(args: argparse.Namespace, trt_major: int) -> list[BuildJob]:
    """Everything that can be decided and checked without TensorRT: configs, graphs, precision, profiles."""
    import onnx

    jobs = []
    scales = None
    for model in selected(args.model, MODELS):
        config_path = args.model_repository / model / "config.pbtxt"
        try:
            config = load_model_config(config_path)
        except (FileNotFoundError, TextProtoError) as error:
            raise UsageError(str(error)) from error
        if not config.is_tensorrt:
            raise UsageError(
                f"{config_path} is not a TensorRT model configuration (platform '{config.platform}', backend "
                f"'{config.backend}'): a model.plan there would not be served"
            )
        if config.name and config.name != model:
            raise UsageError(f"{config_path} names the model '{config.name}', expected '{model}'")
        profile = profile_shapes(model, config, args.opt_batch)
        check_profile_covers_config(profile, config)
        for flavour in selected(args.flavour, FLAVOURS):
            plan = plan_precision(args.precision, trt_major, model, args.strongly_typed)
            source = export.onnx_path(model, flavour, args.onnx_dir)
            if not source.is_file():
                raise UsageError(f"{source} not found (python -m trt_plugin_kit.export writes it)")
            fp32_graph = onnx.load(source)
            if plan.graph == "int8" and scales is None:
                if not args.int8_scales.is_file():
                    raise UsageError(f"INT8 needs calibrated scales: {args.int8_scales} not found")
                scales = export.load_int8_scales(args.int8_scales)
            graph = export.make_variant(fp32_graph, plan.graph, scales)
            onnx.checker.check_model(graph)
            if flavour == "plugin":
                output = args.model_repository / model / "1" / "model.plan"
            else:
                output = args.engine_dir / f"{model}_native_{args.precision}.plan"
            job = BuildJob(
                model, flavour, plan, config, source, output, profile, args.network_api and model == "l2norm"
            )
            job.onnx_model = graph
            # Fail before building when the graph cannot match the Triton config.
            check_io_against_config(onnx_io_specs(graph), config, f"ONNX graph {source.name} ({plan.graph})")
            jobs.append(job)
    return jobs


def describe(job: BuildJob) -> str:
    plan = job.plan
    source = (
        "TensorRT network API (l2norm)" if job.network_api else f"{job.onnx_source.name} [{plan.graph} graph]"
    )
    flags = ", ".join([f"+{f}" for f in plan.builder_flags] + [f"-{f}" for f in plan.cleared_flags]) or "none"
    profile = "; ".join(
        f"{name} {list(lo)}..{list(opt)}..{list(hi)}" for name, (lo, opt, hi) in job.profile.items()
    )
    lines = [
        f"{job.title}:",
        f"  source         {source}",
        f"  network        {'strongly' if plan.strongly_typed else 'weakly'} typed, builder flags {flags}",
        f"  profile        {profile} (min..opt..max, max_batch_size {job.config.max_batch_size})",
        f"  plugins        {', '.join(job.required_plugins()) or 'none'}",
        f"  writes         {job.output}",
    ]
    if plan.note:
        lines.append(f"  note           {plan.note}")
    return "\n".join(lines)


# ========================================================================================== environment


class CudaRuntime:
    """The CUDA runtime calls --verify needs, through ctypes (no extra Python package in the container)."""

    H2D, D2H = 1, 2

    def __init__(self):
        names = ["libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"]
        found = ctypes.util.find_library("cudart")
        if found:
            names.insert(0, found)
        self.lib = None
        for name in names:
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if self.lib is None:
            raise EnvironmentMissing("the CUDA runtime library (libcudart) was not found")
        self.lib.cudaGetErrorString.restype = ctypes.c_char_p
        count = ctypes.c_int(0)
        status = self.lib.cudaGetDeviceCount(ctypes.byref(count))
        if status != 0 or count.value == 0:
            reason = self.lib.cudaGetErrorString(status).decode() if status else "0 devices"
            raise EnvironmentMissing(f"no NVIDIA GPU is visible (cudaGetDeviceCount: {reason})")
        self.device_count = count.value

    def check(self, status: int, what: str) -> None:
        if status != 0:
            raise BuildFailure(f"{what} failed: {self.lib.cudaGetErrorString(status).decode()}")

    def device_name(self) -> str:
        properties = ctypes.create_string_buffer(16384)  # cudaDeviceProp starts with char name[256]
        function = getattr(self.lib, "cudaGetDeviceProperties_v2", None) or self.lib.cudaGetDeviceProperties
        self.check(function(properties, 0), "cudaGetDeviceProperties")
        return properties.raw[:256].split(b"\0", 1)[0].decode(errors="replace")

    def malloc(self, nbytes: int) -> int:
        pointer = ctypes.c_void_p()
        self.check(self.lib.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(max(nbytes, 1))), "cudaMalloc")
        return pointer.value

    def free(self, pointer: int) -> None:
        self.lib.cudaFree(ctypes.c_void_p(pointer))

    def to_device(self, pointer: int, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        status = self.lib.cudaMemcpy(
            ctypes.c_void_p(pointer),
            array.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_size_t(array.nbytes),
            self.H2D,
        )
        self.check(status, "cudaMemcpy host->device")

    def to_host(self, array: np.ndarray, pointer: int) -> None:
        status = self.lib.cudaMemcpy(
            array.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_void_p(pointer),
            ctypes.c_size_t(array.nbytes),
            self.D2H,
        )
        self.check(status, "cudaMemcpy device->host")

    def create_stream(self) -> int:
        stream = ctypes.c_void_p()
        self.check(self.lib.cudaStreamCreate(ctypes.byref(stream)), "cudaStreamCreate")
        return stream.value or 0

    def synchronize(self, stream: int) -> None:
        self.check(self.lib.cudaStreamSynchronize(ctypes.c_void_p(stream)), "cudaStreamSynchronize")

    def destroy_stream(self, stream: int) -> None:
        self.lib.cudaStreamDestroy(ctypes.c_void_p(stream))


def import_tensorrt():
    """``tensorrt`` and a CUDA runtime with at least one GPU, or EnvironmentMissing saying what is missing."""
    try:
        import tensorrt as trt
    except ImportError as error:
        raise EnvironmentMissing(
            f"the TensorRT Python package is not installed (import tensorrt: {error})"
        ) from None
    except OSError as error:  # e.g. the pip stub without libnvinfer
        raise EnvironmentMissing(f"TensorRT could not be loaded ({error})") from None
    cuda = CudaRuntime()
    return trt, cuda


# ============================================================================================ TensorRT


def make_progress_monitor(trt):
    """A trt.IProgressMonitor drawing one tqdm bar per builder phase (nested phases indented)."""
    from tqdm import tqdm

    class TqdmProgressMonitor(trt.IProgressMonitor):
        def __init__(self):
            trt.IProgressMonitor.__init__(self)
            self.bars = {}
            self.lock = threading.Lock()  # TensorRT may report from several builder threads

        def phase_start(self, phase_name, parent_phase, num_steps):
            with self.lock:
                self._start(phase_name, parent_phase, num_steps)

        def _start(self, phase_name, parent_phase, num_steps):
            depth = 0
            parent = parent_phase
            while parent in self.bars:
                depth += 1
                parent = self.bars[parent][1]
            bar = tqdm(total=num_steps, desc="  " * depth + phase_name, position=depth, leave=depth == 0)
            self.bars[phase_name] = (bar, parent_phase)

        def step_complete(self, phase_name, step):
            with self.lock:
                if phase_name in self.bars:
                    bar = self.bars[phase_name][0]
                    bar.update(step + 1 - bar.n)
            return True  # keep building

        def phase_finish(self, phase_name):
            with self.lock:
                bar, _ = self.bars.pop(phase_name, (None, None))
            if bar is not None:
                bar.update(bar.total - bar.n)
                bar.close()

    return TqdmProgressMonitor()


def load_plugins(trt, libraries: Sequence[PluginLibrary], required: Iterable[str]):
    """Loads each library into TensorRT's plugin registry; checks that every required plugin is there."""
    registry = trt.get_plugin_registry()
    handles = []
    for library in libraries:
        handle = registry.load_library(str(library.path))
        if handle is None:
            raise BuildFailure(f"TensorRT could not load the plugin library {library.path}")
        handles.append(handle)
        layers = f" (layers {', '.join(library.layers)})" if library.layers else ""
        print(f"loaded plugin library {library.path}{layers}")
    missing = [
        name for name in required if registry.get_creator(name, PLUGIN_VERSION, PLUGIN_NAMESPACE) is None
    ]
    if missing:
        raise BuildFailure(
            f"plugin(s) {', '.join(missing)} (version {PLUGIN_VERSION}, namespace '{PLUGIN_NAMESPACE}') not "
            f"registered after loading {[str(lib.path) for lib in libraries]}"
        )
    return handles


def l2norm_network(trt, network, plan: PrecisionPlan) -> None:
    """l2norm through the network API: registry -> creator.create_plugin(fields) -> network.add_plugin_v3."""
    registry = trt.get_plugin_registry()
    creator = registry.get_creator("L2Normalize", PLUGIN_VERSION, PLUGIN_NAMESPACE)
    fields = trt.PluginFieldCollection(
        [
            trt.PluginField("axis", np.array([-1], dtype=np.int32), trt.PluginFieldType.INT32),
            trt.PluginField(
                "eps", np.array([export.L2NORM_EPS], dtype=np.float32), trt.PluginFieldType.FLOAT32
            ),
        ]
    )
    plugin = creator.create_plugin("l2normalize", fields, trt.TensorRTPhase.BUILD)
    if plugin is None:
        raise BuildFailure("L2Normalize creator refused the fields axis=-1, eps=1e-12")
    vector = network.add_input(export.L2NORM_INPUT, trt.float32, (-1, -1))
    tensor = vector
    if plan.graph == "fp16":  # strongly typed FP16: the plugin runs on half, I/O stays FP32
        tensor = network.add_cast(tensor, trt.float16).get_output(0)
    layer = network.add_plugin_v3([tensor], [], plugin)
    layer.name = "l2normalize"
    output = layer.get_output(0)
    if plan.graph == "fp16":
        output = network.add_cast(output, trt.float32).get_output(0)
    output.name = export.L2NORM_OUTPUT
    network.mark_output(output)


def engine_io_specs(trt, engine) -> tuple[list[TensorSpec], dict]:
    specs, profiles = [], {}
    for index in range(engine.num_io_tensors):
        name = engine.get_tensor_name(index)
        is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
        dtype = TRT_TO_TRITON.get(
            engine.get_tensor_dtype(name).name, f"TRT_{engine.get_tensor_dtype(name).name}"
        )
        specs.append(TensorSpec(name, is_input, dtype, tuple(engine.get_tensor_shape(name))))
        if is_input:
            low, opt, high = engine.get_tensor_profile_shape(name, 0)
            profiles[name] = (tuple(low), tuple(opt), tuple(high))
    return specs, profiles


def build_engine(trt, job: BuildJob, logger, timing_cache_path: Path, workspace_mib: int) -> bytes:
    builder = trt.Builder(logger)
    major = parse_trt_major(trt.__version__)
    flags = 0
    if job.plan.strongly_typed and major < 11:  # TensorRT 11: always strongly typed, the flag is deprecated
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    if job.network_api:
        l2norm_network(trt, network, job.plan)
    else:
        parser = trt.OnnxParser(network, logger)
        if not parser.parse(job.onnx_model.SerializeToString(), str(job.onnx_source)):
            errors = "\n  ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise BuildFailure(
                f"{job.title}: TensorRT's ONNX parser failed on {job.onnx_source.name}:\n  {errors}"
            )
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_mib << 20)
    for flag in job.plan.builder_flags:
        config.set_flag(getattr(trt.BuilderFlag, flag))
    for flag in job.plan.cleared_flags:
        config.clear_flag(getattr(trt.BuilderFlag, flag))
    profile = builder.create_optimization_profile()
    for name, (low, opt, high) in job.profile.items():
        profile.set_shape(name, low, opt, high)
    config.add_optimization_profile(profile)

    cache_bytes = timing_cache_path.read_bytes() if timing_cache_path.is_file() else b""
    cache = config.create_timing_cache(cache_bytes)
    if not config.set_timing_cache(cache, ignore_mismatch=False):
        print(f"timing cache {timing_cache_path} does not match this TensorRT/GPU: starting a new one")
        cache = config.create_timing_cache(b"")
        config.set_timing_cache(cache, ignore_mismatch=True)
    monitor = make_progress_monitor(trt)
    config.progress_monitor = monitor

    started = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BuildFailure(f"{job.title}: TensorRT could not build the engine (see the log above)")
    print(f"{job.title}: built in {time.perf_counter() - started:.1f} s")
    timing_cache_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(timing_cache_path, bytes(config.get_timing_cache().serialize()))
    return bytes(serialized)


def atomic_write(path: Path, data: bytes) -> None:
    """Writes via a temporary file + rename, so a failed build never leaves a half-written plan."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as handle:
        handle.write(data)
        temporary = Path(handle.name)
    os.replace(temporary, path)


# ================================================================================================ verify


class EngineRunner:
    """Runs a deserialized engine on host arrays (device buffers reused between calls of the same size)."""

    def __init__(self, trt, cuda: CudaRuntime, engine):
        self.trt, self.cuda, self.engine = trt, cuda, engine
        self.context = engine.create_execution_context()
        self.stream = cuda.create_stream()
        self.buffers: dict[str, tuple[int, int]] = {}
        self.names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.inputs = [n for n in self.names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]

    def _buffer(self, name: str, nbytes: int) -> int:
        pointer, size = self.buffers.get(name, (0, 0))
        if size < nbytes:
            if pointer:
                self.cuda.free(pointer)
            pointer, size = self.cuda.malloc(nbytes), nbytes
            self.buffers[name] = (pointer, size)
            self.context.set_tensor_address(name, pointer)
        return pointer

    def prepare(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for name in self.inputs:
            array = np.ascontiguousarray(
                feeds[name], dtype=self.trt.nptype(self.engine.get_tensor_dtype(name))
            )
            if not self.context.set_input_shape(name, array.shape):
                raise BuildFailure(f"the engine does not accept '{name}' of shape {array.shape}")
            self.cuda.to_device(self._buffer(name, array.nbytes), array)
        outputs = {}
        for name in self.names:
            if name in self.inputs:
                continue
            shape = tuple(self.context.get_tensor_shape(name))
            outputs[name] = np.empty(shape, dtype=self.trt.nptype(self.engine.get_tensor_dtype(name)))
            self._buffer(name, outputs[name].nbytes)
        return outputs

    def execute(self) -> None:
        if not self.context.execute_async_v3(self.stream):
            raise BuildFailure("execute_async_v3 failed")
        self.cuda.synchronize(self.stream)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self.prepare(feeds)
        self.execute()
        for name, array in outputs.items():
            self.cuda.to_host(array, self.buffers[name][0])
        return outputs

    def latency_ms(self, feeds: dict[str, np.ndarray], runs: int) -> float:
        self.prepare(feeds)
        for _ in range(min(10, runs)):
            self.execute()
        started = time.perf_counter()
        for _ in range(runs):
            self.execute()
        return (time.perf_counter() - started) * 1000.0 / runs

    def close(self) -> None:
        for pointer, _ in self.buffers.values():
            self.cuda.free(pointer)
        self.buffers.clear()
        self.cuda.destroy_stream(self.stream)


# CPU reference vs engine: largest |difference| allowed and share of identical predictions, per precision.
VERIFY_TOLERANCES = {
    "fp32": {"max_abs": 1e-4, "agreement": 1.0},
    "fp16": {"max_abs": 5e-2, "agreement": 0.995},
    "int8": {"max_abs": 2e-1, "agreement": 0.99},
}
MIN_ACCURACY = 0.98


def compare_with_reference(
    engine_out: np.ndarray, reference_out: np.ndarray, precision: str
) -> tuple[bool, str]:
    """PASS/FAIL of engine outputs against the CPU reference, with the figures that decided it."""
    tolerance = VERIFY_TOLERANCES[precision]
    difference = np.abs(engine_out.astype(np.float64) - reference_out.astype(np.float64))
    max_abs = float(difference.max()) if difference.size else 0.0
    line = f"max |diff| {max_abs:.3g} (limit {tolerance['max_abs']:g}), mean {float(difference.mean()):.3g}"
    ok = max_abs <= tolerance["max_abs"]
    if engine_out.ndim == 2 and engine_out.shape[1] == mnist.NUM_CLASSES:
        agreement = float(np.mean(engine_out.argmax(axis=1) == reference_out.argmax(axis=1)))
        line += f", same prediction {agreement:.2%} (min {tolerance['agreement']:.1%})"
        ok = ok and agreement >= tolerance["agreement"]
    return ok, line


def load_sample_digits(samples_dir: Path) -> np.ndarray:
    """``samples/digits/0.png`` .. ``9.png`` preprocessed: float32 [10, 1, 28, 28]."""
    paths = [samples_dir / f"{digit}.png" for digit in range(10)]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise UsageError(f"--verify needs the sample digits: missing {', '.join(missing)}")
    return np.stack([mnist.preprocess_image(p) for p in paths])


def verify_mnist(runner: EngineRunner, job: BuildJob, args, reference_graph) -> bool:
    from trt_plugin_kit import onnx_eval

    ok = True
    digits = load_sample_digits(args.samples_dir)
    for digit in range(10):
        probabilities = runner.run({mnist.INPUT_NAME: digits[digit : digit + 1]})[mnist.OUTPUT_NAME][0]
        predicted = int(probabilities.argmax())
        passed = predicted == digit
        ok &= passed
        status = "PASS" if passed else "FAIL"
        print(
            f"[I] digit {digit}: predicted {predicted} (probability {probabilities[predicted]:.4f})  {status}"
        )
    try:
        split = mnist.load_split(args.mnist_dir)
    except (FileNotFoundError, mnist.IdxFormatError) as error:
        raise UsageError(f"--verify needs the MNIST dev data: {error} (use --mnist-dir)") from error
    images = mnist.to_tensor(split.validation_images)
    batch = job.config.max_batch_size
    outputs = [
        runner.run({mnist.INPUT_NAME: images[i : i + batch]})[mnist.OUTPUT_NAME]
        for i in range(0, len(images), batch)
    ]
    engine_out = np.concatenate(outputs)
    accuracy = float(np.mean(engine_out.argmax(axis=1) == split.validation_labels))
    passed = accuracy >= MIN_ACCURACY
    ok &= passed
    print(
        f"[I] validation: {int(round(accuracy * len(images)))}/{len(images)} correct, "
        f"accuracy {accuracy:.2%} (min {MIN_ACCURACY:.0%})  {'PASS' if passed else 'FAIL'}"
    )
    reference_out = onnx_eval.run(reference_graph, {mnist.INPUT_NAME: images})[mnist.OUTPUT_NAME]
    passed, line = compare_with_reference(engine_out, reference_out, job.plan.precision)
    ok &= passed
    print(
        f"[I] CPU reference (NumPy evaluator, {reference_graph.graph.name}): {line}  "
        f"{'PASS' if passed else 'FAIL'}"
    )
    latency = runner.latency_ms({mnist.INPUT_NAME: digits[:1]}, args.latency_runs)
    print(f"[I] Average over {args.latency_runs} runs is {latency:.5f} ms (batch 1).")
    return ok


def verify_l2norm(runner: EngineRunner, job: BuildJob, args, reference_graph) -> bool:
    from trt_plugin_kit import onnx_eval

    ok = True
    rng = np.random.default_rng(0)
    # FP16 (flag or graph) runs the plugin in half precision; INT8 l2norm engines are FP32 (no INT8 layer).
    tolerance = 2e-3 if job.plan.precision == "fp16" else 1e-5
    for dim in L2NORM_VERIFY_DIMS:
        batch = min(8, job.config.max_batch_size)
        vectors = (rng.normal(size=(batch, dim)) * rng.uniform(1e-2, 1e2, size=(batch, 1))).astype(np.float32)
        vectors[0] = 0.0
        engine_out = runner.run({export.L2NORM_INPUT: vectors})[export.L2NORM_OUTPUT]
        reference_out = onnx_eval.run(reference_graph, {export.L2NORM_INPUT: vectors})[export.L2NORM_OUTPUT]
        max_abs = float(np.abs(engine_out.astype(np.float64) - reference_out).max())
        passed = max_abs <= tolerance
        ok &= passed
        print(f"[I] vectors [{batch}, {dim}]: max |diff| vs CPU reference {max_abs:.3g} "
              f"(limit {tolerance:g})  {'PASS' if passed else 'FAIL'}")  # fmt: skip
    feeds = {export.L2NORM_INPUT: rng.normal(size=(1, L2NORM_DIM_RANGE[1])).astype(np.float32)}
    latency = runner.latency_ms(feeds, args.latency_runs)
    print(
        f"[I] Average over {args.latency_runs} runs is {latency:.5f} ms "
        f"(batch 1, length {L2NORM_DIM_RANGE[1]})."
    )
    return ok


def verify(trt, cuda: CudaRuntime, engine, job: BuildJob, args) -> bool:
    # The CPU reference runs the graph the engine was built from (FP16-by-flag engines: the FP32 graph).
    reference_graph = job.onnx_model if not job.network_api else export.build_l2norm("plugin")
    if job.network_api and job.plan.graph == "fp16":
        reference_graph = export.to_fp16(reference_graph)
    print(f"&&&& RUNNING trt_plugin_kit.build_engines {job.title} on {cuda.device_name()}")
    runner = EngineRunner(trt, cuda, engine)
    try:
        verifier = verify_mnist if job.model == "mnist" else verify_l2norm
        ok = verifier(runner, job, args, reference_graph)
    finally:
        runner.close()
    print(f"&&&& {'PASSED' if ok else 'FAILED'} trt_plugin_kit.build_engines {job.title}")
    return ok


# ================================================================================================== main


def run(args: argparse.Namespace) -> int:
    libraries = collect_plugin_libraries(args.plugin_library, args.plugin_config)

    if args.dry_run:
        try:
            import tensorrt as trt

            version = trt.__version__
        except (ImportError, OSError):
            version = args.trt_version or "10.13.3"
        print(f"build plan for TensorRT {version} (dry run: nothing is built)")
        for job in plan_jobs(args, parse_trt_major(version)):
            print(describe(job))
            print("  checks         ONNX inputs/outputs and optimization profile match config.pbtxt")
        for library in libraries:
            print(f"plugin library {library.path}")
        return 0

    trt, cuda = import_tensorrt()
    trt_major = parse_trt_major(trt.__version__)
    jobs = plan_jobs(args, trt_major)
    if not libraries and any(job.required_plugins() for job in jobs):
        libraries = [PluginLibrary(default_plugin_library(trt.__version__), source="default location")]
    logger = trt.Logger(trt.Logger.INFO if args.verbose else trt.Logger.WARNING)
    required = sorted({name for job in jobs for name in job.required_plugins()})
    handles = load_plugins(trt, libraries, required)  # noqa: F841 (keeps the libraries registered)
    timing_cache = args.timing_cache or REPO_ROOT / "build" / f"timing_cache_trt{trt.__version__}.bin"
    print(f"TensorRT {trt.__version__} on {cuda.device_name()}")

    runtime = trt.Runtime(logger)
    failures = []
    for job in jobs:
        print(describe(job))
        try:
            plan_bytes = build_engine(trt, job, logger, timing_cache, args.workspace_mib)
            engine = runtime.deserialize_cuda_engine(plan_bytes)
            if engine is None:
                raise BuildFailure(f"{job.title}: the freshly built plan does not deserialize")
            specs, profiles = engine_io_specs(trt, engine)
            check_io_against_config(specs, job.config, f"engine {job.title}")
            check_profile_covers_config(profiles, job.config)
            atomic_write(job.output, plan_bytes)
            print(
                f"{job.title}: wrote {job.output} ({len(plan_bytes) / 1e6:.2f} MB), "
                f"I/O matches {job.config.path}"
            )
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
        print(f"build_engines.py: {error}.\n\n{ENVIRONMENT_HELP}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except BuildFailure as error:
        print(f"build_engines.py: {error}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
