"""The committed LeNet-5 weights and ONNX models: accuracy, training code, export and plugin attributes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from trt_plugin_kit import (
    PLUGIN_NAMESPACE,
    PLUGIN_VERSION,
    export,
    lenet,
    mnist,
    plugin_nodes,
    plugin_spec,
    train,
)

TARGET_ACCURACY = 0.98


@pytest.fixture(scope="module")
def split():
    return mnist.load_split()


@pytest.fixture(scope="module")
def weights():
    return lenet.load_weights(export.WEIGHTS_PATH)


def ort_session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


# --------------------------------------------------------------------------------------------- weights


def test_committed_weights_reach_the_target_accuracy_in_onnxruntime(split):
    session = ort.InferenceSession(
        str(export.onnx_path("mnist", "native")), providers=["CPUExecutionProvider"]
    )
    probabilities = session.run(None, {"image": mnist.to_tensor(split.validation_images)})[0]
    accuracy = float(np.mean(probabilities.argmax(axis=1) == split.validation_labels))
    record = json.loads(export.WEIGHTS_PATH.with_suffix(".json").read_text())
    assert accuracy >= TARGET_ACCURACY
    assert accuracy == pytest.approx(record["validation_accuracy"], abs=1e-9)  # the record tells the truth
    assert record["validation_size"] == len(split.validation_images) == 1000
    assert record["train_size"] == len(split.train_images) == 7000
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)


def test_weight_file_layout(weights, tmp_path):
    assert set(weights) == set(lenet.PARAMETER_SHAPES)
    assert all(weights[name].dtype == np.float32 for name in weights)
    assert export.WEIGHTS_PATH.stat().st_size < 3_000_000  # small enough to commit
    bad = dict(weights)
    bad["fc1.weight"] = bad["fc1.weight"][:, :10]
    with pytest.raises(ValueError, match="fc1.weight has shape"):
        lenet.save_weights(tmp_path / "bad.npz", bad)
    with pytest.raises(ValueError, match="missing"):
        lenet.validate_parameters({k: v for k, v in weights.items() if k != "conv1.bias"})
    np.savez(tmp_path / "nan.npz", **{**weights, "fc2.bias": np.full(10, np.nan, np.float32)})
    with pytest.raises(ValueError, match="NaN"):
        lenet.load_weights(tmp_path / "nan.npz")


def test_training_forward_pass_matches_exported_graph(weights, split):
    """The NumPy training code and the ONNX graph agree (layouts, flatten order, PReLU, softmax)."""
    images = mnist.to_tensor(split.validation_images[:64])
    training_side = lenet.softmax(lenet.forward(weights, images).astype(np.float64))
    onnx_side = ort_session(export.build_mnist(weights, "native")).run(None, {"image": images})[0]
    np.testing.assert_allclose(training_side, onnx_side, atol=1e-5)


# -------------------------------------------------------------------------------------------- training


def test_backward_pass_matches_finite_differences():
    rng = np.random.default_rng(7)
    params = {k: v.astype(np.float64) for k, v in lenet.init_parameters(rng).items()}
    params["prelu.slopes"] = rng.uniform(-0.5, 0.5, 500)
    images = rng.uniform(0, 1, size=(3, 1, 28, 28))
    labels = np.array([1, 5, 9])
    _, grads, _ = lenet.loss_and_gradients(params, images, labels)
    for name in params:
        for _ in range(2):
            index = tuple(int(rng.integers(0, size)) for size in params[name].shape)
            original = params[name][index]
            params[name][index] = original + 1e-6
            plus = lenet.loss_and_gradients(params, images, labels)[0]
            params[name][index] = original - 1e-6
            minus = lenet.loss_and_gradients(params, images, labels)[0]
            params[name][index] = original
            numeric = (plus - minus) / 2e-6
            assert grads[name][index] == pytest.approx(numeric, rel=1e-4, abs=1e-8), name


def test_training_is_reproducible_and_learns(split):
    config = train.TrainConfig(epochs=1, batch_size=32)
    small = mnist.MnistSplit(split.train_images[:960], split.train_labels[:960], split.train_images[:1], [0])
    first, history = train.train(small, config, max_steps=30, progress=False)
    second, _ = train.train(small, config, max_steps=30, progress=False)
    for name in first:
        np.testing.assert_array_equal(first[name], second[name])
    different, _ = train.train(small, train.TrainConfig(epochs=1, batch_size=32, seed=1), 30, progress=False)
    assert not np.array_equal(first["fc1.weight"], different["fc1.weight"])
    assert history[0]["mean_loss"] < 2.2  # below chance level (ln 10 = 2.30) after 30 steps
    assert train.accuracy(first, split.validation_images, split.validation_labels) > 0.5


def test_random_shift_moves_digits_without_wrapping():
    rng = np.random.default_rng(0)
    digits = np.zeros((50, 28, 28), np.uint8)
    digits[:, 13, 13] = 255
    shifted = train.random_shift(digits, 2, rng)
    _, pixel = np.nonzero(shifted.reshape(50, -1) == 255)
    rows, cols = pixel // 28, pixel % 28
    assert np.all(np.abs(rows - 13) <= 2) and np.all(np.abs(cols - 13) <= 2)
    assert len(set(zip(rows.tolist(), cols.tolist(), strict=True))) > 10  # really random
    assert (shifted.reshape(50, -1) == 255).sum() == 50  # one pixel each, nothing lost or duplicated


# ---------------------------------------------------------------------------------------------- export


@pytest.mark.parametrize("model_name", export.MODELS)
@pytest.mark.parametrize("flavour", export.FLAVOURS)
def test_committed_onnx_is_the_export_of_the_committed_weights(model_name, flavour, weights):
    path = export.onnx_path(model_name, flavour)
    fresh = export.build(model_name, flavour, weights)
    assert path.read_bytes() == fresh.SerializeToString(), (
        f"{path} is stale: run python -m trt_plugin_kit.export"
    )
    onnx.checker.check_model(onnx.load(path), full_check=True)
    assert path.stat().st_size < 4_000_000


def test_interface_names_and_dynamic_dims():
    mnist_model = onnx.load(export.onnx_path("mnist", "plugin"))
    (image,), (probabilities,) = mnist_model.graph.input, mnist_model.graph.output
    assert image.name == "image" and probabilities.name == "probabilities"
    dims = [d.dim_param or d.dim_value for d in image.type.tensor_type.shape.dim]
    assert dims == ["batch", 1, 28, 28]
    l2norm_model = onnx.load(export.onnx_path("l2norm", "native"))
    (vector,), (normalized,) = l2norm_model.graph.input, l2norm_model.graph.output
    assert vector.name == "vector" and normalized.name == "normalized"
    assert [d.dim_param for d in vector.type.tensor_type.shape.dim] == ["batch", "dim"]


def test_plugin_nodes_carry_every_plugin_field(weights):
    """One attribute per field, every field (TensorRT's parser warns about any it does not find): defaults
    written out, unset optional fields (the FP32 pools' INT8 scales) as empty FLOATS."""
    model = onnx.load(export.onnx_path("mnist", "plugin"))
    domains = {o.domain: o.version for o in model.opset_import}
    assert domains[export.PLUGIN_DOMAIN] == 1
    custom = [node for node in model.graph.node if node.domain == export.PLUGIN_DOMAIN]
    assert [node.op_type for node in custom] == ["Pool", "Pool", "FullyConnected", "PReLU", "FullyConnected"]
    types = {
        "mode": onnx.AttributeProto.STRING,
        "kernel": onnx.AttributeProto.INTS,
        "stride": onnx.AttributeProto.INTS,
        "padding": onnx.AttributeProto.INTS,
        "count_include_pad": onnx.AttributeProto.INT,
        "input_scale": onnx.AttributeProto.FLOATS,  # empty: not set
        "output_scale": onnx.AttributeProto.FLOATS,
        "weights": onnx.AttributeProto.FLOATS,
        "bias": onnx.AttributeProto.FLOATS,
        "slopes": onnx.AttributeProto.FLOATS,
        "num_outputs": onnx.AttributeProto.INT,
        "plugin_version": onnx.AttributeProto.STRING,
        "plugin_namespace": onnx.AttributeProto.STRING,
    }
    for node in custom:
        attributes = {a.name: a for a in node.attribute}
        assert helper.get_attribute_value(attributes["plugin_version"]).decode() == PLUGIN_VERSION
        assert helper.get_attribute_value(attributes["plugin_namespace"]).decode() == PLUGIN_NAMESPACE
        names = [a.name for a in node.attribute if a.name not in plugin_nodes.LOOKUP_ATTRIBUTES]
        assert names == list(plugin_spec.get(node.op_type).field_names), node.name
        for name, attribute in attributes.items():
            assert attribute.type == types[name], (node.name, name)
    pool1 = {a.name: helper.get_attribute_value(a) for a in custom[0].attribute}
    assert pool1["mode"] == b"max" and pool1["kernel"] == [2, 2] and pool1["stride"] == [2, 2]
    assert pool1["padding"] == [0, 0] and pool1["count_include_pad"] == 0
    assert pool1["input_scale"] == [] and pool1["output_scale"] == []
    fc1 = {a.name: helper.get_attribute_value(a) for a in custom[2].attribute}
    assert fc1["num_outputs"] == 500
    np.testing.assert_array_equal(np.asarray(fc1["weights"], np.float32), weights["fc1.weight"].reshape(-1))
    np.testing.assert_array_equal(np.asarray(fc1["bias"], np.float32), weights["fc1.bias"])
    l2norm = onnx.load(export.onnx_path("l2norm", "plugin")).graph.node
    assert [(n.op_type, n.domain) for n in l2norm] == [("L2Normalize", export.PLUGIN_DOMAIN)]
    l2_fields = {a.name: helper.get_attribute_value(a) for a in l2norm[0].attribute}
    assert l2_fields["axis"] == -1 and l2_fields["eps"] == pytest.approx(1e-12)


def test_native_flavour_uses_standard_operators_only():
    for model_name in export.MODELS:
        model = onnx.load(export.onnx_path(model_name, "native"))
        assert {o.domain for o in model.opset_import} == {""}
        assert all(node.domain == "" for node in model.graph.node)
    ops = [node.op_type for node in onnx.load(export.onnx_path("mnist", "native")).graph.node]
    assert ops == ["Conv", "MaxPool", "Conv", "MaxPool", "Flatten", "Gemm", "PRelu", "Gemm", "Softmax"]


def test_plugin_node_rejects_unknown_fields():
    with pytest.raises(ValueError, match="no field"):
        plugin_nodes.make_node("Pool", ["x"], ["y"], "pool", mode="max", kernal=[2, 2])
    with pytest.raises(ValueError, match="flavour"):
        export.build_l2norm("tensorrt")


def test_commands_report_missing_input_in_one_line_and_write_nothing(tmp_path):
    weights = tmp_path / "weights.npz"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trt_plugin_kit.train",
            "--mnist-dir",
            str(tmp_path),
            "--output",
            str(weights),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "MNIST digits not found" in result.stderr
    assert "Traceback" not in result.stderr and not weights.exists()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trt_plugin_kit.export",
            "--weights",
            str(weights),
            "--output-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "weights.npz" in result.stderr and "Traceback" not in result.stderr
    assert not list(tmp_path.glob("*.onnx"))
