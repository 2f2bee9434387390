"""A plugin-flavour ONNX model on the CPU: standard operators in ONNX Runtime, plugin nodes by references.

The CPU stand-in of any model the engine builder consumes (``model_repository/<name>/configs/cpu.pbtxt``,
served by :mod:`trt_plugin_kit.serving.plugin_onnx_backend`): the *same* ONNX file, so what is served here is
what TensorRT builds on a GPU host. The graph is cut at its plugin nodes (domain ``trt_plugin_kit``) into
segments, in the graph's own (topological) order: each run of standard nodes becomes one ONNX Runtime session,
each plugin node a call of its NumPy reference (:func:`trt_plugin_kit.specs.reference.run`) with the fields
the node hands the plugin (:func:`trt_plugin_kit.specs.nodes.node_fields`, checked once at load).

Why this and not the alternatives (mnist_plugin.onnx, one thread: records/plugin-graph/plugin-graph-cpu.md,
``scripts/bench_plugin_graph.py``):

* ONNX's ReferenceEvaluator on the whole graph (:mod:`trt_plugin_kit.models.onnx_eval`, the test oracle): its
  Conv is Python loops, 1.7 s a call at batch 1: far too slow to serve. The segments: 0.01 s (batch 1) and
  0.12 s (batch 64); ONNX Runtime alone on the native graph 0.04 s at 64 (the references compute in float64).
* onnxruntime-extensions' PyOp: custom ops must live in its own domain (``ai.onnx.contrib``), declare fixed
  output types and have no FLOATS/INTS attributes, so every graph would need rewriting and our array fields
  (FullyConnected's weights, Pool's kernel) would not pass; and it is one more native dependency.
* Segments: ONNX Runtime's speed on the standard part, the reference on the plugin nodes, ONNX Runtime and
  NumPy only (already dependencies).

Segment sessions are made on first use for the input types seen (a plugin's output type follows its inputs:
FP32, FP16 or INT8), every dimension symbolic, so one session serves every batch size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from trt_plugin_kit.interface import PLUGIN_DOMAIN
from trt_plugin_kit.specs import nodes as plugin_nodes
from trt_plugin_kit.specs import reference
from trt_plugin_kit.specs import spec as plugin_spec

STANDARD_DOMAINS = ("", "ai.onnx")


class GraphError(ValueError):
    """The model cannot be run here: an operator of another domain, a bad plugin node, a bad input."""


def _subgraph_inputs(node: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs (If, Loop, Scan) read from the enclosing graph."""
    names: set[str] = set()
    for attribute in node.attribute:
        graphs = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
        for graph in graphs:
            local = {i.name for i in graph.input} | {i.name for i in graph.initializer}
            for inner in graph.node:
                local.update(inner.output)
                names.update(n for n in [*inner.input, *_subgraph_inputs(inner)] if n and n not in local)
    return names


def _reads(node: onnx.NodeProto) -> set[str]:
    return {n for n in node.input if n} | _subgraph_inputs(node)


def _as_arrays(plugin: str, fields: dict) -> dict:
    """Float array fields as float32 arrays (what the plugin receives), made once: turning FullyConnected's
    400,000 weights from a list into an array took 0.12 s of every request."""
    spec = plugin_spec.get(plugin)
    return {
        name: np.asarray(value, dtype=np.float32)
        if spec.field(name).type == "float32" and not spec.field(name).is_scalar
        else value
        for name, value in fields.items()
        if value is not None  # unset optional fields are left out, as reference.run does
    }


@dataclass
class _Plugin:
    node: onnx.NodeProto
    fields: dict

    def run(self, values: dict[str, np.ndarray]) -> None:
        inputs = [values[name] for name in self.node.input if name]
        # The fields were completed and checked at load (node_fields): reference.run would redo that (and
        # turn the arrays back into lists) on every request.
        outputs = reference.REFERENCES[self.node.op_type](*inputs, **self.fields)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        values.update(zip(self.node.output, outputs, strict=True))


@dataclass
class _Segment:
    """A run of standard nodes: one ONNX Runtime session per set of input types."""

    nodes: list[onnx.NodeProto]
    inputs: list[str]  # computed before the segment (graph inputs, earlier outputs)
    outputs: list[str]  # needed after it (later segments, graph outputs)
    initializers: list[onnx.TensorProto]
    opsets: list[onnx.OperatorSetIdProto]
    options: ort.SessionOptions
    sessions: dict[tuple, ort.InferenceSession] = field(default_factory=dict)

    def _session(self, feeds: dict[str, np.ndarray]) -> ort.InferenceSession:
        key = tuple((feeds[name].dtype.str, feeds[name].ndim) for name in self.inputs)
        if key not in self.sessions:

            def symbolic(name: str, array: np.ndarray) -> onnx.ValueInfoProto:
                elem = helper.np_dtype_to_tensor_dtype(array.dtype)
                return helper.make_tensor_value_info(name, elem, [f"{name}_{i}" for i in range(array.ndim)])

            graph = helper.make_graph(
                self.nodes,
                "segment",
                [symbolic(name, feeds[name]) for name in self.inputs],
                [onnx.ValueInfoProto(name=name) for name in self.outputs],  # types: ONNX Runtime infers
                self.initializers,
            )
            model = helper.make_model(graph, opset_imports=self.opsets)
            self.sessions[key] = ort.InferenceSession(
                model.SerializeToString(), self.options, providers=["CPUExecutionProvider"]
            )
        return self.sessions[key]

    def run(self, values: dict[str, np.ndarray]) -> None:
        feeds = {name: values[name] for name in self.inputs}
        outputs = self._session(feeds).run(self.outputs, feeds)
        values.update(zip(self.outputs, outputs, strict=True))


class PluginGraph:
    """The model's graph, runnable: ``PluginGraph("model.onnx").run({"x": array})`` -> {output: array}."""

    def __init__(self, model: onnx.ModelProto | str | Path, intra_op_threads: int = 1):
        if not isinstance(model, onnx.ModelProto):
            model = onnx.load(str(model))
        graph = model.graph
        self.input_info = {
            i.name: i for i in graph.input if i.name not in {init.name for init in graph.initializer}
        }
        self.output_info = list(graph.output)
        self.output_names = [o.name for o in graph.output]
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = 1
        standard_opsets = [o for o in model.opset_import if o.domain in STANDARD_DOMAINS]
        initializers = {init.name: init for init in graph.initializer}

        groups: list[list[onnx.NodeProto] | onnx.NodeProto] = []
        for node in graph.node:
            if node.domain == PLUGIN_DOMAIN:
                groups.append(node)
            elif node.domain in STANDARD_DOMAINS:
                if not groups or not isinstance(groups[-1], list):
                    groups.append([])
                groups[-1].append(node)
            else:
                raise GraphError(f"node {node.name}: operator {node.domain}::{node.op_type} is not supported")

        # Which names each later step (and the graph's outputs) still needs, walking backwards.
        needed_after: list[set[str]] = []
        needed = set(self.output_names)
        for group in reversed(groups):
            needed_after.append(set(needed))
            for node in group if isinstance(group, list) else [group]:
                needed |= _reads(node)
        needed_after.reverse()

        self.steps: list[_Plugin | _Segment] = []
        for group, after in zip(groups, needed_after, strict=True):
            if not isinstance(group, list):
                try:
                    fields = plugin_nodes.node_fields(group)
                except plugin_nodes.NodeError as error:
                    raise GraphError(str(error)) from error
                if group.op_type not in reference.REFERENCES:
                    raise GraphError(f"node {group.name}: no reference for plugin {group.op_type}")
                self.steps.append(_Plugin(group, _as_arrays(group.op_type, fields)))
                continue
            produced = {name for node in group for name in node.output if name}
            reads = set().union(*(_reads(node) for node in group))
            outside = sorted(reads - produced)
            self.steps.append(
                _Segment(
                    nodes=group,
                    inputs=[n for n in outside if n not in initializers],
                    outputs=[n for node in group for n in node.output if n in after],
                    initializers=[initializers[n] for n in outside if n in initializers],
                    opsets=standard_opsets,
                    options=options,
                )
            )
        # Initializers read by plugin nodes (weights as inputs) are values from the start.
        self._constants = {
            name: onnx.numpy_helper.to_array(init)
            for name, init in initializers.items()
            if any(isinstance(s, _Plugin) and name in s.node.input for s in self.steps)
        }

    def check_feeds(self, feeds: dict[str, np.ndarray]) -> None:
        """Every graph input present with its declared element type and rank (and fixed dims)."""
        for name, info in self.input_info.items():
            if name not in feeds:
                raise GraphError(f"missing input '{name}'")
            array, tensor_type = feeds[name], info.type.tensor_type
            expected = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
            if array.dtype != expected:
                raise GraphError(f"input '{name}' must be {expected}, got {array.dtype}")
            dims = tensor_type.shape.dim
            if len(dims) != array.ndim or any(
                d.HasField("dim_value") and d.dim_value != size
                for d, size in zip(dims, array.shape, strict=True)
            ):
                declared = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in dims]
                raise GraphError(
                    f"input '{name}' has shape {list(array.shape)}, the model declares {declared}"
                )

    def run(
        self, feeds: dict[str, np.ndarray], outputs: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        self.check_feeds(feeds)
        values = {**self._constants, **feeds}
        for step in self.steps:
            step.run(values)
        return {name: values[name] for name in (outputs or self.output_names)}


def _graph_tensor(info: onnx.ValueInfoProto) -> tuple[np.dtype | None, list[int | None] | None]:
    """(element type, dims with None for symbolic) of a graph input or output; None where not declared."""
    if not info.type.HasField("tensor_type"):
        return None, None
    tensor_type = info.type.tensor_type
    dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type) if tensor_type.elem_type else None
    if not tensor_type.HasField("shape"):
        return dtype, None
    return dtype, [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]


def interface_mismatches(graph: PluginGraph, config: dict) -> list[str]:
    """How a Triton model configuration (the JSON Triton hands ``initialize``) differs from the graph's
    inputs and outputs: names, element types, ranks (the batch dimension first when max_batch_size > 0)
    and fixed dims. Empty when they agree."""
    from tritonclient.utils import triton_to_np_dtype  # noqa: PLC0415 - tritonclient is heavy to import

    batch = [None] if int(config.get("max_batch_size", 0)) > 0 else []
    declared = {
        "input": {i.name: _graph_tensor(i) for i in graph.input_info.values()},
        "output": {o.name: _graph_tensor(o) for o in graph.output_info},
    }
    problems = []
    for kind, tensors in declared.items():
        configured = {tensor["name"]: tensor for tensor in config.get(kind, [])}
        if set(configured) != set(tensors):
            problems.append(
                f"{kind}s {sorted(configured)} in the configuration, {sorted(tensors)} in the graph"
            )
            continue
        for name, (dtype, dims) in tensors.items():
            tensor = configured[name]
            wanted = np.dtype(triton_to_np_dtype(tensor["data_type"].removeprefix("TYPE_")))
            if dtype is not None and dtype != wanted:
                problems.append(
                    f"{kind} '{name}' is {tensor['data_type']} in the configuration, {dtype} in the graph"
                )
            if dims is None or "reshape" in tensor:
                continue
            config_dims = batch + [int(d) for d in tensor["dims"]]
            if len(config_dims) != len(dims) or any(
                c is not None and c >= 0 and g is not None and c != g
                for c, g in zip(config_dims, dims, strict=True)
            ):
                shown = ["batch" if d is None else d for d in config_dims]
                problems.append(
                    f"{kind} '{name}' is {shown} in the configuration, "
                    f"{['?' if d is None else d for d in dims]} in the graph"
                )
    return problems
