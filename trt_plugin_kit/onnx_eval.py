"""A small NumPy ONNX evaluator: runs our graphs node by node, custom plugin nodes included.

This is the CPU reference of the *plugin* flavour: the custom nodes (domain ``trt_plugin_kit``) execute
through :mod:`trt_plugin_kit.reference`, the NumPy specification the GPU plugins are checked against. The
chain of trust is: plugin kernels == reference (plugin harness), and reference-in-the-graph == the native
graph in ONNX Runtime (tests/test_onnx_eval.py).

Like TensorRT's ONNX parser, a custom node is accepted only when its ``plugin_version`` and
``plugin_namespace`` attributes name our plugin library and every other attribute is a field of that
plugin. Standard operators are the ones our models use (Conv, MaxPool, AveragePool, Flatten, Reshape, Gemm,
PRelu, Softmax, ReduceSumSquare, Max, Sqrt, Div, Cast, QuantizeLinear, DequantizeLinear, ...), implemented
in NumPy with float64 math and results cast to the input's dtype.

    from trt_plugin_kit import onnx_eval
    outputs = onnx_eval.run(onnx.load("models/onnx/mnist_plugin.onnx"), {"image": images})
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from trt_plugin_kit import PLUGIN_NAMESPACE, PLUGIN_VERSION, reference

PLUGIN_DOMAIN = "trt_plugin_kit"


class EvaluationError(ValueError):
    """The graph cannot be evaluated: unsupported operator or attribute, bad input, missing tensor."""


def _attributes(node: onnx.NodeProto) -> dict:
    values = {}
    for attribute in node.attribute:
        value = helper.get_attribute_value(attribute)
        values[attribute.name] = value.decode() if isinstance(value, bytes) else value
    return values


def _compute_dtype(*arrays: np.ndarray) -> np.dtype:
    """Result dtype of an elementwise float op (the inputs' float dtype; float32 for non-float inputs)."""
    dtypes = [a.dtype for a in arrays if np.issubdtype(a.dtype, np.floating)]
    return np.result_type(*dtypes) if dtypes else np.dtype(np.float32)


# --------------------------------------------------------------------------------------- standard ops


def _conv(node, attrs, x, w, b=None):
    if attrs.get("group", 1) != 1 or any(d != 1 for d in attrs.get("dilations", [1, 1])):
        raise EvaluationError(f"Conv {node.name}: only group=1 and dilations=1 are supported")
    if attrs.get("auto_pad", "NOTSET") != "NOTSET":
        raise EvaluationError(f"Conv {node.name}: auto_pad is not supported, use explicit pads")
    if x.ndim != 4:
        raise EvaluationError(f"Conv {node.name}: only 2-D convolution (NCHW input) is supported")
    kh, kw = w.shape[2:]
    sh, sw = attrs.get("strides", [1, 1])
    top, left, bottom, right = attrs.get("pads", [0, 0, 0, 0])
    x64 = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    windows = np.lib.stride_tricks.sliding_window_view(x64, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    y = np.einsum("nchwij,ocij->nohw", windows, w.astype(np.float64), optimize=True)
    if b is not None:
        y = y + b.astype(np.float64).reshape(1, -1, 1, 1)
    return y.astype(x.dtype)


def _pool_standard(node, attrs, x):
    if attrs.get("ceil_mode", 0) or attrs.get("auto_pad", "NOTSET") != "NOTSET":
        raise EvaluationError(f"{node.op_type} {node.name}: ceil_mode and auto_pad are not supported")
    if any(d != 1 for d in attrs.get("dilations", [1, 1])) or attrs.get("storage_order", 0):
        raise EvaluationError(f"{node.op_type} {node.name}: dilations and storage_order are not supported")
    kernel = attrs["kernel_shape"]
    pads = attrs.get("pads", [0, 0, 0, 0])
    if pads[:2] != pads[2:]:
        raise EvaluationError(f"{node.op_type} {node.name}: only symmetric pads are supported, got {pads}")
    mode = "max" if node.op_type == "MaxPool" else "average"
    return reference.pool(
        x,
        mode=mode,
        kernel=kernel,
        stride=attrs.get("strides", [1, 1]),
        padding=pads[:2],
        count_include_pad=attrs.get("count_include_pad", 0),
    )


def _gemm(node, attrs, a, b, c=None):
    a64 = a.astype(np.float64).T if attrs.get("transA", 0) else a.astype(np.float64)
    b64 = b.astype(np.float64).T if attrs.get("transB", 0) else b.astype(np.float64)
    y = attrs.get("alpha", 1.0) * (a64 @ b64)
    if c is not None:
        y = y + attrs.get("beta", 1.0) * c.astype(np.float64)
    return y.astype(a.dtype)


def _softmax(node, attrs, x):
    x64 = x.astype(np.float64)
    axis = attrs.get("axis", -1)
    exp = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    return (exp / exp.sum(axis=axis, keepdims=True)).astype(x.dtype)


def _reduce_sum_square(node, attrs, x, axes=None):
    axes = attrs.get("axes", None) if axes is None else axes.tolist()
    if axes is None or len(axes) == 0:
        if attrs.get("noop_with_empty_axes", 0):
            return x.copy()
        axes = list(range(x.ndim))
    x64 = x.astype(np.float64)
    return np.sum(x64 * x64, axis=tuple(axes), keepdims=bool(attrs.get("keepdims", 1))).astype(x.dtype)


def _elementwise(function: Callable) -> Callable:
    def run(node, attrs, *inputs):
        dtype = _compute_dtype(*inputs)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(function(*(i.astype(np.float64) for i in inputs))).astype(dtype)

    return run


def _variadic_max(node, attrs, *inputs):
    result = inputs[0].astype(np.float64)
    for other in inputs[1:]:
        result = np.maximum(result, other.astype(np.float64))
    return result.astype(_compute_dtype(*inputs))


def _prelu_standard(node, attrs, x, slope):
    x64 = x.astype(np.float64)
    return np.where(x64 > 0, x64, slope.astype(np.float64) * x64).astype(x.dtype)


def _flatten(node, attrs, x):
    axis = attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(int(np.prod(x.shape[:axis])), -1)


def _reshape(node, attrs, x, shape):
    shape = [x.shape[i] if s == 0 and not attrs.get("allowzero", 0) else int(s) for i, s in enumerate(shape)]
    return x.reshape(shape)


def _cast(node, attrs, x):
    return x.astype(helper.tensor_dtype_to_np_dtype(attrs["to"]))


def _quantize_linear(node, attrs, x, scale, zero_point=None):
    if scale.size != 1:
        raise EvaluationError(f"QuantizeLinear {node.name}: only per-tensor scales are supported")
    zp_dtype = zero_point.dtype if zero_point is not None else np.dtype(np.uint8)
    zp = float(zero_point.reshape(-1)[0]) if zero_point is not None else 0.0
    info = np.iinfo(zp_dtype)
    q = np.rint(x.astype(np.float64) / float(scale.reshape(-1)[0])) + zp  # rint = round half to even
    return np.clip(q, info.min, info.max).astype(zp_dtype)


def _dequantize_linear(node, attrs, x, scale, zero_point=None):
    if scale.size != 1:
        raise EvaluationError(f"DequantizeLinear {node.name}: only per-tensor scales are supported")
    zp = float(zero_point.reshape(-1)[0]) if zero_point is not None else 0.0
    return ((x.astype(np.float64) - zp) * float(scale.reshape(-1)[0])).astype(scale.dtype)


STANDARD_OPS: dict[str, Callable] = {
    "Conv": _conv,
    "MaxPool": _pool_standard,
    "AveragePool": _pool_standard,
    "Gemm": _gemm,
    "Softmax": _softmax,
    "ReduceSumSquare": _reduce_sum_square,
    "Max": _variadic_max,
    "Sqrt": _elementwise(np.sqrt),
    "Div": _elementwise(np.divide),
    "Mul": _elementwise(np.multiply),
    "Add": _elementwise(np.add),
    "Relu": _elementwise(lambda x: np.maximum(x, 0.0)),
    "PRelu": _prelu_standard,
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Identity": lambda node, attrs, x: x.copy(),
    "Cast": _cast,
    "QuantizeLinear": _quantize_linear,
    "DequantizeLinear": _dequantize_linear,
}


# ----------------------------------------------------------------------------------------- plugin ops


def _plugin_pool(
    x, mode, kernel, stride=None, padding=(0, 0), count_include_pad=0, input_scale=None, output_scale=None
):
    return reference.pool(x, mode, kernel, stride, padding, count_include_pad, input_scale, output_scale)


PLUGIN_OPS: dict[str, Callable] = {
    "L2Normalize": lambda x, axis=-1, eps=1e-12: reference.l2_normalize(x, axis=axis, eps=np.float32(eps)),
    "PReLU": lambda x, slopes: reference.prelu(x, slopes),
    "LeakyReLU": lambda x, negative_slope=0.01: reference.leaky_relu(x, np.float32(negative_slope)),
    "FullyConnected": lambda x, weights, num_outputs, bias=None: reference.fully_connected(
        x, weights, bias, num_outputs
    ),
    "Pool": _plugin_pool,
    "ConcatCopy": reference.concat_copy,
}
PLUGIN_FIELDS = {
    "L2Normalize": {"axis", "eps"},
    "PReLU": {"slopes"},
    "LeakyReLU": {"negative_slope"},
    "FullyConnected": {"weights", "bias", "num_outputs"},
    "Pool": {"mode", "kernel", "stride", "padding", "count_include_pad", "input_scale", "output_scale"},
    "ConcatCopy": set(),
}


def _run_plugin(node: onnx.NodeProto, inputs: list[np.ndarray]):
    if node.op_type not in PLUGIN_OPS:
        raise EvaluationError(f"node {node.name}: {node.op_type} is not a plugin of {PLUGIN_NAMESPACE}")
    attrs = _attributes(node)
    version = attrs.pop("plugin_version", None)
    namespace = attrs.pop("plugin_namespace", None)
    if version != PLUGIN_VERSION or namespace != PLUGIN_NAMESPACE:
        raise EvaluationError(
            f"node {node.name}: TensorRT would not find the plugin: plugin_version={version!r}, "
            f"plugin_namespace={namespace!r} (need {PLUGIN_VERSION!r} and {PLUGIN_NAMESPACE!r})"
        )
    unknown = set(attrs) - PLUGIN_FIELDS[node.op_type]
    if unknown:
        raise EvaluationError(f"node {node.name}: {node.op_type} has no field(s) {sorted(unknown)}")
    # INT/INTS fields reach the plugin as int32, FLOAT/FLOATS as float32: mirror that.
    fields = {}
    for name, value in attrs.items():
        if isinstance(value, float):
            value = np.float32(value)
        elif isinstance(value, list) and value and isinstance(value[0], float):
            value = np.asarray(value, dtype=np.float32)
        fields[name] = value
    try:
        return PLUGIN_OPS[node.op_type](*inputs, **fields)
    except TypeError as error:
        raise EvaluationError(f"node {node.name} ({node.op_type}): {error}") from error


# ------------------------------------------------------------------------------------------------- run


def _check_feed(value_info: onnx.ValueInfoProto, array: np.ndarray) -> None:
    tensor_type = value_info.type.tensor_type
    expected = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
    if array.dtype != expected:
        raise EvaluationError(f"input '{value_info.name}' must be {expected}, got {array.dtype}")
    dims = tensor_type.shape.dim
    if len(dims) != array.ndim:
        raise EvaluationError(
            f"input '{value_info.name}' must have rank {len(dims)}, got shape {array.shape}"
        )
    for axis, dim in enumerate(dims):
        if dim.HasField("dim_value") and dim.dim_value != array.shape[axis]:
            raise EvaluationError(
                f"input '{value_info.name}': dimension {axis} must be {dim.dim_value}, got {array.shape}"
            )


def run(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], outputs: Iterable[str] | None = None
) -> dict[str, np.ndarray]:
    """Evaluates ``model`` on ``feeds``; returns the graph outputs, or the named tensors in ``outputs``.

    Any tensor of the graph (an intermediate activation too) may be requested in ``outputs``.
    """
    graph = model.graph
    values: dict[str, np.ndarray] = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    for value_info in graph.input:
        if value_info.name in values:
            continue  # an initializer listed as input (old exporters)
        if value_info.name not in feeds:
            raise EvaluationError(f"missing input '{value_info.name}'")
        array = np.asarray(feeds[value_info.name])
        _check_feed(value_info, array)
        values[value_info.name] = array
    wanted = list(outputs) if outputs is not None else [o.name for o in graph.output]

    for node in graph.node:
        inputs = []
        for name in node.input:
            if name == "":
                inputs.append(None)
            elif name in values:
                inputs.append(values[name])
            else:
                raise EvaluationError(f"node {node.name}: input '{name}' is not computed before it")
        while inputs and inputs[-1] is None:
            inputs.pop()  # trailing optional inputs left out
        if node.domain == PLUGIN_DOMAIN:
            result = _run_plugin(node, inputs)
        elif node.domain in ("", "ai.onnx") and node.op_type in STANDARD_OPS:
            result = STANDARD_OPS[node.op_type](node, _attributes(node), *inputs)
        else:
            domain = node.domain or "ai.onnx"
            raise EvaluationError(f"node {node.name}: operator {domain}::{node.op_type} is not supported")
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(node.output):
            raise EvaluationError(
                f"node {node.name}: produced {len(results)} outputs, graph has {len(node.output)}"
            )
        for name, array in zip(node.output, results, strict=True):
            if name:
                values[name] = array

    missing = [name for name in wanted if name not in values]
    if missing:
        raise EvaluationError(f"tensor(s) {missing} are not in the graph")
    return {name: values[name] for name in wanted}
