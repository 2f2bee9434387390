"""The CPU evaluator of our ONNX graphs, custom plugin nodes included: ONNX's own ReferenceEvaluator.

Standard operators run in :mod:`onnx.reference` (ONNX's reference implementation of every operator). The
custom nodes (domain ``trt_plugin_kit``) are registered with it as ``OpRun`` classes built from the NumPy
reference registry (:data:`trt_plugin_kit.specs.reference.REFERENCES`), so this is the CPU reference of the
*plugin* flavour. The chain of trust is: plugin kernels == reference (plugin harness), and
reference-in-the-graph == the native graph in ONNX Runtime (tests/unit/test_onnx_eval.py).

Like TensorRT's ONNX parser, a custom node is accepted only when its ``plugin_version`` and
``plugin_namespace`` attributes name our plugin library and every other attribute is a field of that
plugin, of the field's type and within its valid range (:func:`trt_plugin_kit.specs.nodes.node_fields`).
Every value the graph declares (inputs, outputs, value_info) is checked against its declared type and
shape while the graph runs.

    from trt_plugin_kit.models import onnx_eval
    outputs = onnx_eval.run(onnx.load("models/onnx/mnist_plugin.onnx"), {"image": images})
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops._op_list import DequantizeLinear_19
from onnx.reference.ops.op_conv import Conv as _ReferenceConv

from trt_plugin_kit.interface import PLUGIN_DOMAIN
from trt_plugin_kit.specs import nodes as plugin_nodes
from trt_plugin_kit.specs import reference

STANDARD_DOMAINS = ("", "ai.onnx")


class EvaluationError(ValueError):
    """The graph cannot be evaluated: unsupported operator or attribute, bad input, missing tensor."""


def _plugin_op(plugin: str) -> type[OpRun]:
    """The OpRun class ReferenceEvaluator runs for nodes ``trt_plugin_kit::<plugin>``."""

    def _run(self, *inputs, **attributes):  # attributes: the raw ones, node_fields checks them
        fields = plugin_nodes.node_fields(self.onnx_node)  # checked before the run: cannot fail here
        return reference.run(plugin, [x for x in inputs if x is not None], fields)

    return type(plugin, (OpRun,), {"op_domain": PLUGIN_DOMAIN, "_run": _run})


#: The plugin ops, one OpRun class per entry of the reference registry.
PLUGIN_OPS: tuple[type[OpRun], ...] = tuple(_plugin_op(name) for name in reference.REFERENCES)
# ReferenceEvaluator implements DequantizeLinear from opset 19 only. Opset 13's operator (our graphs are opset
# 17) is the same without the float8 types, so graphs older than opset 19 get that implementation.
_OLD_OPSET_OPS = (
    type(
        "DequantizeLinear",
        (DequantizeLinear_19,),
        {"op_domain": "", "op_schema": onnx.defs.get_schema("DequantizeLinear", 19)},
    ),
)


class _ConvFp32Accumulation(_ReferenceConv):
    """ONNX's Conv, with FP16 tensors computed in FP32 and rounded to FP16 once, as TensorRT's FP16
    convolutions accumulate in FP32. ONNX's own runs NumPy's FP16 matmul, which has no BLAS: a scalar loop
    rounding after every addition (LeNet's two convolutions over the 1,000 validation digits: 7.9 s, now
    well under 1 s)."""

    op_domain = ""

    def _run(self, X, W, B=None, **attributes):  # noqa: N803 - ONNX's operand names
        if X.dtype != np.float16:
            return super()._run(X, W, B, **attributes)
        wide = [None if t is None else t.astype(np.float32) for t in (X, W, B)]
        return (super()._run(*wide, **attributes)[0].astype(np.float16),)


_STANDARD_OVERRIDES = (type("Conv", (_ConvFp32Accumulation,), {}),)


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


def _check_nodes(graph: onnx.GraphProto) -> None:
    """Every node is a standard operator or one of our plugins with acceptable fields."""
    for node in graph.node:
        if node.domain == PLUGIN_DOMAIN:
            try:
                plugin_nodes.node_fields(node)
            except plugin_nodes.NodeError as error:
                raise EvaluationError(str(error)) from error
        elif node.domain not in STANDARD_DOMAINS:
            raise EvaluationError(
                f"node {node.name}: operator {node.domain}::{node.op_type} is not supported"
            )


def run(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], outputs: Iterable[str] | None = None
) -> dict[str, np.ndarray]:
    """Evaluates ``model`` on ``feeds``; returns the graph outputs, or the named tensors in ``outputs``.

    Any tensor of the graph (an intermediate activation too) may be requested in ``outputs``.
    """
    graph = model.graph
    initializers = {init.name for init in graph.initializer}
    inputs = {}
    for value_info in graph.input:
        if value_info.name in initializers:
            continue  # an initializer listed as input (old exporters)
        if value_info.name not in feeds:
            raise EvaluationError(f"missing input '{value_info.name}'")
        array = np.asarray(feeds[value_info.name])
        _check_feed(value_info, array)
        inputs[value_info.name] = array
    wanted = list(outputs) if outputs is not None else [o.name for o in graph.output]
    known = initializers | set(inputs) | {name for node in graph.node for name in node.output}
    missing = [name for name in wanted if name not in known]
    if missing:
        raise EvaluationError(f"tensor(s) {missing} are not in the graph")
    _check_nodes(graph)
    opset = next((o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS), 1)
    new_ops = [*PLUGIN_OPS, *_STANDARD_OVERRIDES, *(_OLD_OPSET_OPS if opset < 19 else ())]
    evaluator = ReferenceEvaluator(model, new_ops=new_ops, check_shape_annotations=True)
    return dict(zip(wanted, evaluator.run(wanted, inputs), strict=True))
