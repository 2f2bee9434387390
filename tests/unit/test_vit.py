"""mnist_vit in NumPy (trt_plugin_kit/models/vit.py): its backward pass against finite differences, and its
ops against the plugin references they stand for (RmsNormLastAxis, FlashAttentionTriton, SwiGLUSplit)."""

from __future__ import annotations

import numpy as np
import pytest

from trt_plugin_kit.models import vit
from trt_plugin_kit.specs import reference


@pytest.fixture(scope="module")
def tiny():
    rng = np.random.default_rng(0)
    params = vit.init_parameters(rng, blocks=2, dtype=np.float64)
    for name in params:  # away from the initial values, so that every gradient is of some size
        params[name] = params[name] + rng.normal(0, 0.05, params[name].shape)
    images = rng.uniform(0, 1, (3, 1, 28, 28))
    return params, images, np.array([1, 7, 3])


def test_gradients_match_finite_differences(tiny):
    params, images, labels = tiny
    _, grads, _ = vit.loss_and_gradients(params, images, labels)
    rng = np.random.default_rng(1)
    for name in params:
        for _ in range(2):
            at = tuple(rng.integers(0, s) for s in params[name].shape)
            saved = params[name][at]
            params[name][at] = saved + 1e-6
            up = vit.loss_and_gradients(params, images, labels)[0]
            params[name][at] = saved - 1e-6
            down = vit.loss_and_gradients(params, images, labels)[0]
            params[name][at] = saved
            numeric = (up - down) / 2e-6
            assert abs(grads[name][at] - numeric) <= 1e-6 + 1e-4 * abs(numeric), (name, at)


def test_ops_are_the_plugin_references(tiny):
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, (2, vit.TOKENS, vit.WIDTH))
    gain = rng.uniform(0.5, 1.5, vit.WIDTH)
    ours, _ = vit.rms_norm(x, gain)
    np.testing.assert_allclose(
        ours, reference.run("RmsNormLastAxis", [x, gain], {"eps": vit.EPS})[0], rtol=1e-12
    )
    q, k, v = (vit.split_heads(rng.normal(0, 1, (2, vit.TOKENS, vit.WIDTH))) for _ in range(3))
    attended = vit.softmax(q @ k.transpose(0, 1, 3, 2) * vit.HEAD_SIZE**-0.5) @ v
    np.testing.assert_allclose(attended, reference.run("FlashAttentionTriton", [q, k, v], {})[0], rtol=1e-10)
    ab = rng.normal(0, 1, (2, vit.TOKENS, 2 * vit.MLP_HIDDEN))
    a, gate = np.split(ab, 2, axis=-1)
    np.testing.assert_allclose(vit.silu(a)[0] * gate, reference.run("SwiGLUSplit", [ab], {})[0], rtol=1e-12)


@pytest.mark.parametrize("flavour", ["plugin", "native"])
def test_onnx_export_answers_as_the_numpy_model(flavour):
    """Both flavours of the exported graph give the NumPy model's probabilities (FP32): the plugin flavour
    through the ONNX evaluator (plugin nodes by their references), the native one in ONNX Runtime."""
    import onnx
    import onnxruntime as ort

    from trt_plugin_kit.models import onnx_eval, vit_export

    rng = np.random.default_rng(4)
    params = vit.init_parameters(rng)
    for name in params:
        params[name] = params[name] + rng.normal(0, 0.05, params[name].shape).astype(np.float32)
    images = rng.uniform(0, 1, (5, 1, 28, 28)).astype(np.float32)
    want = vit.probabilities(params, images)
    model = vit_export.build(params, flavour)
    onnx.checker.check_model(model, full_check=True)
    if flavour == "native":
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        got = session.run(None, {"image": images})[0]
        assert {n.domain for n in model.graph.node} == {""}
    else:
        got = onnx_eval.run(model, {"image": images})["probabilities"]
        kinds = {n.op_type for n in model.graph.node if n.domain == "trt_plugin_kit"}
        assert kinds == {"RmsNormLastAxis", "FlashAttentionTriton", "SwiGLUSplit"}
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_the_benchmark_times_the_served_sizes():
    """The benchmark's serving-size cases (a bare-Python module: it cannot import vit) are mnist_vit's."""
    from trt_plugin_kit.benchmarks import cases

    assert (cases.VIT_TOKENS, cases.VIT_WIDTH, cases.VIT_HEADS) == (vit.TOKENS, vit.WIDTH, vit.HEADS)
    assert vit.HEAD_SIZE in (16, 32, 64, 128)  # one of FlashAttentionTriton's head sizes


def test_training_is_reproducible_and_learns():
    """Two short runs with one seed give bit-identical weights (one BLAS thread, as the command runs), and
    the loss falls on synthetic digits (a bright row at a height given by the label)."""
    from threadpoolctl import threadpool_limits

    from trt_plugin_kit.models import mnist, train_vit

    rng = np.random.default_rng(9)
    labels = rng.integers(0, 10, 128).astype(np.uint8)
    images = (rng.uniform(0, 40, (128, 28, 28))).astype(np.uint8)
    images[np.arange(128), 2 + 2 * labels.astype(int), 4:24] = 255
    small = mnist.MnistSplit(images, labels, images[:1], labels[:1])
    config = train_vit.TrainConfig(epochs=10, batch_size=32, warmup_steps=4, max_shift=0, blocks=1)
    with threadpool_limits(1):
        first, history = train_vit.train(small, config, max_steps=40, log=None)
        second, _ = train_vit.train(small, config, max_steps=40, log=None)
    assert all(np.array_equal(first[name], second[name]) for name in first)
    assert history[-1]["mean_loss"] < 0.75 * history[0]["mean_loss"]


def test_committed_onnx_files_are_the_export_of_the_committed_weights():
    """model_repository/mnist_vit/model.onnx (plugin flavour) and models/onnx/mnist_vit_native.onnx are what
    `python -m trt_plugin_kit.models.vit_export` writes from models/mnist_vit.npz, byte for byte."""
    import onnx

    from trt_plugin_kit.models import vit_export

    params = vit.load_weights(vit_export.WEIGHTS_PATH)
    for flavour, path in vit_export.PATHS.items():
        written = vit_export.build(params, flavour).SerializeToString()
        assert onnx.load(path).SerializeToString() == written, path


@pytest.mark.numeric
def test_the_committed_weights_have_the_recorded_accuracy():
    """The record's validation accuracy (>= 98 %, issue 43) is what the weights give on the 1,000 validation
    digits, recomputed here."""
    import json

    from trt_plugin_kit.models import mnist, train_vit, vit_export

    record = json.loads(vit_export.WEIGHTS_PATH.with_suffix(".json").read_text())
    split = mnist.load_split()
    params = vit.load_weights(vit_export.WEIGHTS_PATH)
    measured = train_vit.accuracy(params, split.validation_images, split.validation_labels)
    assert measured == pytest.approx(record["validation_accuracy"], abs=1e-3)
    assert record["validation_accuracy"] >= 0.98
