"""The plugin library and the engine builder against real TensorRT code: TensorRT for RTX (issue 14).

TensorRT-RTX (the ``rtx`` extra, ``tensorrt-rtx-cu13``; ``make test`` installs it) brings TensorRT's builder,
plugin registry and ONNX parser, and its builder runs without a GPU. Checked here:

1. the library of every header set loads through its registry (``load_library`` -> ``getCreators``) with every
   creator of the spec: name, version, namespace, field names and types; loaded once as Triton and
   build_engines.py load it (``dlopen``), the 11.1 library's creators register themselves, and a later
   ``load_library`` still succeeds (issue 45);
2. its ONNX parser creates our plugin from every custom node of every plugin-flavour model we ship or export
   (FP32, FP16, INT8), with no warning, and refuses a node with wrong attributes (our message names a field).
   Each node is parsed alone, in its own process: right after creating a custom plugin, TensorRT-RTX 1.7.1's
   parser aborts the process ("terminate called without an active exception"), whoever wrote the plugin;
3. build_engines.py builds the native flavour of both models with it (``--tensorrt-rtx``): parsing, the
   optimization profile from config.pbtxt, builder config, timing cache, progress monitor, the network's I/O
   checks, writing the plan.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from trt_plugin_kit.engines import tensorrt_api
from trt_plugin_kit.engines.builder import configure_builder, define_network, network_io_specs
from trt_plugin_kit.engines.cli import parse_args
from trt_plugin_kit.engines.consistency import onnx_io_specs
from trt_plugin_kit.engines.errors import BuildFailure
from trt_plugin_kit.engines.jobs import make_build_jobs
from trt_plugin_kit.engines.precision import choose_recipe
from trt_plugin_kit.interface import PLUGIN_DOMAIN, PLUGIN_NAMESPACE, PLUGIN_VERSION, PRECISIONS, REPO_ROOT
from trt_plugin_kit.interface import TENSORRT_MODELS as MODELS
from trt_plugin_kit.models import export
from trt_plugin_kit.specs import spec as plugin_spec

trt = pytest.importorskip(
    "tensorrt_rtx", reason="TensorRT-RTX is not installed: pip install -e '.[rtx]' (make test installs it)"
)

BUILD_DIR = Path(os.environ.get("BUILD_DIR", REPO_ROOT / "build"))
if not BUILD_DIR.is_absolute():
    BUILD_DIR = REPO_ROOT / BUILD_DIR
TRT_VERSIONS = os.environ.get("TRT_VERSIONS", "10.13.3 11.1").split()
CHILD = Path(__file__).with_name("tensorrt_rtx_child.py")
PARSER_ABORT = "terminate called without an active exception"  # TensorRT-RTX 1.7.1, after creating a plugin


def library(version: str) -> Path:
    path = BUILD_DIR / f"trt-{version}" / "libtrt_plugin_kit.so"
    if not path.is_file():
        pytest.fail(f"{path} is missing: `make plugins` builds it (`make test` does first)", pytrace=False)
    return path


def child(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CHILD), *args], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT
    )


def explain(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\nstdout:\n{result.stdout[-6000:]}\nstderr:\n{result.stderr[-3000:]}"


# ============================================================================ 1. the library in the registry


def plugin_models() -> dict[str, onnx.ModelProto]:
    """Every plugin-flavour model we ship (models/onnx) or export (its FP16 and INT8 variants)."""
    scales = export.load_int8_scales()
    models = {}
    for model in MODELS:
        shipped = onnx.load(export.onnx_path(model, "plugin"))
        for precision in PRECISIONS:
            if precision == "int8" and model != "mnist":
                continue  # l2norm has no INT8 layer: its INT8 build is the FP32 graph (export --variants)
            models[f"{model}_plugin_{precision}"] = export.make_variant(shipped, precision, scales)
    return models


def expected_creators() -> dict[str, dict[str, str]]:
    """The creators the library must register: ``{plugin: {field: PluginFieldType name}}``, from the specs
    (plugins/<name>/spec.yaml): every field in spec order, its type as TensorRT names it."""
    return {
        name: {field.name: field.type.upper() for field in spec.fields}
        for name, spec in plugin_spec.all_specs().items()
    }


@pytest.mark.parametrize("version", TRT_VERSIONS)
def test_library_loads_through_tensorrt_rtx_registry_with_every_creator_of_the_spec(version):
    result = child("creators", str(library(version)))
    assert result.returncode == 0, explain(result)
    report = json.loads(result.stdout)
    assert report["loaded"], explain(result)
    creators = report["creators"]
    expected = expected_creators()
    assert sorted(creators) == sorted(expected)
    for name, creator in creators.items():
        assert (creator["version"], creator["namespace"]) == (PLUGIN_VERSION, PLUGIN_NAMESPACE), name
        assert creator["interface"] == "PLUGIN CREATOR_V3ONE", name  # IPluginCreatorV3One
        fields = {field_name: field_type for field_name, field_type, _ in creator["fields"]}
        assert list(fields) == list(expected[name]), f"{name}: field names/order"
        for field_name, field_type in expected[name].items():
            assert fields[field_name] == field_type, f"{name}.{field_name}"


def test_the_library_registers_itself_when_loaded_as_triton_loads_it():
    """build_engines.py's load path (issue 45): dlopen the library once, as Triton's TensorRT backend does;
    its static registrations call TensorRT-RTX's real registry (getPluginRegistry resolved in the process)
    and every creator of the spec is there, once, before anything calls loadLibrary. Then TensorRT's own
    loadLibrary on the same library (what trtexec --dynamicPlugins or a user's load_library does) still
    succeeds: getCreators first deregisters what registered itself, so nothing is registered twice."""
    result = child("load", str(library(TRT_VERSIONS[-1])), "--then-load-library")
    assert result.returncode == 0, explain(result)
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["how"] == "registered themselves when loaded", explain(result)
    assert sorted(report["creators"]) == sorted(expected_creators())
    assert report["load_library"] is True, explain(result)
    assert sorted(report["after_load_library"]) == sorted(expected_creators())  # each once


def test_a_library_of_tensorrt_10_headers_never_registers_itself_in_tensorrt_11_s_registry():
    """TensorRT 11 (and TensorRT-RTX) removed four of TensorRT 10's IPluginRegistry virtuals: a TensorRT 10
    library registering itself there calls the wrong functions (it crashed the process in RTX's
    registerCreator). The load path reads the headers' version from the file first and lets TensorRT's
    loadLibrary register such a library instead; under TensorRT itself it refuses it."""
    ten = [version for version in TRT_VERSIONS if version.startswith("10.")]
    if not ten:
        pytest.skip("no TensorRT 10 header set in TRT_VERSIONS")
    result = child("load", str(library(ten[0])))
    assert result.returncode == 0, explain(result)
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["how"] == "registered by loadLibrary", explain(result)
    assert sorted(report["creators"]) == sorted(expected_creators())


def test_artifact_checks_library_command_loads_the_library_and_finds_every_creator():
    """The builder's check before any engine is built (docker/build_artifacts.sh), against a real registry."""
    path = library(TRT_VERSIONS[-1])
    result = subprocess.run(
        [sys.executable, "-m", "trt_plugin_kit.engines.artifact_checks", "library", str(path),
         "--creators", "--tensorrt-rtx"],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 0, explain(result)
    names = ", ".join(sorted(expected_creators()))
    assert f"{len(expected_creators())} creators registered themselves when loaded" in result.stdout
    assert f"{names} (version {PLUGIN_VERSION}, namespace {PLUGIN_NAMESPACE})" in result.stdout


# ============================================================================= 2. the parser, node by node


def one_node_model(model: onnx.ModelProto, node: onnx.NodeProto) -> onnx.ModelProto:
    """``node`` alone, its inputs as graph inputs (types and shapes from shape inference)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    known = {value.name: value for value in [*graph.input, *graph.output, *graph.value_info]}
    inputs = [known[name] for name in node.input if name]
    element_type = inputs[0].type.tensor_type.elem_type  # our plugins' outputs have their input's type
    outputs = [
        known.get(name) or helper.make_tensor_value_info(name, element_type, None) for name in node.output
    ]
    one = helper.make_graph([node], f"{graph.name}_{node.name}", inputs, outputs)
    return helper.make_model(one, opset_imports=model.opset_import, ir_version=model.ir_version)


def custom_nodes() -> list[tuple[str, onnx.ModelProto, onnx.NodeProto]]:
    return [
        (f"{name}/{node.name}", model, node)
        for name, model in plugin_models().items()
        for node in model.graph.node
        if node.domain == PLUGIN_DOMAIN
    ]


def parse_alone(
    model: onnx.ModelProto, directory: Path, version: str
) -> tuple[subprocess.CompletedProcess, list]:
    path = directory / "one_node.onnx"
    onnx.save(model, path)
    result = child("parse", str(path), str(library(version)))
    logs = [line[4:] for line in result.stdout.splitlines() if line.startswith("LOG ")]
    return result, logs


@pytest.mark.parametrize("version", TRT_VERSIONS)
@pytest.mark.parametrize("case", custom_nodes(), ids=lambda case: case[0])
def test_parser_creates_our_plugin_from_every_custom_node_without_warnings(case, version, tmp_path):
    _, model, node = case
    result, logs = parse_alone(one_node_model(model, node), tmp_path, version)
    lookup = f"{node.op_type}, plugin_version: {PLUGIN_VERSION}, plugin_namespace: {PLUGIN_NAMESPACE}"
    assert f"VERBOSE Checking if node can be treated as plugin: {lookup}" in logs, explain(result)
    assert f"VERBOSE Found registered plugin: {node.op_type}. Importing this node as a plugin." in logs
    assert f"INFO Successfully created plugin: {node.op_type}" in logs, explain(result)
    # Every field is an attribute of the node, or the parser warns "Attribute X not found in plugin node".
    warnings = [line for line in logs if line.startswith(("WARNING", "ERROR", "INTERNAL_ERROR"))]
    assert warnings == [], explain(result)
    if result.returncode == 0:  # a TensorRT-RTX without the abort: then the whole node must parse
        assert "PARSED True" in result.stdout, explain(result)
    else:  # the known abort right after creating the plugin, and nothing else (no crash of ours)
        assert result.returncode == -signal.SIGABRT and PARSER_ABORT in result.stderr, explain(result)


def bad_node(op_type: str, fields: dict, dims: list, element_type=TensorProto.FLOAT) -> onnx.ModelProto:
    # Built by hand: plugin_nodes.make_node would refuse these fields before the parser ever saw them.
    node = helper.make_node(
        op_type, ["x"], ["y"], name="bad_node", domain=PLUGIN_DOMAIN,
        plugin_version=PLUGIN_VERSION, plugin_namespace=PLUGIN_NAMESPACE, **fields,
    )  # fmt: skip
    graph = helper.make_graph(
        [node],
        "bad",
        [helper.make_tensor_value_info("x", element_type, ["batch", *dims])],
        [helper.make_tensor_value_info("y", element_type, None)],
    )
    opsets = [helper.make_opsetid("", export.OPSET), helper.make_opsetid(PLUGIN_DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


POOL = {"mode": "max", "kernel": [2, 2], "stride": [2, 2], "padding": [0, 0], "count_include_pad": 0,
        "input_scale": 1.0, "output_scale": 1.0}  # fmt: skip
BAD_NODES = {
    "pool-mode": (bad_node("Pool", POOL | {"mode": "median"}, [2, 4, 4]), "Pool", "field 'mode'"),
    "pool-kernel-type": (
        bad_node("Pool", POOL | {"kernel": [2.0, 2.0]}, [2, 4, 4]),
        "Pool",
        "field 'kernel'",
    ),
    "fc-num_outputs": (
        bad_node("FullyConnected", {"weights": [1.0] * 4, "bias": [0.0, 0.0], "num_outputs": 0}, [2]),
        "FullyConnected",
        "num_outputs",
    ),
    "fc-weights": (
        bad_node("FullyConnected", {"weights": [1.0] * 5, "bias": [0.0, 0.0], "num_outputs": 2}, [2]),
        "FullyConnected",
        "weights",
    ),
    "prelu-slopes-missing": (bad_node("PReLU", {}, [2]), "PReLU", "field 'slopes'"),
    "l2normalize-axis": (bad_node("L2Normalize", {"axis": 9, "eps": 1e-12}, [2]), "L2Normalize", "axis"),
    "l2normalize-eps": (bad_node("L2Normalize", {"axis": -1, "eps": -1.0}, [2]), "L2Normalize", "eps"),
    "leakyrelu-nan": (
        bad_node("LeakyReLU", {"negative_slope": float("nan")}, [2]),
        "LeakyReLU",
        "field 'negative_slope'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_NODES))
def test_parser_refuses_wrong_attributes_with_our_message_naming_the_field(case, tmp_path):
    """Our creator refuses and says why; the parser refuses the node.

    TensorRT hands the library an ILoggerFinder (setLoggerFinder) for its messages, but TensorRT-RTX 1.7.1's
    finder returns no logger (findLogger() is null when the parser creates plugins), so the library writes
    the message to stderr, its documented fallback. The text must reach one of the two.
    """
    model, plugin, field = BAD_NODES[case]
    result, logs = parse_alone(model, tmp_path, TRT_VERSIONS[0])
    assert result.returncode == 0 and "PARSED False" in result.stdout, explain(result)
    assert f"PARSER_ERROR In node 0 with name: bad_node and operator: {plugin}" in result.stdout
    ours = [line for line in [*logs, *result.stderr.splitlines()] if f"[trt_plugin_kit] {plugin}::" in line]
    assert ours and field in ours[0], explain(result)


# ====================================================================== 3. build_engines.py's TensorRT code


@pytest.fixture(scope="module")
def api():
    return tensorrt_api.load(rtx=True)


def test_seam_names_each_difference_of_tensorrt_rtx(api):
    assert api.name == "TensorRT-RTX" and api.version == trt.__version__ and api.builds_without_gpu
    assert api.rules_major == 11 and api.always_strongly_typed and api.network_flags(True) == 0
    assert api.custom_plugins_limit and not hasattr(trt.INetworkDefinition, "add_plugin_v3")
    assert "FP16" not in trt.BuilderFlag.__members__ and "INT8" not in trt.BuilderFlag.__members__
    for model in MODELS:  # every flag a recipe sets or clears exists in TensorRT-RTX
        for precision in PRECISIONS:
            recipe = choose_recipe(precision, api.rules_major, model)
            assert recipe.strongly_typed
            for flag in (*recipe.builder_flags, *recipe.cleared_flags):
                assert flag in trt.BuilderFlag.__members__, (model, precision, flag)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_build_engines_builds_the_native_flavour_with_tensorrt_rtx(precision, tmp_path, api):
    engines, caches = tmp_path / "engines", tmp_path / "caches"
    plugins = library(TRT_VERSIONS[-1])  # TensorRT 11's headers: TensorRT-RTX's plugin interfaces
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "build_engines.py"), "--tensorrt-rtx", "--precision", precision,
         "--engine-dir", str(engines), "--timing-cache-dir", str(caches), "--plugin-library", str(plugins)],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 0, explain(result)
    assert f"TensorRT-RTX {api.version} on no GPU (not needed to build)" in result.stdout
    registered = f"{len(expected_creators())} creator(s) registered themselves when loaded"
    assert f"loaded plugin library {plugins}: {registered}" in result.stdout
    # One cache per TensorRT release and GPU model, its name says which (issue 42 item 4).
    cache = caches / f"timing_cache_rtx{api.version}_no-GPU.bin"
    assert f"timing cache {cache}: new, every tactic is timed on this GPU" in result.stdout
    assert "Building engine" in result.stderr and "100%" in result.stderr  # the progress monitor's bars
    assert cache.is_file()  # TensorRT-RTX's timing cache is a no-op, but the calls ran and wrote it
    runtime = trt.Runtime(trt.Logger(trt.Logger.ERROR))
    for model in MODELS:
        plan = engines / f"{model}_native_{precision}.plan"
        assert f"{model} native {precision}: wrote {plan}" in result.stdout, explain(result)
        assert "network I/O matches" in result.stdout
        # No GPU here to deserialize it, but TensorRT-RTX reads the header: its own well-formed engine.
        validity, diagnostics = runtime.get_engine_validity(plan.read_bytes()[: runtime.engine_header_size])
        bad = int(trt.EngineInvalidityDiagnostics.MALFORMED_ENGINE) | int(
            trt.EngineInvalidityDiagnostics.VERSION_MISMATCH
        )
        assert diagnostics & bad == 0, (model, validity, diagnostics)


def test_the_network_tensorrt_rtx_parses_is_checked_against_config_pbtxt(api, tmp_path):
    """TensorRT's view of each native graph equals ours, and a config that differs from it is refused."""
    logger = trt.Logger(trt.Logger.ERROR)
    jobs = make_build_jobs(parse_args(["--tensorrt-rtx", "--engine-dir", str(tmp_path)]), api.rules_major)
    for job in jobs:
        builder = trt.Builder(logger)
        network = define_network(api, builder, job, logger)
        assert network_io_specs(network) == onnx_io_specs(job.onnx_model), job.title
        configure_builder(api, builder, job, workspace_mib=64)
    mnist, l2norm = jobs
    output = l2norm.config.outputs[0]
    l2norm.config = replace(l2norm.config, outputs=(replace(output, dims=(64,)),))
    with pytest.raises(
        BuildFailure, match=r"TensorRT-RTX network l2norm native fp32 does not match"
    ) as error:
        define_network(api, trt.Builder(logger), l2norm, logger)
    assert f"'{output.name}': the TensorRT-RTX network l2norm native fp32 has shape [-1, -1]" in str(
        error.value
    )
    half = mnist.config.max_batch_size // 2
    mnist.profile = {name: (low, opt, (half, *high[1:])) for name, (low, opt, high) in mnist.profile.items()}
    with pytest.raises(BuildFailure, match=rf"batch range 1..{half} does not cover 1..max_batch_size="):
        configure_builder(api, trt.Builder(logger), mnist, workspace_mib=64)


def test_dry_run_with_tensorrt_rtx_lists_strongly_typed_native_jobs(api, tmp_path):
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "build_engines.py"), "--dry-run", "--tensorrt-rtx",
         "--precision", "fp16", "--engine-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 0, explain(result)
    assert f"build jobs for TensorRT-RTX {api.version}" in result.stdout
    assert result.stdout.count("network        strongly typed, builder flags none") == len(MODELS)
    assert "FP16" not in result.stdout.replace("FP16 graph", "")  # no FP16 builder flag in TensorRT-RTX
    for model in MODELS:
        assert str(tmp_path / f"{model}_native_fp16.plan") in result.stdout
