"""Static checks of model_repository/ that need no server: both variants declare the same interface.

The TensorRT configurations cannot load on the CI machines (no GPU), so what the end-to-end tests prove for
the CPU variant is tied here to the default configurations: same names, tensors, shapes, labels and
batching limits, engines and warm-up where the issue asks for them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

from trt_plugin_kit.interface import (
    CPU_MODEL_CONFIG_NAME,
    MODEL_NAMES,
    MODEL_ONNX_FILE,
    MODEL_REPOSITORY,
    PLUGIN_ONNX_BACKEND,
    TENSORRT_MODELS,
    repository_models,
)
from trt_plugin_kit.models.export import L2NORM_MAX_DIM
from trt_plugin_kit.scaffold import model as served_model
from trt_plugin_kit.serving.plugin_graph import PluginGraph, interface_mismatches
from trt_plugin_kit.specs import spec as plugin_spec

ModelConfig = model_config_pb2.ModelConfig
InstanceGroup = model_config_pb2.ModelInstanceGroup


def load(path: Path) -> ModelConfig:
    return text_format.Parse(path.read_text(), ModelConfig())


def configurations(model: str, repository: Path = MODEL_REPOSITORY) -> dict[str, ModelConfig]:
    """{"default": config.pbtxt, "cpu": configs/cpu.pbtxt (when present)}."""
    folder = repository / model
    found = {"default": load(folder / "config.pbtxt")}
    custom = folder / "configs" / f"{CPU_MODEL_CONFIG_NAME}.pbtxt"
    if custom.is_file():
        found["cpu"] = load(custom)
    return found


def _tensors(items) -> tuple:
    return tuple(
        sorted(
            (t.name, t.data_type, tuple(t.dims), getattr(t, "format", 0), getattr(t, "label_filename", ""))
            for t in items
        )
    )


def interface(config: ModelConfig) -> tuple:
    return config.name, config.max_batch_size, _tensors(config.input), _tensors(config.output)


# Models a user added (new-plugin's one-node models, their own), served on the CPU by the plugin_onnx backend.
ADDED_MODELS = [name for name in repository_models() if name not in MODEL_NAMES]


def test_repository_holds_the_public_models_and_only_stand_in_models_besides():
    folders = sorted(p.name for p in MODEL_REPOSITORY.iterdir() if p.is_dir())
    assert folders == sorted([*MODEL_NAMES, *ADDED_MODELS])
    for name in ADDED_MODELS:
        assert configurations(name)["cpu"].backend == PLUGIN_ONNX_BACKEND, name


# Without added models in the tree the check runs on one new-plugin writes here (LeakyReLU's): it always runs.
SCAFFOLDED_HERE = "leaky_relu (written by the test)"


@pytest.mark.parametrize("model", ADDED_MODELS or [SCAFFOLDED_HERE])
def test_an_added_model_is_an_engine_on_gpu_and_its_onnx_file_on_cpu(model, tmp_path):
    """What new-plugin writes, and what a user's own model folder must be: TensorRT by default, the stand-in
    on the CPU, the same interface, which is the ONNX graph's (checked as the stand-in checks it at load)."""
    repository = MODEL_REPOSITORY
    if model == SCAFFOLDED_HERE:
        repository, model = tmp_path, served_model.create(plugin_spec.get("LeakyReLU"), False, tmp_path).name
    configs = configurations(model, repository)
    assert configs["default"].platform == "tensorrt_plan"
    assert interface(configs["default"]) == interface(configs["cpu"])
    onnx_file = dict(configs["cpu"].parameters).get("onnx_model")
    path = repository / model / (onnx_file.string_value if onnx_file else MODEL_ONNX_FILE)
    as_json = json.loads(json_format.MessageToJson(configs["cpu"], preserving_proto_field_name=True))
    assert interface_mismatches(PluginGraph(path), as_json) == []


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_variants_share_name_tensors_and_batch_limit(model):
    configs = configurations(model)
    for variant, config in configs.items():
        assert config.name == model, variant
        assert config.max_batch_size > 0, variant
    assert len({interface(config) for config in configs.values()}) == 1, "variants disagree on the interface"


@pytest.mark.parametrize("model", TENSORRT_MODELS)
def test_engine_models_default_to_tensorrt_and_fall_back_to_python_on_cpu(model):
    configs = configurations(model)
    assert configs["default"].platform == "tensorrt_plan"
    assert configs["cpu"].backend == "python"
    assert (MODEL_REPOSITORY / model / "1" / "model.py").is_file()
    for variant, config in configs.items():
        assert config.model_warmup, f"{model} {variant}: no warm-up"
        for warmup in config.model_warmup:
            assert 0 < warmup.batch_size <= config.max_batch_size
            assert set(warmup.inputs) == {t.name for t in config.input}


@pytest.mark.parametrize("model", [*MODEL_NAMES, *ADDED_MODELS])
def test_batching_is_configured(model):
    for variant, config in configurations(model).items():
        if config.platform == "ensemble":
            continue  # the steps batch
        assert config.HasField("dynamic_batching"), f"{model} {variant}"
        preferred = list(config.dynamic_batching.preferred_batch_size)
        assert preferred and max(preferred) <= config.max_batch_size
        assert 0 < config.dynamic_batching.max_queue_delay_microseconds <= 1000
        assert config.instance_group and all(group.count >= 1 for group in config.instance_group)
        on_gpu = (
            model in [*TENSORRT_MODELS, *ADDED_MODELS] and variant == "default"
        )  # engines on the GPU, Python on the CPU
        kind = InstanceGroup.KIND_GPU if on_gpu else InstanceGroup.KIND_CPU
        assert all(group.kind == kind for group in config.instance_group), f"{model} {variant}"


@pytest.mark.parametrize("model", ["mnist", "mnist_pipeline"])
def test_labels_name_the_ten_digits(model):
    for config in configurations(model).values():
        (output,) = config.output
        labels = (MODEL_REPOSITORY / model / output.label_filename).read_text().split()
        assert labels == [str(digit) for digit in range(10)]


def test_pipeline_chains_preprocess_into_mnist():
    pipeline = configurations("mnist_pipeline")["default"]
    assert pipeline.platform == "ensemble"
    steps = pipeline.ensemble_scheduling.step
    assert [step.model_name for step in steps] == ["mnist_preprocess", "mnist"]
    preprocess, classifier = (configurations(step.model_name)["default"] for step in steps)
    # Each step's map keys are that model's tensors; the values connect ensemble tensors.
    assert set(steps[0].input_map) == {t.name for t in preprocess.input}
    assert set(steps[0].output_map) == {t.name for t in preprocess.output}
    assert set(steps[1].input_map) == {t.name for t in classifier.input}
    assert set(steps[1].output_map) == {t.name for t in classifier.output}
    assert steps[0].input_map["image_bytes"] == pipeline.input[0].name
    assert steps[0].output_map["image"] == steps[1].input_map["image"]
    assert steps[1].output_map["probabilities"] == pipeline.output[0].name
    assert (MODEL_REPOSITORY / "mnist_pipeline" / "1").is_dir()  # Triton needs a version folder


def test_mnist_declares_its_image_layout_in_both_variants():
    """Generic image clients (NVIDIA's image_client.py) refuse an image input without a layout."""
    for variant, config in configurations("mnist").items():
        (image,) = config.input
        assert image.format == model_config_pb2.ModelInput.FORMAT_NCHW, variant


def test_cpu_mnist_points_at_the_native_onnx_model():
    config = configurations("mnist")["cpu"]
    onnx_path = (MODEL_REPOSITORY / "mnist" / config.parameters["onnx_model"].string_value).resolve()
    assert onnx_path.is_file(), onnx_path
    assert onnx_path.name == "mnist_native.onnx"


def test_cpu_l2norm_accepts_the_lengths_the_engine_is_built_for():
    config = configurations("l2norm")["cpu"]
    assert int(config.parameters["max_vector_length"].string_value) == L2NORM_MAX_DIM
    (warmup,) = configurations("l2norm")["default"].model_warmup
    assert 1 <= warmup.inputs["vector"].dims[0] <= L2NORM_MAX_DIM
