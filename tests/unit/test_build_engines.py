"""build_engines.py without TensorRT: arguments, plugin config loading, precision recipes, config.pbtxt
parsing and consistency checks, the dry run, and the clear error (exit code 3) where TensorRT is missing."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import onnx
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from trt_plugin_kit.engines.builder import atomic_write
from trt_plugin_kit.engines.cli import DEFAULT_ENGINE_DIR, parse_args
from trt_plugin_kit.engines.consistency import (
    GraphTensor,
    check_io_against_config,
    check_profile_covers_config,
    onnx_io_specs,
    profile_shapes,
)
from trt_plugin_kit.engines.errors import (
    EXIT_ENVIRONMENT,
    EXIT_USAGE,
    BuildFailure,
    EnvironmentMissing,
    UsageError,
)
from trt_plugin_kit.engines.jobs import describe, make_build_jobs, selected
from trt_plugin_kit.engines.plugin_config import (
    collect_plugin_libraries,
    default_plugin_library,
    load_plugin_config,
)
from trt_plugin_kit.engines.precision import choose_recipe, parse_trt_major
from trt_plugin_kit.engines.progress import make_progress_monitor
from trt_plugin_kit.engines.verify import compare_with_reference
from trt_plugin_kit.interface import FLAVOURS, PLUGIN_LIBRARY_NAME, PRECISIONS, REPO_ROOT
from trt_plugin_kit.interface import TENSORRT_MODELS as MODELS
from trt_plugin_kit.models import export
from trt_plugin_kit.tritonserver.config import (
    ModelConfigError,
    TensorConfig,
    WarmupSample,
    load_model_config,
    model_config_from_text,
)

SCRIPT = REPO_ROOT / "build_engines.py"

MNIST_CONFIG = """
name: "mnist"
platform: "tensorrt_plan"
max_batch_size: 32
input [ { name: "image" data_type: TYPE_FP32 dims: [ 1, 28, 28 ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] } ]
"""
L2NORM_CONFIG = """
name: "l2norm"
platform: "tensorrt_plan"
max_batch_size: 16
input [ { name: "vector", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "normalized", data_type: TYPE_FP32, dims: [ -1 ] } ]
model_warmup [ { name: "w" batch_size: 4 inputs { key: "vector" value { data_type: TYPE_FP32 dims: [ 64 ]
  random_data: true } } } ]
"""


@pytest.fixture
def repository(tmp_path):
    """A model repository of our own with TensorRT configs (the project's configs belong to serving)."""
    root = tmp_path / "model_repository"
    for name, text in (("mnist", MNIST_CONFIG), ("l2norm", L2NORM_CONFIG)):
        (root / name).mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(text)
    return root


@pytest.fixture
def fake_library(tmp_path):
    """A file standing in for libtrt_plugin_kit.so where only its existence is checked (no loading here)."""
    library = tmp_path / "plugins" / "libtrt_plugin_kit.so"
    library.parent.mkdir()
    library.write_bytes(b"\x7fELF")
    return library


def run_script(*arguments: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
    )


# ============================================================================================ arguments


def test_defaults_build_both_models_fp32_plugin_flavour_into_the_repository():
    args = parse_args([])
    assert (args.model, args.flavour, args.precision) == ("all", "plugin", "fp32")
    assert args.model_repository == REPO_ROOT / "model_repository"
    assert args.plugin_library == [] and args.plugin_config is None and not args.verify
    assert selected(args.model, MODELS) == ("mnist", "l2norm")
    assert selected("native", FLAVOURS) == ("native",)


def test_argument_parsing():
    args = parse_args(
        ["--model", "mnist", "--precision", "int8", "--plugin-library", "a.so", "--plugin-library", "b.so"]
        + ["--flavour", "both", "--verify", "--opt-batch", "8", "--timing-cache", "cache.bin"]
    )
    assert args.model == "mnist" and args.precision == "int8" and args.flavour == "both"
    assert args.plugin_library == [Path("a.so"), Path("b.so")]
    assert args.verify and args.opt_batch == 8 and args.timing_cache == Path("cache.bin")


@pytest.mark.parametrize(
    "arguments,message",
    [
        (["--precision", "int4"], "invalid choice"),
        (["--dim-range", "1:8"], "MIN:OPT:MAX"),
        (["--dim-range", "8:4:16"], "MIN <= OPT <= MAX"),
        (["--opt-batch", "0"], "positive"),
        (["--network-api", "--model", "mnist"], "implemented for l2norm"),
        (["--network-api", "--flavour", "native"], "plugin flavour only"),
        (["--tensorrt-rtx", "--flavour", "plugin"], "native flavour only: TensorRT-RTX's ONNX parser aborts"),
        (["--tensorrt-rtx", "--flavour", "both"], "no add_plugin_v3"),
        (["--tensorrt-rtx", "--verify"], "not verified here"),
    ],
)
def test_bad_arguments_exit_2(arguments, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(arguments)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


# ======================================================================================== plugin config


def test_plugin_config_json_yaml_and_driveworks_layouts(tmp_path, fake_library):
    relative = Path("..") / "plugins" / fake_library.name
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "ours.json").write_text(json.dumps({"plugins": [str(relative)]}))
    (configs / "ours.yaml").write_text(f"plugins:\n  - path: {relative}\n    layers: [pool1, fc1]\n")
    (configs / "list.yml").write_text(f"- {fake_library}\n")
    (configs / "driveworks.json").write_text(
        json.dumps({"__comment": "library -> layers", str(fake_library): ["pool1", "pool2", "fc1", "prelu"]})
    )
    for name in ("ours.json", "ours.yaml", "list.yml", "driveworks.json"):
        (library,) = load_plugin_config(configs / name)
        assert library.path.resolve() == fake_library.resolve(), name  # relative to the config file
        assert library.source == str(configs / name)
    assert load_plugin_config(configs / "ours.yaml")[0].layers == ("pool1", "fc1")
    assert load_plugin_config(configs / "driveworks.json")[0].layers == ("pool1", "pool2", "fc1", "prelu")


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("broken.json", "{plugins: [", "not valid JSON"),
        ("broken.yaml", "plugins: [a.so\n  b: c", "not valid YAML"),
        ("empty.json", "{}", "lists no plugin library"),
        ("scalar.json", "42", "expected a list"),
        ("plugins.json", '{"plugins": "a.so"}', "'plugins' must be a list"),
        ("entry.json", '{"plugins": [{"file": "a.so"}]}', "entries are paths"),
        ("blank.json", '{"plugins": [""]}', "non-empty string"),
        ("layers.json", '{"a.so": "pool1"}', "must be a list of names"),
    ],
)
def test_bad_plugin_configs(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(UsageError, match=message):
        load_plugin_config(path)


def test_plugin_libraries_must_exist_and_are_deduplicated(tmp_path, fake_library):
    with pytest.raises(UsageError, match="does not exist"):
        load_plugin_config(tmp_path / "missing.json")
    config = tmp_path / "plugins.json"
    config.write_text(json.dumps({"plugins": ["nowhere/libx.so"]}))
    with pytest.raises(UsageError, match=r"nowhere/libx.so \(from .*plugins.json\) does not exist"):
        collect_plugin_libraries([], config)
    config.write_text(json.dumps({"plugins": [str(fake_library)]}))
    libraries = collect_plugin_libraries(
        [fake_library, fake_library.parent / "." / fake_library.name], config
    )
    assert [lib.path.resolve() for lib in libraries] == [fake_library.resolve()]
    assert libraries[0].source == "command line"


def test_default_plugin_library_location(tmp_path):
    build = tmp_path / "build"
    (build / "trt-10.13.3").mkdir(parents=True)
    (build / "trt-10.13.3" / PLUGIN_LIBRARY_NAME).write_bytes(b"")
    assert default_plugin_library("10.13.3.9", build) == build / "trt-10.13.3" / PLUGIN_LIBRARY_NAME
    with pytest.raises(UsageError, match="none built for TensorRT 11.1.0"):
        default_plugin_library("11.1.0", build)


# ===================================================================================== precision recipes


def test_precision_recipes_tensorrt_10():
    fp32 = choose_recipe("fp32", 10, "mnist")
    assert (fp32.graph, fp32.strongly_typed, fp32.builder_flags, fp32.cleared_flags) == (
        "fp32",
        False,
        (),
        ("TF32",),
    )
    fp16 = choose_recipe("fp16", 10, "mnist")
    assert (fp16.graph, fp16.strongly_typed, fp16.builder_flags) == ("fp32", False, ("FP16",))
    forced = choose_recipe("fp16", 10, "mnist", strongly_typed=True)
    assert (forced.graph, forced.strongly_typed, forced.builder_flags) == ("fp16", True, ())
    int8 = choose_recipe("int8", 10, "mnist")
    assert (int8.graph, int8.strongly_typed, int8.builder_flags) == ("int8", True, ())


def test_precision_recipes_tensorrt_11_are_strongly_typed_without_precision_flags():
    for precision in PRECISIONS:
        recipe = choose_recipe(precision, 11, "mnist")
        assert recipe.strongly_typed and recipe.graph == precision
        assert not {"FP16", "INT8"} & set(recipe.builder_flags)  # those flags do not exist in TensorRT 11


def test_precision_recipe_l2norm_int8_is_fp32_and_old_tensorrt_is_refused():
    recipe = choose_recipe("int8", 10, "l2norm")
    assert recipe.graph == "fp32" and "no INT8 layer" in recipe.note
    with pytest.raises(EnvironmentMissing, match="IPluginV3"):
        choose_recipe("fp32", 8, "mnist")
    with pytest.raises(UsageError, match="precision"):
        choose_recipe("fp8", 10, "mnist")
    assert parse_trt_major("10.13.3.9") == 10
    with pytest.raises(UsageError):
        parse_trt_major("ten")


# ======================================================================================== config.pbtxt


def _project_configs() -> list[Path]:
    root = REPO_ROOT / "model_repository"
    return sorted([*root.glob("*/config.pbtxt"), *root.glob("*/configs/*.pbtxt")])


@pytest.mark.parametrize("path", _project_configs(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_config_reader_agrees_with_tritons_protobuf(path):
    """Our ModelConfig vs Triton's ModelConfig message itself, on every config of the repository."""
    ours = load_model_config(path)
    theirs = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
    assert ours.name == theirs.name and ours.platform == theirs.platform and ours.backend == theirs.backend
    assert ours.max_batch_size == theirs.max_batch_size
    for mine, official in ((ours.inputs, theirs.input), (ours.outputs, theirs.output)):
        assert [t.name for t in mine] == [t.name for t in official]
        assert [t.data_type for t in mine] == [model_config_pb2.DataType.Name(t.data_type) for t in official]
        assert [list(t.dims) for t in mine] == [list(t.dims) for t in official]
        assert [t.reshape for t in mine] == [
            tuple(t.reshape.shape) if t.HasField("reshape") else None for t in official
        ]
    assert [(w.name, w.batch_size) for w in ours.warmup] == [
        (w.name, w.batch_size) for w in theirs.model_warmup
    ]
    for mine, official in zip(ours.warmup, theirs.model_warmup, strict=True):
        assert mine.input_dims == {key: tuple(value.dims) for key, value in official.inputs.items()}


def test_config_reader_syntax():
    """The protobuf text syntax Triton accepts: comments, quotes, adjacent strings, separators, <>, hex."""
    config = model_config_from_text(
        """
        # comment
        name: "a\\"b"  platform: 'tensorrt' '_plan'
        max_batch_size: 0x10;
        input < name: "x", data_type: TYPE_FP16, dims: [ -1, 3 ] reshape { shape: [ 3 ] } >
        output [ { name: "y" data_type: TYPE_FP32 dims: 3 dims: 4 } ]
        instance_group [ { count: 2, kind: KIND_GPU }, { kind: KIND_CPU } ]
        parameters { key: "k" value: { string_value: "v" } }
        model_warmup [ { name: "w" batch_size: 2
          inputs { key: "x" value { data_type: TYPE_FP16 dims: [ 3 ] zero_data: true } } } ]
        """
    )
    assert config.name == 'a"b' and config.platform == "tensorrt_plan" and config.is_tensorrt
    assert config.max_batch_size == 16
    assert config.inputs == (TensorConfig("x", "TYPE_FP16", (-1, 3), (3,)),)
    assert config.inputs[0].model_dims == (3,) and config.outputs[0].dims == (3, 4)
    assert config.warmup == (WarmupSample("w", 2, {"x": (3,)}),)


@pytest.mark.parametrize(
    "text,message",
    [
        ('name: "x"\ninput [ { name: "a" ', 'm/config.pbtxt:2:17 : Expected "}"'),
        ("name: @", "Expected string but found: '@'"),
        ('input [ { name: "a" dims: [ 1 2 ] } ]', 'Expected ","'),
        ("{ x: 1 }", "Expected identifier or number"),
        ("max_batch_size: 1 max_batch_size: 2", 'should not have multiple "max_batch_size" fields'),
        ("input [ { data_type: TYPE_FP32 } ]", "needs a name"),
        ('max_batch_size: "many"', "Couldn't parse integer"),
        ("flag: true", 'has no field named "flag"'),  # Triton refuses unknown fields
        ('input [ { name: "a" data_type: TYPE_FLOAT } ]', "no value named TYPE_FLOAT"),
    ],
)
def test_config_reader_errors_name_the_problem(text, message):
    with pytest.raises(ModelConfigError, match=message):
        model_config_from_text(text, Path("m/config.pbtxt"))


def test_missing_config_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="model configuration not found"):
        load_model_config(tmp_path / "config.pbtxt")


# ================================================================================ consistency checks


def _specs(image_shape=(-1, 1, 28, 28), image_type="TYPE_FP32", output=("probabilities", (-1, 10))):
    return [
        GraphTensor("image", True, image_type, tuple(image_shape)),
        GraphTensor(output[0], False, "TYPE_FP32", tuple(output[1])),
    ]


def test_io_check_accepts_the_committed_onnx_graphs(repository):
    for model in MODELS:
        config = load_model_config(repository / model / "config.pbtxt")
        for flavour in FLAVOURS:
            graph = onnx.load(export.onnx_path(model, flavour))
            check_io_against_config(onnx_io_specs(graph), config, "graph")
            check_io_against_config(onnx_io_specs(export.to_fp16(graph)), config, "fp16 graph")


@pytest.mark.parametrize(
    "specs,message",
    [
        (_specs(image_shape=(-1, 28, 28)), r"shape \[-1, 28, 28\], config.pbtxt needs \[-1, 1, 28, 28\]"),
        (_specs(image_shape=(32, 1, 28, 28)), r"shape \[32, 1, 28, 28\]"),
        (_specs(image_type="TYPE_FP16"), "config.pbtxt says TYPE_FP32, the engine has TYPE_FP16"),
        (_specs(output=("prob", (-1, 10))), "output 'probabilities' is not an output"),
        (_specs()[:1], "output 'probabilities' is not an output"),
        (_specs() + [GraphTensor("extra", False, "TYPE_FP32", (-1,))], "output 'extra' that config.pbtxt"),
    ],
)
def test_io_check_reports_mismatches(repository, specs, message):
    config = load_model_config(repository / "mnist" / "config.pbtxt")
    with pytest.raises(BuildFailure, match=message) as error:
        check_io_against_config(specs, config, "engine")
    assert "config.pbtxt" in str(error.value)


def test_io_check_honours_reshape_and_no_batching():
    config = model_config_from_text(
        'name: "m" platform: "tensorrt_plan" max_batch_size: 0 '
        'input [ { name: "image" data_type: TYPE_FP32 dims: [ 784 ] reshape: { shape: [ 1, 1, 28, 28 ] } } ] '
        'output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 1, 10 ] } ]'
    )
    check_io_against_config(
        _specs(image_shape=(1, 1, 28, 28), output=("probabilities", (1, 10))), config, "e"
    )
    with pytest.raises(BuildFailure, match="784"):
        check_io_against_config(_specs(image_shape=(784,), output=("probabilities", (1, 10))), config, "e")


def test_profiles_follow_max_batch_size_and_cover_warmup(repository):
    l2norm = load_model_config(repository / "l2norm" / "config.pbtxt")
    shapes = profile_shapes("l2norm", l2norm)
    assert shapes == {"vector": ((1, 1), (16, 512), (16, 4096))}
    assert profile_shapes("l2norm", l2norm, opt_batch=4)["vector"][1] == (4, 512)
    check_profile_covers_config(shapes, l2norm)
    mnist = load_model_config(repository / "mnist" / "config.pbtxt")
    assert profile_shapes("mnist", mnist) == {"image": ((1, 1, 28, 28), (32, 1, 28, 28), (32, 1, 28, 28))}
    with pytest.raises(BuildFailure, match="does not cover 1..max_batch_size=16"):
        check_profile_covers_config({"vector": ((1, 1), (8, 512), (8, 4096))}, l2norm)
    with pytest.raises(BuildFailure, match="warmup 'w' sends 'vector' \\[4, 64\\], outside the profile"):
        check_profile_covers_config({"vector": ((1, 128), (16, 512), (16, 4096))}, l2norm)
    unbatched = model_config_from_text(
        'name: "m" platform: "tensorrt_plan" input [ { name: "x" dims: [ 3 ] } ]'
    )
    with pytest.raises(UsageError, match="max_batch_size must be > 0"):
        profile_shapes("mnist", unbatched)


def test_project_configs_are_buildable():
    """The serving configs in model_repository/ (whoever edits them) must stay buildable by this script."""
    args = parse_args(["--flavour", "both"])
    for precision in PRECISIONS:
        args.precision = precision
        for trt_major in (10, 11):
            jobs = make_build_jobs(args, trt_major)
            assert [(j.model, j.flavour) for j in jobs] == [(m, f) for m in MODELS for f in FLAVOURS]


# ============================================================================================ build jobs


def test_build_jobs(repository, tmp_path):
    args = parse_args(["--model-repository", str(repository), "--flavour", "both", "--precision", "int8"])
    jobs = make_build_jobs(args, trt_major=10)
    by_key = {(job.model, job.flavour): job for job in jobs}
    mnist_plugin = by_key[("mnist", "plugin")]
    assert mnist_plugin.output == repository / "mnist" / "1" / "model.plan"
    assert by_key[("mnist", "native")].output == DEFAULT_ENGINE_DIR / "mnist_native_int8.plan"
    assert mnist_plugin.required_plugins() == ["FullyConnected", "PReLU", "Pool"]
    assert by_key[("mnist", "native")].required_plugins() == []
    assert by_key[("l2norm", "plugin")].required_plugins() == ["L2Normalize"]
    assert "QuantizeLinear" in [node.op_type for node in mnist_plugin.onnx_model.graph.node]
    assert by_key[("l2norm", "plugin")].recipe.graph == "fp32"
    text = describe(mnist_plugin)
    assert "strongly typed" in text and "[1, 1, 28, 28]..[32, 1, 28, 28]..[32, 1, 28, 28]" in text
    l2norm_api = make_build_jobs(parse_args(["--model-repository", str(repository), "--network-api"]), 11)
    assert [job.network_api for job in l2norm_api] == [False, True]
    assert "network API" in describe(l2norm_api[1])


def test_build_jobs_refuse_bad_repositories(repository, tmp_path):
    args = parse_args(["--model-repository", str(repository), "--model", "mnist"])
    (repository / "mnist" / "config.pbtxt").write_text(
        MNIST_CONFIG.replace('"tensorrt_plan"', '"onnxruntime_onnx"')
    )
    with pytest.raises(UsageError, match="not a TensorRT model configuration"):
        make_build_jobs(args, 10)
    (repository / "mnist" / "config.pbtxt").write_text(MNIST_CONFIG.replace('"image"', '"pixels"'))
    with pytest.raises(BuildFailure, match="input 'pixels' is not an input of the ONNX graph"):
        make_build_jobs(args, 10)
    (repository / "mnist" / "config.pbtxt").write_text(MNIST_CONFIG.replace('name: "mnist"', 'name: "lenet"'))
    with pytest.raises(UsageError, match="names the model 'lenet'"):
        make_build_jobs(args, 10)
    (repository / "mnist" / "config.pbtxt").unlink()
    with pytest.raises(UsageError, match="model configuration not found"):
        make_build_jobs(args, 10)
    args = parse_args(
        ["--model-repository", str(repository), "--model", "l2norm", "--onnx-dir", str(tmp_path)]
    )
    with pytest.raises(UsageError, match="l2norm_plugin.onnx not found"):
        make_build_jobs(args, 10)
    args = parse_args(["--model-repository", str(repository), "--precision", "int8"])
    args.int8_scales = tmp_path / "none.json"
    (repository / "mnist" / "config.pbtxt").write_text(MNIST_CONFIG)
    with pytest.raises(UsageError, match="calibrated scales"):
        make_build_jobs(args, 10)


def test_verify_comparison_rules():
    import numpy as np

    reference = np.eye(10, dtype=np.float32)[np.arange(100) % 10] * 0.9 + 0.01
    ok, line = compare_with_reference(reference + 5e-5, reference, "fp32")
    assert ok and "same prediction 100.00%" in line
    ok, _ = compare_with_reference(reference + 5e-4, reference, "fp32")
    assert not ok
    assert compare_with_reference(reference + 5e-4, reference, "fp16")[0]
    flipped = reference.copy()
    flipped[0] = np.roll(flipped[0], 1)
    assert not compare_with_reference(flipped, reference, "int8")[0]  # max |diff| 0.9 > 0.2


def test_atomic_write_replaces_whole_files(tmp_path):
    target = tmp_path / "deep" / "model.plan"
    atomic_write(target, b"first")
    atomic_write(target, b"second")
    assert target.read_bytes() == b"second"
    assert [p.name for p in target.parent.iterdir()] == ["model.plan"]  # no temporary file left behind


def test_progress_monitor_bookkeeping():
    """The tqdm bars of the IProgressMonitor subclass, driven through TensorRT's callback protocol.

    TensorRT is not installed here: a plain base class stands in for trt.IProgressMonitor, the method
    names and arguments are the ones TensorRT calls.
    """
    monitor = make_progress_monitor(types.SimpleNamespace(IProgressMonitor=object))
    monitor.phase_start("Building engine", None, 3)
    monitor.phase_start("Tactic selection", "Building engine", 5)
    assert monitor.step_complete("Tactic selection", 0) is True
    monitor.step_complete("Tactic selection", 3)
    assert monitor.bars["Tactic selection"][0].n == 4
    assert monitor.bars["Tactic selection"][0].desc.startswith("  ")  # nested one level
    monitor.phase_finish("Tactic selection")
    monitor.step_complete("Building engine", 2)
    monitor.phase_finish("Building engine")
    assert monitor.bars == {}
    monitor.phase_finish("never started")  # tolerated


# ======================================================================================= command line


def test_without_tensorrt_one_clear_message_and_exit_3(repository, fake_library):
    result = run_script("--model-repository", str(repository), "--plugin-library", str(fake_library))
    assert result.returncode == EXIT_ENVIRONMENT, result.stderr
    assert "TensorRT" in result.stderr and "NVIDIA GPU" in result.stderr
    assert "nvcr.io/nvidia/tensorrt" in result.stderr and "docker compose" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (repository / "mnist" / "1" / "model.plan").exists()


def test_bad_input_is_reported_before_needing_tensorrt(repository, tmp_path):
    result = run_script("--model-repository", str(repository), "--plugin-library", str(tmp_path / "nope.so"))
    assert result.returncode == EXIT_USAGE
    assert "nope.so (from command line) does not exist" in result.stderr and "Traceback" not in result.stderr
    bad = tmp_path / "plugins.yaml"
    bad.write_text("plugins: [unclosed")
    result = run_script("--plugin-config", str(bad))
    assert result.returncode == EXIT_USAGE and "not valid YAML" in result.stderr


def test_dry_run_lists_every_job_without_tensorrt(repository, fake_library):
    result = run_script(
        "--dry-run", "--model-repository", str(repository), "--flavour", "both", "--precision", "fp16",
        "--trt-version", "11.1", "--plugin-library", str(fake_library),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "build jobs for TensorRT 11.1" in result.stdout
    assert result.stdout.count("network        strongly typed") == 4 and "FP16 graph" in result.stdout
    assert str(repository / "mnist" / "1" / "model.plan") in result.stdout
    assert f"plugin library {fake_library}" in result.stdout
    assert not (repository / "mnist" / "1" / "model.plan").exists()
    result = run_script("--dry-run", "--model-repository", str(repository), "--precision", "fp16")
    assert "builder flags +FP16" in result.stdout  # TensorRT 10 (assumed by default)
