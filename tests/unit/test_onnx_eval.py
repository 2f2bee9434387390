"""The CPU chain of trust: the plugin flavour run by the ONNX evaluator (custom nodes = the plugin
references) agrees with the native flavour run by ONNX Runtime; the FP16/INT8 variants and the calibration.

Both sides compute in float32 and order their sums their own way: the evaluator's convolutions and Gemm go
through numpy's BLAS (OpenBLAS picks its kernels by CPU model, and its threads split the sums), ONNX Runtime
picks its kernels by instruction set (AVX-512, AVX2, NEON). So values are compared within TOLERANCE, and
predictions (argmax) exactly: the smallest top-1/top-2 probability gap over the validation digits is 0.10,
10,000 times the float32 noise (tests/unit/test_models.py holds that margin on every machine).
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.models import export, lenet, mnist, onnx_eval

# Two float32 implementations of the model, any sum order: measured 1.2e-6 to 1.4e-6 with OpenBLAS's Haswell,
# SkylakeX, Zen and Sandybridge kernels and 1 or 2 threads against ONNX Runtime's AVX-512 ones.
TOLERANCE = 1e-5
# A difference docs/models.md quotes is a round-off maximum measured on one machine: another sum order draws
# other round-off errors, and their maximum moves by a few float32 ulps (-15 % here, see above), never by an
# order of magnitude. A quote within this factor of the measurement either way is right.
QUOTE_FACTOR = 3.0
MODELS_DOC = REPO_ROOT / "docs" / "models.md"


def quoted_max_diff(row: str) -> float:
    """The "max |diff| X" that docs/models.md's table of measurements quotes in the row `row`."""
    line = next(line for line in MODELS_DOC.read_text().splitlines() if line.startswith(f"| {row}"))
    return float(re.search(r"max \\\|diff\\\| ([\d.e-]+)", line)[1])


def assert_quoted(row: str, measured: float) -> None:
    """The doc's figure is this machine's measurement within QUOTE_FACTOR (sum orders differ by CPU)."""
    quoted = quoted_max_diff(row)
    assert quoted / QUOTE_FACTOR <= measured <= quoted * QUOTE_FACTOR, (
        f"docs/models.md quotes {quoted:g} for {row!r}; measured {measured:.3g} on this machine"
    )


@pytest.fixture(scope="module")
def validation():
    split = mnist.load_split()
    return mnist.to_tensor(split.validation_images), split.validation_labels


@pytest.fixture(scope="module")
def fp32_models():
    return {(m, f): onnx.load(export.onnx_path(m, f)) for m in export.MODELS for f in export.FLAVOURS}


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.mark.numeric
def test_mnist_plugin_graph_equals_native_graph_on_validation(validation, fp32_models):
    images, labels = validation
    plugin = onnx_eval.run(fp32_models[("mnist", "plugin")], {"image": images})["probabilities"]
    native = ort_run(fp32_models[("mnist", "native")], {"image": images})[0]
    assert plugin.dtype == np.float32 and plugin.shape == (1000, 10)
    np.testing.assert_allclose(plugin, native, atol=TOLERANCE, rtol=0)
    assert_quoted("mnist plugin (evaluator) vs native", float(np.abs(plugin - native).max()))
    # Exact: no prediction is within 2 * TOLERANCE of a tie (the margin, see the module's docstring).
    np.testing.assert_array_equal(plugin.argmax(axis=1), native.argmax(axis=1))
    assert np.mean(plugin.argmax(axis=1) == labels) >= 0.98


@pytest.mark.numeric
def test_mnist_intermediate_tensors_agree(validation, fp32_models):
    """Layer by layer: each plugin node's output equals the native subgraph's (tensor names are shared)."""
    images = validation[0][:50]
    names = ["conv1", "pool1", "conv2", "pool2", "fc1", "prelu", "logits"]
    plugin = onnx_eval.run(fp32_models[("mnist", "plugin")], {"image": images}, outputs=names)
    native_model = onnx.ModelProto()
    native_model.CopyFrom(fp32_models[("mnist", "native")])
    native_model.graph.output.extend(
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names]
    )
    native = dict(zip(["probabilities", *names], ort_run(native_model, {"image": images}), strict=True))
    for name in names:
        # TOLERANCE relative to the tensor's range: the logits and activations reach ~20, not 1.
        scale = max(1.0, float(np.abs(native[name]).max()))
        np.testing.assert_allclose(plugin[name], native[name], atol=TOLERANCE * scale, rtol=0, err_msg=name)


@pytest.mark.numeric
@pytest.mark.parametrize("dim", [1, 3, 64, 1000, 4096])
def test_l2norm_plugin_graph_equals_native_graph(dim, fp32_models):
    rng = np.random.default_rng(dim)
    vectors = (rng.normal(size=(6, dim)) * rng.uniform(1e-3, 1e3, size=(6, 1))).astype(np.float32)
    vectors[0] = 0.0  # eps keeps an all-zero vector at zero
    plugin = onnx_eval.run(fp32_models[("l2norm", "plugin")], {"vector": vectors})["normalized"]
    native = ort_run(fp32_models[("l2norm", "native")], {"vector": vectors})[0]
    # Exact for any sum order up to a bound: a float32 sum of D squares, its root and the division leave y off
    # by (D/2 + 3) * 2^-24 * |y| at most, 8.2e-6 here (D = 4096, |y| <= 0.067), under TOLERANCE.
    np.testing.assert_allclose(plugin, native, atol=TOLERANCE, rtol=0)
    np.testing.assert_array_equal(plugin[0], 0.0)
    # The evaluator's reference works in float64: each value is off by half a float32 ulp at most.
    np.testing.assert_allclose(np.linalg.norm(plugin[1:].astype(np.float64), axis=1), 1.0, rtol=1e-5)
    assert np.abs(plugin - native).max() <= quoted_max_diff("l2norm plugin vs native") * QUOTE_FACTOR


@pytest.mark.numeric
def test_l2norm_max_diff_is_the_quoted_one(fp32_models):
    """docs/models.md's l2norm figure is the largest difference over the dims of the test above."""
    worst = 0.0
    for dim in (1, 3, 64, 1000, 4096):
        rng = np.random.default_rng(dim)
        vectors = (rng.normal(size=(6, dim)) * rng.uniform(1e-3, 1e3, size=(6, 1))).astype(np.float32)
        vectors[0] = 0.0
        plugin = onnx_eval.run(fp32_models[("l2norm", "plugin")], {"vector": vectors})["normalized"]
        native = ort_run(fp32_models[("l2norm", "native")], {"vector": vectors})[0]
        worst = max(worst, float(np.abs(plugin - native).max()))
    assert_quoted("l2norm plugin vs native", worst)


# ------------------------------------------------------------------------------------------ variants


@pytest.fixture(scope="module")
def int8_scales():
    return export.load_int8_scales()


@pytest.mark.numeric
def test_committed_int8_scales_are_the_calibration_of_the_validation_set(
    validation, fp32_models, int8_scales
):
    """The committed file is what `python -m trt_plugin_kit.models.export` writes on this machine.

    The unrounded max-abs depends on how the CPU's BLAS orders the convolutions' sums (an ulp apart between
    an AMD EPYC and the machine the file was first written on), so it is compared within 1e-6 (8 float32
    ulps: far more than any sum order moves it, far less than the 1e-4 that would change one quantized
    value). The committed scale is that value rounded by export.round_scale: equal, except where the
    max-abs lies within that tolerance of a rounding boundary, where either neighbour is right.
    """
    images = validation[0]
    fresh = export.calibrate_pool_scales(fp32_models[("mnist", "plugin")], {"image": images})
    # Independent measurement with ONNX Runtime: max-abs of each pool input / 127.
    native_model = onnx.ModelProto()
    native_model.CopyFrom(fp32_models[("mnist", "native")])
    native_model.graph.output.extend(
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("conv1", "conv2")]
    )
    _, conv1, conv2 = ort_run(native_model, {"image": images})
    for pool, activation in (("pool1", conv1), ("pool2", conv2)):
        unrounded = float(np.abs(activation).max()) / 127
        committed = int8_scales[pool]["input_scale"]
        assert committed == export.round_scale(committed), f"{pool}: committed scale is not rounded"
        candidates = {export.round_scale(unrounded * (1 + d)) for d in (-1e-6, 0.0, 1e-6)}
        assert committed in candidates, f"{pool}: committed {committed} != round({unrounded})"
        assert fresh[pool]["input_scale"] in candidates, f"{pool}: export gives {fresh[pool]}"
        assert {k: v for k, v in fresh[pool].items() if "scale" not in k} == {
            k: v for k, v in int8_scales[pool].items() if "scale" not in k
        }
    assert fresh.keys() == int8_scales.keys()
    assert all(s["output_scale"] == s["input_scale"] for s in int8_scales.values())  # max pools


def test_scale_rounding_keeps_the_largest_activation_at_127():
    """Rounding to SCALE_SIGNIFICANT_DIGITS never lets the max-abs quantize past 127 (no clipping)."""
    rng = np.random.default_rng(0)
    for max_abs in rng.uniform(1e-3, 1e3, size=1000):
        assert round(max_abs / export.round_scale(max_abs / 127)) == 127


def test_int8_variant_structure(fp32_models, int8_scales):
    plugin = export.to_int8(fp32_models[("mnist", "plugin")], int8_scales)
    onnx.checker.check_model(plugin, full_check=True)
    ops = [node.op_type for node in plugin.graph.node]
    assert ops[:6] == ["Conv", "QuantizeLinear", "Pool", "DequantizeLinear", "Conv", "QuantizeLinear"]
    pools = [node for node in plugin.graph.node if node.op_type == "Pool"]
    for node, name in zip(pools, ("pool1", "pool2"), strict=True):
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        assert attributes["input_scale"] == pytest.approx(int8_scales[name]["input_scale"])
        assert attributes["output_scale"] == pytest.approx(int8_scales[name]["output_scale"])
    initializers = {i.name: numpy_helper.to_array(i) for i in plugin.graph.initializer}
    assert initializers["pool1_zero_point"].dtype == np.int8 and initializers["pool1_zero_point"] == 0
    native = export.to_int8(fp32_models[("mnist", "native")], int8_scales)
    onnx.checker.check_model(native, full_check=True)
    assert all(node.domain == "" for node in native.graph.node)
    with pytest.raises(ValueError, match="no INT8 scales"):
        export.to_int8(fp32_models[("mnist", "plugin")], {"pool1": int8_scales["pool1"]})
    with pytest.raises(ValueError, match="> 0"):
        export.to_int8(
            fp32_models[("mnist", "plugin")], {**int8_scales, "pool2": {"input_scale": 0, "output_scale": 1}}
        )


@pytest.mark.numeric
def test_int8_variants_keep_accuracy_and_agree(validation, fp32_models, int8_scales):
    images, labels = validation
    plugin = export.to_int8(fp32_models[("mnist", "plugin")], int8_scales)
    native = export.to_int8(fp32_models[("mnist", "native")], int8_scales)
    plugin_out = onnx_eval.run(plugin, {"image": images})["probabilities"]
    native_out = ort_run(native, {"image": images})[0]
    # Both 98.9 % here; 0.98 leaves 9 digits for another CPU's quantization steps (below).
    assert np.mean(plugin_out.argmax(axis=1) == labels) >= 0.98
    assert np.mean(native_out.argmax(axis=1) == labels) >= 0.98
    # The two sides' float32 convolutions round differently (and differently on each CPU), and a value within
    # that rounding of a quantizer boundary lands one INT8 step apart: not bit-exact. One step moves a
    # probability by up to 0.035 (0.033 here with 2 BLAS threads, 0.035 with 1); 0.1 leaves room for three in
    # one digit. Predictions: identical here, the smallest INT8 top-1/top-2 gap being 0.09; 99.5 % leaves 5.
    assert np.mean(plugin_out.argmax(axis=1) == native_out.argmax(axis=1)) >= 0.995
    assert np.abs(plugin_out - native_out).max() < 0.1
    # The pools themselves are exact in INT8: evaluator Pool(int8) == ONNX Runtime Q/DQ/MaxPool/Q/DQ.
    # INT8 vs FP32: 1.5e-4 on average (any BLAS setting), the bound 60 times that.
    fp32_out = onnx_eval.run(fp32_models[("mnist", "plugin")], {"image": images})["probabilities"]
    assert np.abs(plugin_out - fp32_out).mean() < 1e-2


@pytest.mark.numeric
def test_fp16_variants(validation, fp32_models):
    images, labels = validation
    for model_name, flavour in fp32_models:
        variant = export.to_fp16(fp32_models[(model_name, flavour)])
        onnx.checker.check_model(variant, full_check=True)
        io_types = [vi.type.tensor_type.elem_type for vi in [*variant.graph.input, *variant.graph.output]]
        assert io_types == [TensorProto.FLOAT, TensorProto.FLOAT]  # the Triton interface stays FP32
    plugin = export.to_fp16(fp32_models[("mnist", "plugin")])
    native = export.to_fp16(fp32_models[("mnist", "native")])
    assert {i.data_type for i in native.graph.initializer} == {TensorProto.FLOAT16}
    plugin_out = onnx_eval.run(plugin, {"image": images})["probabilities"]
    native_out = ort_run(native, {"image": images})[0]
    assert plugin_out.dtype == np.float32
    assert np.mean(plugin_out.argmax(axis=1) == labels) >= 0.98
    # float16 rounds at 2^-11 relative (~5e-4): measured max |diff| 2.1e-3, five times below 1e-2; the
    # smallest FP16 top-1/top-2 gap is 0.10, so predictions agree (99.5 % leaves 5 digits to another CPU).
    assert np.mean(plugin_out.argmax(axis=1) == native_out.argmax(axis=1)) >= 0.995
    np.testing.assert_allclose(plugin_out, native_out, atol=1e-2)
    vectors = np.random.default_rng(0).normal(size=(4, 300)).astype(np.float32)
    l2_plugin = onnx_eval.run(export.to_fp16(fp32_models[("l2norm", "plugin")]), {"vector": vectors})[
        "normalized"
    ]
    l2_native = ort_run(export.to_fp16(fp32_models[("l2norm", "native")]), {"vector": vectors})[0]
    # |y| <= 0.23 here, where a float16 ulp is 1.2e-4: measured 1.1e-4, and 2e-3 is 16 ulps.
    np.testing.assert_allclose(l2_plugin, l2_native, atol=2e-3)


def test_make_variant_dispatch(fp32_models):
    model = fp32_models[("l2norm", "plugin")]
    assert export.make_variant(model, "fp32") is model
    with pytest.raises(ValueError, match="calibrated scales"):
        export.make_variant(fp32_models[("mnist", "plugin")], "int8")
    with pytest.raises(ValueError, match="precision"):
        export.make_variant(model, "int4")


# -------------------------------------------------------------------------------------- evaluator errors


def _l2norm_with(**attributes) -> onnx.ModelProto:
    model = export.build_l2norm("plugin")
    node = model.graph.node[0]
    for name, value in attributes.items():
        kept = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend([*kept, helper.make_attribute(name, value)])
    return model


def test_evaluator_refuses_what_tensorrt_would_not_find():
    vectors = np.ones((2, 3), np.float32)
    with pytest.raises(onnx_eval.EvaluationError, match="would not find the plugin"):
        onnx_eval.run(_l2norm_with(plugin_namespace="other"), {"vector": vectors})
    with pytest.raises(onnx_eval.EvaluationError, match="would not find the plugin"):
        onnx_eval.run(_l2norm_with(plugin_version="2"), {"vector": vectors})
    with pytest.raises(onnx_eval.EvaluationError, match="no field"):
        onnx_eval.run(_l2norm_with(epsilon=1e-6), {"vector": vectors})
    with pytest.raises(ValueError, match="out of range"):
        onnx_eval.run(_l2norm_with(axis=5), {"vector": vectors})


@pytest.mark.numeric
def test_evaluator_pool_fields_default_like_the_plugin():
    """A Pool node with only mode and kernel: stride = kernel, padding 0, as the plugin's creator does."""
    model = export.build_mnist(lenet.load_weights(export.WEIGHTS_PATH), "plugin")
    for node in export.pool_nodes(model):
        kept = [a for a in node.attribute if a.name not in ("stride", "padding")]
        del node.attribute[:]
        node.attribute.extend(kept)
    images = np.random.default_rng(3).uniform(0, 1, size=(4, 1, 28, 28)).astype(np.float32)
    # Exact: the same evaluator, the same BLAS calls in one process, only the attributes spelled otherwise.
    full = onnx_eval.run(onnx.load(export.onnx_path("mnist", "plugin")), {"image": images})["probabilities"]
    np.testing.assert_array_equal(onnx_eval.run(model, {"image": images})["probabilities"], full)


def test_evaluator_input_checks_and_unknown_ops():
    model = export.build_l2norm("plugin")
    with pytest.raises(onnx_eval.EvaluationError, match="missing input 'vector'"):
        onnx_eval.run(model, {})
    with pytest.raises(onnx_eval.EvaluationError, match="float32"):
        onnx_eval.run(model, {"vector": np.ones((2, 3), np.float64)})
    with pytest.raises(onnx_eval.EvaluationError, match="rank 2"):
        onnx_eval.run(model, {"vector": np.ones(3, np.float32)})
    mnist_model = onnx.load(export.onnx_path("mnist", "native"))
    with pytest.raises(onnx_eval.EvaluationError, match="dimension 2 must be 28"):
        onnx_eval.run(mnist_model, {"image": np.zeros((1, 1, 27, 28), np.float32)})
    with pytest.raises(onnx_eval.EvaluationError, match="not in the graph"):
        onnx_eval.run(model, {"vector": np.ones((2, 3), np.float32)}, outputs=["nope"])
    model.graph.node[0].op_type = "Frobnicate"
    with pytest.raises(onnx_eval.EvaluationError, match="Frobnicate is not a plugin"):
        onnx_eval.run(model, {"vector": np.ones((2, 3), np.float32)})
    model.graph.node[0].domain = "com.example"
    with pytest.raises(onnx_eval.EvaluationError, match="com.example::Frobnicate is not supported"):
        onnx_eval.run(model, {"vector": np.ones((2, 3), np.float32)})


@pytest.mark.numeric
def test_evaluator_standard_ops_match_onnxruntime_on_the_native_graph(validation, fp32_models):
    """The evaluator's standard operators (ONNX's ReferenceEvaluator: Conv/MaxPool/Gemm/PRelu/Softmax) agree
    with ONNX Runtime (the calibration and the plugin graph rely on them)."""
    images = validation[0][:100]
    ours = onnx_eval.run(fp32_models[("mnist", "native")], {"image": images})["probabilities"]
    theirs = ort_run(fp32_models[("mnist", "native")], {"image": images})[0]
    np.testing.assert_allclose(ours, theirs, atol=TOLERANCE, rtol=0)  # two float32 sum orders (TOLERANCE)
