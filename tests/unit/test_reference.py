"""NumPy references of the plugin ops vs independent computations (ONNX Runtime single-node graphs,
hand-worked tiny cases, INT8 rounding ties) and their argument checks."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from trt_plugin_kit.specs import reference

RNG = np.random.default_rng(1234)
EPS32 = float(np.finfo(np.float32).eps)  # 2^-23: two float32 roundings


def run_onnx_node(op_type: str, inputs: dict[str, np.ndarray], opset: int = 17, **attributes) -> np.ndarray:
    """Runs one standard ONNX operator in ONNX Runtime (the independent implementation)."""
    elem = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE}
    graph_inputs = [
        helper.make_tensor_value_info(name, elem[array.dtype], list(array.shape))
        for name, array in inputs.items()
    ]
    output_type = elem[next(iter(inputs.values())).dtype]
    node = helper.make_node(op_type, list(inputs), ["y"], **attributes)
    graph = helper.make_graph(
        [node], "single", graph_inputs, [helper.make_tensor_value_info("y", output_type, None)]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)[0]


# ------------------------------------------------------------------------------------------------- Pool

POOL_CASES = [
    # kernel, stride, padding
    ((2, 2), (2, 2), (0, 0)),
    ((3, 3), (1, 1), (1, 1)),
    ((3, 2), (2, 1), (1, 0)),
    ((5, 5), (3, 3), (2, 2)),
    ((1, 1), (1, 1), (0, 0)),
    ((4, 3), (3, 2), (0, 1)),
]


@pytest.mark.numeric
@pytest.mark.parametrize("kernel,stride,padding", POOL_CASES)
@pytest.mark.parametrize("shape", [(2, 3, 9, 11), (1, 1, 5, 5), (3, 2, 12, 7)])
def test_max_pool_matches_onnxruntime(kernel, stride, padding, shape):
    x = RNG.normal(size=shape).astype(np.float32) - 2.0  # mostly negative: padding must not win
    expected = run_onnx_node(
        "MaxPool", {"x": x}, kernel_shape=list(kernel), strides=list(stride), pads=list(padding) * 2
    )
    actual = reference.pool(x, "max", kernel, stride, padding)
    assert actual.dtype == np.float32
    np.testing.assert_array_equal(actual, expected)  # exact on every CPU: a maximum rounds nothing


@pytest.mark.numeric
@pytest.mark.parametrize("kernel,stride,padding", POOL_CASES)
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool_matches_onnxruntime(kernel, stride, padding, count_include_pad):
    x = RNG.normal(size=(2, 3, 10, 9)).astype(np.float32)  # ONNX Runtime's AveragePool is float32 only
    expected = run_onnx_node(
        "AveragePool",
        {"x": x},
        kernel_shape=list(kernel),
        strides=list(stride),
        pads=list(padding) * 2,
        count_include_pad=count_include_pad,
    )
    actual = reference.pool(x, "average", kernel, stride, padding, count_include_pad)
    # A float32 sum of n values, in any order, is off by (n - 1) * 2^-24 * sum |x| at most: the average by
    # (n + 2) * 2^-24 * max |x| with its division and the reference's rounding. A wrong padding rule is off
    # by ~0.1.
    bound = (np.prod(kernel) + 2) * EPS32 / 2 * np.abs(x).max()
    np.testing.assert_allclose(actual, expected, rtol=0, atol=bound)


def test_pool_hand_checked():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    np.testing.assert_array_equal(reference.pool(x, "max", [2, 2], [2, 2]), [[[[5, 7], [13, 15]]]])
    np.testing.assert_array_equal(
        reference.pool(x, "average", [2, 2], [2, 2]), [[[[2.5, 4.5], [10.5, 12.5]]]]
    )
    # 3x3 windows, stride 2, padding 1: output floor((4 + 2 - 3) / 2) + 1 = 2. The top-left window sees
    # x[0:2, 0:2] = {0, 1, 4, 5}: 4 elements in bounds, 9 with the padding.
    excluded = reference.pool(x, "average", [3, 3], [2, 2], [1, 1], count_include_pad=0)
    included = reference.pool(x, "average", [3, 3], [2, 2], [1, 1], count_include_pad=1)
    assert excluded.shape == (1, 1, 2, 2)
    assert excluded[0, 0, 0, 0] == pytest.approx(10 / 4)
    assert included[0, 0, 0, 0] == pytest.approx(10 / 9)
    # Max pool over all-negative data with padding: the -inf padding never wins.
    negative = -np.ones((1, 1, 3, 3), dtype=np.float32)
    assert np.all(reference.pool(negative, "max", [3, 3], [1, 1], [1, 1]) == -1)


def test_pool_stride_defaults_to_the_kernel_like_the_plugin():
    x = RNG.normal(size=(1, 2, 6, 9)).astype(np.float32)
    np.testing.assert_array_equal(reference.pool(x, "max", [3, 3]), reference.pool(x, "max", [3, 3], [3, 3]))
    assert reference.pool(x, "average", [2, 3]).shape == (1, 2, 3, 3)


def test_pool_output_size_uses_floor():
    assert reference.pool_output_size(28, 2, 2, 0) == 14
    assert reference.pool_output_size(7, 2, 2, 0) == 3  # floor, not ceil
    assert reference.pool(np.zeros((1, 1, 7, 7), np.float32), "max", [2, 2], [2, 2]).shape == (1, 1, 3, 3)


def test_pool_keeps_float16():
    x = RNG.normal(size=(1, 2, 6, 6)).astype(np.float16)
    y = reference.pool(x, "average", [2, 2], [2, 2])
    assert y.dtype == np.float16
    np.testing.assert_array_equal(
        y, reference.pool(x.astype(np.float64), "average", [2, 2], [2, 2]).astype(np.float16)
    )


def test_pool_nan_propagates():
    x = np.zeros((1, 1, 2, 2), np.float32)
    x[0, 0, 1, 1] = np.nan
    assert np.isnan(reference.pool(x, "max", [2, 2], [2, 2])).all()
    assert np.isnan(reference.pool(x, "average", [2, 2], [2, 2])).all()


# --------------------------------------------------------------------------------------------- INT8 pool


def test_quantize_rounds_half_to_even_and_saturates():
    scale = 0.5
    y = np.array([0.25, 0.75, 1.25, -0.25, -0.75, 63.75, 63.25, 100.0, -100.0, -64.25])
    #           0.5->0 1.5->2 2.5->2 -0.5->0 -1.5->-2 127.5->127 126.5->126 sat    sat   -128.5->-128
    expected = np.array([0, 2, 2, 0, -2, 127, 126, 127, -128, -128], dtype=np.int8)
    q = reference.quantize_int8(y, scale)
    assert q.dtype == np.int8
    np.testing.assert_array_equal(q, expected)


def test_int8_average_pool_ties_hand_checked():
    # Windows average to exactly .5 multiples of the output scale: round half to even decides.
    x = np.array([[[[1, 2, 3, 4], [0, 0, 0, 0]]]], dtype=np.int8)  # 1x1x2x4
    y = reference.pool(x, "average", [2, 2], [2, 2], input_scale=1.0, output_scale=0.25)
    # window sums (1 + 2) / 4 = 0.75 -> 3.0 exactly; (3 + 4) / 4 = 1.75 -> 7.0
    np.testing.assert_array_equal(y, [[[[3, 7]]]])
    y = reference.pool(x, "average", [2, 2], [2, 2], input_scale=1.0, output_scale=1.5)
    # 0.75 / 1.5 = 0.5 -> 0 (even), 1.75 / 1.5 = 1.1666 -> 1
    np.testing.assert_array_equal(y, [[[[0, 1]]]])
    x = np.array([[[[5, 0], [0, 0]], [[7, 0], [0, 0]]]], dtype=np.int8)  # two channels
    y = reference.pool(x, "average", [2, 2], [2, 2], input_scale=1.0, output_scale=0.5)
    # 5/4 = 1.25 -> 2.5 -> 2 (even); 7/4 = 1.75 -> 3.5 -> 4 (even)
    np.testing.assert_array_equal(y.reshape(-1), [2, 4])


def test_int8_pool_is_dequantize_pool_requantize():
    x = RNG.integers(-128, 128, size=(2, 3, 8, 8)).astype(np.int8)
    for mode in ("max", "average"):
        y = reference.pool(x, mode, [3, 3], [2, 2], [1, 1], 0, input_scale=0.05, output_scale=0.02)
        float_result = reference.pool(x.astype(np.float64) * 0.05, mode, [3, 3], [2, 2], [1, 1], 0)
        expected = np.clip(np.rint(float_result / 0.02), -128, 127).astype(np.int8)
        assert y.dtype == np.int8
        np.testing.assert_array_equal(y, expected)
    # Same scale in and out: max pooling of int8 values is exact.
    y = reference.pool(x, "max", [2, 2], [2, 2], input_scale=0.1, output_scale=0.1)
    np.testing.assert_array_equal(y, x.reshape(2, 3, 4, 2, 4, 2).max(axis=(3, 5)))


def test_int8_pool_needs_scales():
    x = np.zeros((1, 1, 2, 2), np.int8)
    with pytest.raises(ValueError, match="input_scale and output_scale"):
        reference.pool(x, "max", [2, 2], [2, 2])
    with pytest.raises(ValueError, match="> 0"):
        reference.pool(x, "max", [2, 2], [2, 2], input_scale=0.0, output_scale=1.0)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(mode="min"), "mode"),
        (dict(kernel=[2]), "kernel"),
        (dict(kernel=[0, 2]), "kernel must be >= 1"),
        (dict(stride=[0, 1]), "stride"),
        (dict(padding=[2, 0]), "padding"),
        (dict(padding=[-1, 0]), "padding"),
        (dict(count_include_pad=2), "count_include_pad"),
        (dict(kernel=[9, 9], stride=[1, 1]), "too small"),
        (dict(kernel=[2.5, 2]), "integer"),
    ],
)
def test_pool_rejects_bad_fields(kwargs, message):
    arguments = dict(mode="max", kernel=[2, 2], stride=[2, 2], padding=[0, 0], count_include_pad=0)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        reference.pool(np.zeros((1, 1, 8, 8), np.float32), **arguments)


def test_pool_rejects_bad_input():
    with pytest.raises(ValueError, match="NCHW"):
        reference.pool(np.zeros((1, 8, 8), np.float32), "max", [2, 2], [2, 2])
    with pytest.raises(TypeError, match="int8"):
        reference.pool(np.zeros((1, 1, 8, 8), np.int32), "max", [2, 2], [2, 2])


# ------------------------------------------------------------------------------------------ FullyConnected


@pytest.mark.numeric
@pytest.mark.parametrize("input_shape", [(4, 12), (3, 2, 3, 2), (1, 5, 1, 1)])
def test_fully_connected_matches_onnxruntime_gemm(input_shape):
    x = RNG.normal(size=input_shape).astype(np.float32)
    k = int(np.prod(input_shape[1:]))
    weights = RNG.normal(size=(7, k)).astype(np.float32)
    bias = RNG.normal(size=7).astype(np.float32)
    flat = x.reshape(len(x), -1)
    expected = run_onnx_node("Gemm", {"a": flat, "b": weights, "c": bias}, transB=1)
    actual = reference.fully_connected(x, weights.reshape(-1), bias, num_outputs=7)
    assert actual.shape == (input_shape[0], 7) and actual.dtype == np.float32
    # ONNX Runtime's float32 dot products of K terms plus the bias, in any order, are off by
    # (K + 1) * 2^-24 * (sum |w x| + |b|) at most; the reference (float64, rounded once) by half an ulp more.
    bound = (k + 2) * EPS32 / 2 * (np.abs(flat) @ np.abs(weights).T + np.abs(bias))
    assert np.all(np.abs(actual - expected) <= bound), np.abs(actual - expected).max()
    # Exact: the same float64 BLAS call on the same numbers, the weights only handed over in another shape.
    np.testing.assert_array_equal(reference.fully_connected(x, weights, bias), actual)  # 2-D weights


@pytest.mark.numeric
def test_fully_connected_hand_checked_and_without_bias():
    # Exact in any sum order: small integers and halves, every partial sum representable.
    x = np.array([[1.0, 2.0], [3.0, -1.0]])
    weights = [1.0, 0.0, 0.5, 0.5, -1.0, 2.0]  # [[1, 0], [0.5, 0.5], [-1, 2]]
    np.testing.assert_array_equal(reference.fully_connected(x, weights, None, 3), [[1, 1.5, 3], [3, 1, -5]])
    np.testing.assert_array_equal(reference.fully_connected(x, weights, [], 3), [[1, 1.5, 3], [3, 1, -5]])
    np.testing.assert_array_equal(
        reference.fully_connected(x, weights, [1, 1, 1], 3), [[2, 2.5, 4], [4, 2, -4]]
    )


def test_fully_connected_rejects_bad_fields():
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError, match="expected num_outputs \\* K"):
        reference.fully_connected(x, np.zeros(10), None, 3)
    with pytest.raises(ValueError, match="bias"):
        reference.fully_connected(x, np.zeros(12), np.zeros(2), 3)
    with pytest.raises(ValueError, match="positive"):
        reference.fully_connected(x, np.zeros(12), None, 0)
    with pytest.raises(ValueError, match="num_outputs is required"):
        reference.fully_connected(x, np.zeros(12))
    with pytest.raises(ValueError, match="finite"):
        reference.fully_connected(x, np.full(12, np.nan), None, 3)
    with pytest.raises(ValueError, match=r"\[N, K\]"):
        reference.fully_connected(np.zeros(4, np.float32), np.zeros(12), None, 3)


# ------------------------------------------------------------------------------------- PReLU / LeakyReLU


@pytest.mark.numeric
@pytest.mark.parametrize("shape", [(3, 5), (2, 5, 4, 3), (1, 5, 2)])
def test_prelu_per_channel_matches_onnxruntime(shape):
    x = RNG.normal(size=shape).astype(np.float32)
    slopes = RNG.uniform(-0.5, 0.5, size=shape[1]).astype(np.float32)
    onnx_slope = slopes.reshape((shape[1],) + (1,) * (len(shape) - 2))  # ONNX broadcasts from the right
    expected = run_onnx_node("PRelu", {"x": x, "slope": onnx_slope})
    # Exact on every CPU: one product per value, rounded once (float64 then float32 rounds the same here, a
    # product of two float32 values being exact in float64).
    np.testing.assert_array_equal(reference.prelu(x, slopes), expected)


def test_prelu_shared_slope_and_rank1():
    x = np.array([-2.0, -0.0, 0.0, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(reference.prelu(x, [0.5]), [-1.0, 0.0, 0.0, 3.0])
    with pytest.raises(ValueError, match="rank >= 2"):
        reference.prelu(x, [0.5, 0.25, 0.1, 0.2])
    with pytest.raises(ValueError, match="3 channels"):
        reference.prelu(np.zeros((2, 3)), [0.1, 0.2])
    with pytest.raises(ValueError, match="empty"):
        reference.prelu(np.zeros((2, 3)), [])


@pytest.mark.numeric
@pytest.mark.parametrize("negative_slope", [0.01, 0.2, -1.5])
def test_leaky_relu_matches_onnxruntime(negative_slope):
    x = RNG.normal(size=(4, 3, 5)).astype(np.float32)
    expected = run_onnx_node("LeakyRelu", {"x": x}, alpha=negative_slope)
    # One product per value, as for PReLU (rtol below one float32 ulp, 1.2e-7).
    np.testing.assert_allclose(reference.leaky_relu(x, np.float32(negative_slope)), expected, rtol=1e-7)
    assert reference.leaky_relu(np.array([-100.0], np.float16)).dtype == np.float16
    assert reference.leaky_relu(np.array([-100.0]))[0] == pytest.approx(-1.0)  # default slope 0.01


def test_activation_field_errors():
    with pytest.raises(ValueError, match="negative_slope"):
        reference.leaky_relu(np.zeros(2, np.float32), [0.1, 0.2])
    with pytest.raises(ValueError, match="finite"):
        reference.leaky_relu(np.zeros(2, np.float32), np.inf)
    with pytest.raises(TypeError, match="float16, float32 or float64"):
        reference.leaky_relu(np.zeros(2, np.int32))


# ------------------------------------------------------------------------------------------- L2Normalize


@pytest.mark.numeric
@pytest.mark.parametrize(
    "shape,axis", [((5, 16), -1), ((5, 16), 0), ((2, 3, 4), 1), ((7,), 0), ((2, 1, 3), -2)]
)
def test_l2_normalize_matches_onnxruntime(shape, axis):
    x = RNG.normal(size=shape).astype(np.float32)
    expected = run_onnx_node("LpNormalization", {"x": x}, axis=axis, p=2)
    # n <= 16 squares in float32, any order, then a root and a division: off by (n/2 + 3) * 2^-24 = 6.6e-7
    # relative at most, under rtol.
    np.testing.assert_allclose(reference.l2_normalize(x, axis=axis), expected, rtol=1e-6, atol=1e-7)


def test_l2_normalize_eps_and_hand_checked():
    np.testing.assert_allclose(reference.l2_normalize(np.array([[3.0, 4.0]])), [[0.6, 0.8]])
    zeros = np.zeros((2, 4), np.float32)
    np.testing.assert_array_equal(reference.l2_normalize(zeros), zeros)  # eps keeps 0/0 away
    # Tiny vectors: sum of squares (1e-14) below eps (1e-12) -> divide by sqrt(eps) = 1e-6.
    tiny = np.array([[1e-7, 0.0]])
    np.testing.assert_allclose(reference.l2_normalize(tiny), [[0.1, 0.0]], rtol=1e-12)
    assert np.isnan(reference.l2_normalize(np.zeros((1, 2)), eps=0.0)).all()
    half = reference.l2_normalize(np.array([[300.0, 400.0]], np.float16))  # float64 math: no fp16 overflow
    assert half.dtype == np.float16
    np.testing.assert_allclose(half.astype(np.float64), [[0.6, 0.8]], rtol=1e-3)


def test_l2_normalize_rank_and_field_errors():
    with pytest.raises(ValueError, match="rank must be 1..8"):
        reference.l2_normalize(np.zeros((1,) * 9, np.float32))
    with pytest.raises(ValueError, match="out of range"):
        reference.l2_normalize(np.zeros((2, 3), np.float32), axis=2)
    with pytest.raises(ValueError, match="eps must be >= 0"):
        reference.l2_normalize(np.zeros((2, 3), np.float32), eps=-1.0)
    assert reference.l2_normalize(np.ones((1,) * 8, np.float32)).shape == (1,) * 8


# -------------------------------------------------------------------------------------------- ConcatCopy


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int32])
def test_concat_copy(dtype):
    a = RNG.integers(-5, 5, size=(2, 3, 4)).astype(dtype)
    b = RNG.integers(-5, 5, size=(5, 3, 4)).astype(dtype)
    out0, out1 = reference.concat_copy(a, b)
    assert out0.shape == (7, 3, 4) and out0.dtype == dtype
    np.testing.assert_array_equal(out0[:2], a)
    np.testing.assert_array_equal(out0[2:], b)
    np.testing.assert_array_equal(out1, a)
    assert not np.shares_memory(out1, a)


def test_concat_copy_errors():
    with pytest.raises(TypeError, match="same dtype"):
        reference.concat_copy(np.zeros((1, 2), np.float32), np.zeros((1, 2), np.float16))
    with pytest.raises(ValueError, match="same rank"):
        reference.concat_copy(np.zeros((1, 2)), np.zeros((1, 2, 1)))
    with pytest.raises(ValueError, match="other than axis 0"):
        reference.concat_copy(np.zeros((1, 2)), np.zeros((1, 3)))


def test_inputs_are_not_modified():
    x = RNG.normal(size=(2, 4, 6, 6)).astype(np.float32)
    before = x.copy()
    reference.pool(x, "max", [2, 2], [2, 2])
    reference.prelu(x, np.full(4, 0.1))
    reference.l2_normalize(x)
    reference.fully_connected(x, np.zeros(3 * 144), None, 3)
    np.testing.assert_array_equal(x, before)


def test_importing_the_registry_loads_no_plugin_reference():
    """Importing the registry reads no spec and imports no plugins/*/reference.py: each plugin's module is
    imported when one of its functions is first asked for, that plugin's alone."""
    code = (
        "import sys\n"
        "from trt_plugin_kit.specs import reference, spec\n"
        "loaded = lambda: sorted(m for m in sys.modules if 'plugin_references.' in m)\n"
        "assert loaded() == [] and spec._all.cache_info().currsize == 0, (loaded(), spec._all.cache_info())\n"
        "reference.REFERENCES['LeakyReLU']\n"
        "assert loaded() == ['trt_plugin_kit.plugin_references.leaky_relu'], loaded()\n"
        "from trt_plugin_kit.specs.reference import pool\n"
        "assert pool.__module__ == 'trt_plugin_kit.plugin_references.pool'\n"
        "try:\n"
        "    reference.no_such_reference\n"
        "except AttributeError as error:\n"
        "    assert 'no plugin reference defines it' in str(error)\n"
        "else:\n"
        "    raise AssertionError('an unknown name was found')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
