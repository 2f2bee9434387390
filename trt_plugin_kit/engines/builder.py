"""The TensorRT part of a build: plugin registry, network (ONNX parser or network API), builder config,
optimization profile, timing cache, progress monitor, the checks of the network and the engine against
config.pbtxt, and writing the plan. Every TensorRT call goes through a :class:`.TensorRTApi`."""

from __future__ import annotations

import ctypes
import os
import re
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trt_plugin_kit.engines.consistency import (
    TRT_TO_TRITON,
    GraphTensor,
    Profile,
    check_io_against_config,
    check_profile_covers_config,
)
from trt_plugin_kit.engines.errors import BuildFailure
from trt_plugin_kit.engines.jobs import BuildJob
from trt_plugin_kit.engines.library_version import headers_version, parse_version
from trt_plugin_kit.engines.plugin_config import PluginLibrary
from trt_plugin_kit.engines.precision import PrecisionRecipe
from trt_plugin_kit.engines.progress import make_progress_monitor
from trt_plugin_kit.engines.tensorrt_api import TensorRTApi
from trt_plugin_kit.interface import L2NORM_INPUT, L2NORM_OUTPUT, PLUGIN_NAMESPACE, PLUGIN_VERSION
from trt_plugin_kit.models.export import L2NORM_EPS

BY_LOAD_LIBRARY = "registered by loadLibrary"


@dataclass(frozen=True)
class LoadedLibrary:
    library: PluginLibrary
    handle: object  # what keeps the library loaded (and, where TensorRT loaded it, registered)
    creators: tuple[tuple[str, str, str], ...]  # (name, version, namespace) it added to the registry
    how: str  # "registered themselves when loaded" or "registered by loadLibrary"


def registered_creators(registry) -> set[tuple[str, str, str]]:
    """(name, version, namespace) of every creator in a TensorRT plugin registry."""
    return {
        (creator.name, creator.plugin_version, creator.plugin_namespace) for creator in registry.all_creators
    }


def is_loaded(path: Path) -> bool:
    """Whether the dynamic loader already has this library in the process (dlopen with RTLD_NOLOAD)."""
    try:
        ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_NOLOAD)
    except OSError:
        return False
    return True


def load_library_once(api: TensorRTApi, registry, library: PluginLibrary) -> LoadedLibrary:
    """Loads one plugin library the way Triton's TensorRT backend does: ``dlopen`` it, once.

    Its static initializers register its creators with the registry of the TensorRT in this process (our
    library's registration.cpp does, as REGISTER_TENSORRT_PLUGIN does). TensorRT's ``loadLibrary`` is called
    only for a library that registered nothing itself and exports ``getCreators``/``getPluginCreators``:
    calling it on a self-registering library would register every creator a second time, which TensorRT
    refuses (issue 45). RTLD_GLOBAL keeps the library's symbols where a later library can find them, as
    ``LD_PRELOAD`` did.

    A library of ours compiled against another TensorRT major's headers is refused before it is loaded:
    its registrations would call the registry through another virtual table (TensorRT 11 removed four of
    TensorRT 10's functions). TensorRT-RTX (TensorRT 11's plugin interface, the tests' registry) loads one
    of TensorRT 10's headers without letting it register itself, then registers it through loadLibrary.
    """
    headers = headers_version(library.path)
    same_interface = headers is None or parse_version(headers)[0] == api.plugin_interface_major
    if not same_interface and not api.custom_plugins_limit:
        raise BuildFailure(
            f"the plugin library {library.path} was compiled against TensorRT {headers} headers, this is "
            f"{api.name} {api.version}: build it against this TensorRT"
        )
    if same_interface:  # its static registrations may then call this process's registry
        api.make_runtime_global()
    before = registered_creators(registry)
    already_loaded = is_loaded(library.path)
    try:
        handle = ctypes.CDLL(str(library.path), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    except OSError as error:
        raise BuildFailure(f"the plugin library {library.path} does not load: {error}") from None
    added = registered_creators(registry) - before
    if added:
        return LoadedLibrary(library, handle, tuple(sorted(added)), "registered themselves when loaded")
    if already_loaded:  # loaded earlier in this process: its creators are registered as they were then
        return LoadedLibrary(library, handle, (), "was already loaded in this process")
    if not any(hasattr(handle, entry) for entry in ("getCreators", "getPluginCreators")):
        raise BuildFailure(
            f"the plugin library {library.path} registered no plugin creator when loaded and exports neither "
            f"getCreators nor getPluginCreators: is it built against {api.name} {api.version}? "
            "(python3 -m trt_plugin_kit.engines.artifact_checks library PATH checks its links)"
        )
    registry_handle = registry.load_library(str(library.path))
    if registry_handle is None:
        raise BuildFailure(f"{api.name}'s loadLibrary refused the plugin library {library.path}")
    added = registered_creators(registry) - before
    return LoadedLibrary(
        library, (handle, registry_handle), tuple(sorted(added)), "registered by loadLibrary"
    )


def load_plugins(
    api: TensorRTApi, libraries: Sequence[PluginLibrary], required: Iterable[str]
) -> list[LoadedLibrary]:
    """Loads each library once (:func:`load_library_once`); checks that every required plugin is there.

    Keep the result alive while TensorRT may use the creators."""
    registry = api.trt.get_plugin_registry()
    loaded = []
    for library in libraries:
        result = load_library_once(api, registry, library)
        loaded.append(result)
        layers = f" (layers {', '.join(library.layers)})" if library.layers else ""
        print(f"loaded plugin library {library.path}{layers}: {len(result.creators)} creator(s) {result.how}")
    missing = [
        name for name in required if registry.get_creator(name, PLUGIN_VERSION, PLUGIN_NAMESPACE) is None
    ]
    if missing:
        raise BuildFailure(
            f"plugin(s) {', '.join(missing)} (version {PLUGIN_VERSION}, namespace '{PLUGIN_NAMESPACE}') not "
            f"registered after loading {[str(lib.path) for lib in libraries]}"
        )
    return loaded


def l2norm_network(trt, network, recipe: PrecisionRecipe) -> None:
    """l2norm through the network API: registry -> creator.create_plugin(fields) -> network.add_plugin_v3."""
    registry = trt.get_plugin_registry()
    creator = registry.get_creator("L2Normalize", PLUGIN_VERSION, PLUGIN_NAMESPACE)
    fields = trt.PluginFieldCollection(
        [
            trt.PluginField("axis", np.array([-1], dtype=np.int32), trt.PluginFieldType.INT32),
            trt.PluginField("eps", np.array([L2NORM_EPS], dtype=np.float32), trt.PluginFieldType.FLOAT32),
        ]
    )
    plugin = creator.create_plugin("l2normalize", fields, trt.TensorRTPhase.BUILD)
    if plugin is None:
        raise BuildFailure("L2Normalize creator refused the fields axis=-1, eps=1e-12")
    vector = network.add_input(L2NORM_INPUT, trt.float32, (-1, -1))
    tensor = vector
    if recipe.graph == "fp16":  # strongly typed FP16: the plugin runs on half, I/O stays FP32
        tensor = network.add_cast(tensor, trt.float16).get_output(0)
    layer = network.add_plugin_v3([tensor], [], plugin)
    layer.name = "l2normalize"
    output = layer.get_output(0)
    if recipe.graph == "fp16":
        output = network.add_cast(output, trt.float32).get_output(0)
    output.name = L2NORM_OUTPUT
    network.mark_output(output)


def _triton_type(dtype) -> str:
    return TRT_TO_TRITON.get(dtype.name, f"TRT_{dtype.name}")


def network_io_specs(network) -> list[GraphTensor]:
    """The inputs and outputs of a TensorRT network definition, as TensorRT's parser (or we) made them."""
    inputs = [network.get_input(i) for i in range(network.num_inputs)]
    outputs = [network.get_output(i) for i in range(network.num_outputs)]
    return [
        GraphTensor(tensor.name, is_input, _triton_type(tensor.dtype), tuple(tensor.shape))
        for is_input, tensors in ((True, inputs), (False, outputs))
        for tensor in tensors
    ]


def engine_io_specs(trt, engine) -> tuple[list[GraphTensor], Profile]:
    specs, profiles = [], {}
    for index in range(engine.num_io_tensors):
        name = engine.get_tensor_name(index)
        is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
        specs.append(GraphTensor(name, is_input, _triton_type(engine.get_tensor_dtype(name)),
                                tuple(engine.get_tensor_shape(name))))  # fmt: skip
        if is_input:
            low, opt, high = engine.get_tensor_profile_shape(name, 0)
            profiles[name] = (tuple(low), tuple(opt), tuple(high))
    return specs, profiles


def define_network(api: TensorRTApi, builder, job: BuildJob, logger):
    """The job's network (ONNX parser or network API), checked against config.pbtxt as TensorRT sees it."""
    network = builder.create_network(api.network_flags(job.recipe.strongly_typed))
    if job.network_api:
        l2norm_network(api.trt, network, job.recipe)
    else:
        parser = api.trt.OnnxParser(network, logger)
        if not parser.parse(job.onnx_model.SerializeToString(), str(job.onnx_source)):
            errors = "\n  ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise BuildFailure(
                f"{job.title}: {api.name}'s ONNX parser failed on {job.onnx_source.name}:\n  {errors}"
            )
    check_io_against_config(network_io_specs(network), job.config, f"{api.name} network {job.title}")
    return network


def configure_builder(api: TensorRTApi, builder, job: BuildJob, workspace_mib: int):
    """Builder config: workspace, the recipe's flags, the optimization profile (read back and checked)."""
    trt = api.trt
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_mib << 20)
    for flag in job.recipe.builder_flags:
        config.set_flag(getattr(trt.BuilderFlag, flag))
    for flag in job.recipe.cleared_flags:
        config.clear_flag(getattr(trt.BuilderFlag, flag))
    profile = builder.create_optimization_profile()
    for name, (low, opt, high) in job.profile.items():
        profile.set_shape(name, low, opt, high)
    held = {name: tuple(tuple(shape) for shape in profile.get_shape(name)) for name in job.profile}
    check_profile_covers_config(held, job.config)  # what TensorRT holds, not what we meant to give it
    config.add_optimization_profile(profile)
    return config


def timing_cache_name(tensorrt_tag: str, device_name: str | None) -> str:
    """timing_cache_<TensorRT release>_<GPU model>.bin, e.g. timing_cache_trt10.13.3.9_NVIDIA-H200.bin.

    TensorRT times every tactic (ours from getValidTactics, its own layers') on the build GPU and keeps the
    fastest per layer and shape in the cache; another GPU model or TensorRT version gets a file of its own,
    so that no build starts from timings taken elsewhere (TensorRT would discard a mismatched cache anyway,
    and with one file per machine kind a shared folder keeps every machine's)."""
    device = re.sub(r"[^A-Za-z0-9.]+", "-", device_name).strip("-") if device_name else "no-GPU"
    return f"timing_cache_{tensorrt_tag}_{device or 'GPU'}.bin"


def build_engine(
    api: TensorRTApi, job: BuildJob, logger, timing_cache_path: Path, workspace_mib: int
) -> bytes:
    """Builds the job's engine and returns the plan (serialized engine); saves the timing cache."""
    builder = api.trt.Builder(logger)
    network = define_network(api, builder, job, logger)
    config = configure_builder(api, builder, job, workspace_mib)
    with api.timing_cache_calls():
        cache_bytes = timing_cache_path.read_bytes() if timing_cache_path.is_file() else b""
        cache = config.create_timing_cache(cache_bytes)
        if not config.set_timing_cache(cache, ignore_mismatch=False):
            print(f"timing cache {timing_cache_path} does not match this TensorRT/GPU: starting a new one")
            cache = config.create_timing_cache(b"")
            config.set_timing_cache(cache, ignore_mismatch=True)
        elif cache_bytes:
            print(f"timing cache {timing_cache_path}: {len(cache_bytes)} bytes of earlier timings reused")
        else:
            print(f"timing cache {timing_cache_path}: new, every tactic is timed on this GPU")
    monitor = make_progress_monitor(api.trt)
    config.progress_monitor = monitor

    started = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BuildFailure(f"{job.title}: {api.name} could not build the engine (see the log above)")
    print(f"{job.title}: built in {time.perf_counter() - started:.1f} s")
    with api.timing_cache_calls():
        atomic_write(timing_cache_path, bytes(config.get_timing_cache().serialize()))
    return bytes(serialized)


def atomic_write(path: Path, data: bytes) -> None:
    """Writes via a temporary file + rename, so a failed build never leaves a half-written plan."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as handle:
        handle.write(data)
        temporary = Path(handle.name)
    os.chmod(temporary, 0o644)  # mkstemp makes it 0600; Triton may read it as another user
    os.replace(temporary, path)
