"""The NumPy references of the transformer plugins (issue 43): RmsNormLastAxis and FlashAttentionTriton
against ONNX Runtime's own opset-23 RMSNormalization and Attention (another implementation of the same math),
in FP32 and FP16, BF16 through ml_dtypes (computed in float64, rounded once), the shapes and fields they
refuse, and a BF16 graph with a plugin node through the ONNX evaluator."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from trt_plugin_kit.models import onnx_eval
from trt_plugin_kit.specs import nodes as plugin_nodes
from trt_plugin_kit.specs import reference
from trt_plugin_kit.specs.reference_utils import BFLOAT16

ONNX_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16}


def onnxruntime_op(op_type: str, inputs: dict[str, np.ndarray], **attributes) -> np.ndarray:
    """One opset-23 node run by ONNX Runtime on the CPU."""
    dtype = ONNX_TYPES[next(iter(inputs.values())).dtype]
    first = next(iter(inputs.values()))
    graph = helper.make_graph(
        [helper.make_node(op_type, list(inputs), ["out"], **attributes)],
        op_type,
        [helper.make_tensor_value_info(name, dtype, list(a.shape)) for name, a in inputs.items()],
        [helper.make_tensor_value_info("out", dtype, list(first.shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)[0]


@pytest.mark.parametrize("shape", [(7,), (2, 3, 64), (4, 1000)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_rms_norm_matches_onnxruntime(shape, dtype):
    rng = np.random.default_rng(len(shape))
    x = rng.uniform(-3, 3, shape).astype(dtype)
    weight = rng.uniform(0.5, 1.5, shape[-1]).astype(dtype)
    (ours,) = reference.run("RmsNormLastAxis", [x, weight], {"eps": 1e-5})
    theirs = onnxruntime_op("RMSNormalization", {"x": x, "weight": weight}, axis=-1, epsilon=1e-5)
    assert ours.dtype == dtype
    tolerance = 1e-5 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(
        ours.astype(np.float64), theirs.astype(np.float64), rtol=tolerance, atol=tolerance
    )


@pytest.mark.parametrize(
    "q_shape, kv_length, fields",
    [((1, 2, 5, 16), 5, {}), ((2, 3, 33, 32), 33, {"causal": 1}), ((1, 1, 4, 64), 9, {"scale": 0.2})],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_attention_matches_onnxruntime(q_shape, kv_length, fields, dtype):
    rng = np.random.default_rng(kv_length)
    kv_shape = (*q_shape[:2], kv_length, q_shape[3])
    q, k, v = (rng.uniform(-2, 2, s).astype(dtype) for s in (q_shape, kv_shape, kv_shape))
    (ours,) = reference.run("FlashAttentionTriton", [q, k, v], fields)
    attributes = {"is_causal": fields.get("causal", 0)}
    if "scale" in fields:
        attributes["scale"] = fields["scale"]
    theirs = onnxruntime_op("Attention", {"q": q, "k": k, "v": v}, **attributes)
    tolerance = 1e-5 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(
        ours.astype(np.float64), theirs.astype(np.float64), rtol=tolerance, atol=tolerance
    )


def test_bfloat16_is_computed_wide_and_rounded_once():
    """BF16 in, BF16 out: the float64 result of the same (exactly widened) values, rounded once."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, (4, 64)).astype(BFLOAT16)
    weight = rng.uniform(0.5, 1.5, 64).astype(BFLOAT16)
    (ours,) = reference.run("RmsNormLastAxis", [x, weight], {})
    (wide,) = reference.run("RmsNormLastAxis", [x.astype(np.float64), weight.astype(np.float64)], {})
    assert ours.dtype == BFLOAT16
    assert np.array_equal(ours, wide.astype(BFLOAT16))
    q = rng.uniform(-2, 2, (1, 2, 9, 16)).astype(BFLOAT16)
    (attended,) = reference.run("FlashAttentionTriton", [q, q, q], {"causal": 1})
    (wide,) = reference.run("FlashAttentionTriton", [q.astype(np.float64)] * 3, {"causal": 1})
    assert attended.dtype == BFLOAT16 and np.array_equal(attended, wide.astype(BFLOAT16))
    (gated,) = reference.run("SwiGLUSplit", [x], {})
    assert gated.dtype == BFLOAT16 and gated.shape == (4, 32)


def test_attention_error_scale_bounds_the_output():
    rng = np.random.default_rng(5)
    q, k, v = (rng.uniform(-2, 2, (1, 1, 6, 16)) for _ in range(3))
    (out,) = reference.run("FlashAttentionTriton", [q, k, v], {})
    (scale,) = reference.error_scales("FlashAttentionTriton", [q, k, v], {})
    assert np.all(np.abs(out) <= scale + 1e-12) and np.all(scale > 0)


@pytest.mark.parametrize(
    "q_shape, kv_shape, fields, message",
    [
        ((1, 1, 8, 24), (1, 1, 8, 24), {}, "head size D = 24"),
        ((1, 8, 16), (1, 8, 16), {}, "[B, H, S, D]"),
        ((1, 1, 8, 16), (1, 1, 8, 32), {}, "share q's"),
        ((1, 1, 8, 16), (1, 1, 16385, 16), {}, "S_kv = 16385"),
        ((1, 1, 8, 16), (1, 1, 8, 16), {"causal": 2}, "causal"),
        ((1, 1, 8, 16), (1, 1, 8, 16), {"scale": 0.0}, "scale"),
    ],
)
def test_attention_refuses_what_the_plugin_refuses(q_shape, kv_shape, fields, message):
    q, k = np.zeros(q_shape, np.float32), np.zeros(kv_shape, np.float32)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        reference.REFERENCES["FlashAttentionTriton"](q, k, k, **fields)


def test_rms_norm_refuses_what_the_plugin_refuses():
    x = np.ones((2, 8), np.float32)
    with pytest.raises(ValueError, match="weight must be"):
        reference.REFERENCES["RmsNormLastAxis"](x, np.ones(7, np.float32))
    with pytest.raises(ValueError, match="eps"):
        reference.REFERENCES["RmsNormLastAxis"](x, np.ones(8, np.float32), eps=0.0)
    with pytest.raises(TypeError, match="dtype"):
        reference.REFERENCES["RmsNormLastAxis"](x, np.ones(8, np.float16))


def test_bfloat16_graph_with_a_plugin_node_evaluates():
    """A BF16 graph (what a strongly typed TensorRT network takes as written): the plugin node's inputs and
    output are BF16 and the evaluator's checks of declared types pass."""
    node = plugin_nodes.make_node("RmsNormLastAxis", ["x", "weight"], ["y"], "norm", eps=1e-6)
    io = [
        helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 64]),
        helper.make_tensor_value_info("weight", TensorProto.BFLOAT16, [64]),
    ]
    out = [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 64])]
    opsets = [helper.make_opsetid("", 19), helper.make_opsetid("trt_plugin_kit", 1)]
    model = helper.make_model(helper.make_graph([node], "bf16", io, out), opset_imports=opsets)
    x = np.random.default_rng(7).uniform(-2, 2, (2, 64)).astype(BFLOAT16)
    weight = np.ones(64, BFLOAT16)
    y = onnx_eval.run(model, {"x": x, "weight": weight})["y"]
    assert y.dtype == BFLOAT16
    assert np.array_equal(y, reference.run("RmsNormLastAxis", [x, weight], {"eps": 1e-6})[0])
