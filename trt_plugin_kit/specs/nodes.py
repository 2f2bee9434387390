"""ONNX nodes of our plugins, built from their specs (plugins/<name>/spec.yaml) and checked against them.

A plugin node is what TensorRT's ONNX parser turns into our plugin: ``op_type`` = creator name, domain
:data:`PLUGIN_DOMAIN`, the attributes ``plugin_version`` and ``plugin_namespace`` (the parser looks the
creator up with them) and one typed attribute per field, *every* field, so that the parser has nothing to
warn about ("Attribute ... not found in plugin node"): defaults are written out, and an optional field that
is not set (FullyConnected's bias, Pool's INT8 scales) is an empty FLOATS/INTS attribute, which the plugin
reads as unset.

    node = plugin_nodes.make_node("Pool", ["x"], ["y"], "pool1", mode="max", kernel=[2, 2])
    fields = plugin_nodes.node_fields(node)    # every field, checked (what the plugin would receive)

The parser dispatches on the exact ``op_type``, whatever the domain: a plugin named like an operator it
imports itself (ONNX's ``PRelu``, ``LeakyRelu``, ``LpNormalization``...) would never reach our creator.
:func:`make_node` refuses such names and warns (:class:`PluginNameWarning`) about names that differ from one
only in case, unless its spec names that operator as a known ``lookalike`` (our ``PReLU`` and ``LeakyReLU``:
distinct for the parser, but easy to mistype).
"""

from __future__ import annotations

import warnings
from typing import Any

import onnx
import onnx.defs
from onnx import AttributeProto, helper

from trt_plugin_kit.interface import PLUGIN_DOMAIN, PLUGIN_NAMESPACE
from trt_plugin_kit.specs import spec as plugin_spec

LOOKUP_ATTRIBUTES = ("plugin_version", "plugin_namespace")

# Operators TensorRT's ONNX parser imports itself besides the ONNX standard ones (onnx-tensorrt's
# onnxOpImporters.cpp, TensorRT 10.x): a plugin with one of these names would be taken by that importer.
TENSORRT_IMPORTERS = (
    "ImageScaler ParametricSoftplus ScaledTanh TRT_AveragePool TRT_Conv TRT_Deconv TRT_FloorDiv TRT_Gather "
    "TRT_INT4DequantizeLinear TRT_INT4QuantizeLinear TRT_FP8DequantizeLinear TRT_FP8QuantizeLinear "
    "TRT_MatMul TRT_MaxAverageBlendPool TRT_MaxPool TRT_PluginV2 TRT_RaggedSoftmax TRT_Resize TRT_Scale "
    "TRT_Shuffle TRT_Slice TRT_TopK_Min"
).split()

_ATTRIBUTE_TYPES = {  # (field type, scalar?) -> ONNX attribute type
    ("float32", True): AttributeProto.FLOAT,
    ("float32", False): AttributeProto.FLOATS,
    ("int32", True): AttributeProto.INT,
    ("int32", False): AttributeProto.INTS,
    ("char", False): AttributeProto.STRING,
}
_UNSET_TYPES = {"float32": AttributeProto.FLOATS, "int32": AttributeProto.INTS}


class NodeError(ValueError):
    """A plugin node TensorRT could not use: unknown plugin or field, wrong lookup attributes, bad value."""


class PluginNameWarning(UserWarning):
    """A plugin name that differs from an operator TensorRT's parser imports itself only in case."""


def builtin_names() -> frozenset[str]:
    """Operator names TensorRT's ONNX parser would import with its own importer."""
    return frozenset(s.name for s in onnx.defs.get_all_schemas_with_history()) | frozenset(TENSORRT_IMPORTERS)


_warned: set[str] = set()


def check_name(op_type: str, acknowledged: str | None = None) -> None:
    """Refuses a name TensorRT imports itself; warns (once per name) about one that differs only in case,
    unless the spec acknowledges that operator as its ``lookalike``."""
    builtins = builtin_names()
    if op_type in builtins:
        raise NodeError(
            f"{op_type!r} is an operator TensorRT's ONNX parser imports with its own importer (it dispatches "
            "on op_type alone, whatever the domain): name the plugin differently"
        )
    lookalikes = sorted(name for name in builtins if name.lower() == op_type.lower())
    if acknowledged is not None and acknowledged not in lookalikes:
        raise NodeError(
            f"{op_type}: the spec's lookalike {acknowledged!r} is not an operator differing in case"
        )
    if lookalikes and lookalikes != [acknowledged] and op_type not in _warned:
        _warned.add(op_type)
        warnings.warn(
            f"plugin {op_type!r} differs from the operator {lookalikes[0]!r} only in case: TensorRT matches "
            "the exact spelling, so the node stays ours; keep that spelling and the plugin_namespace",
            PluginNameWarning,
            stacklevel=3,
        )


def _attribute(field: plugin_spec.FieldSpec, value: Any) -> AttributeProto:
    if value is None:  # an optional field left unset: present (no parser warning) and empty
        return helper.make_attribute(field.name, [], attr_type=_UNSET_TYPES[field.type])
    return helper.make_attribute(field.name, value, attr_type=_ATTRIBUTE_TYPES[(field.type, field.is_scalar)])


def make_node(plugin: str, inputs: list[str], outputs: list[str], name: str, **fields) -> onnx.NodeProto:
    """The node TensorRT's ONNX parser turns into plugin ``plugin`` with these fields (every field written,
    defaults included). Raises NodeError naming the field for an unknown field, a wrong type or length, or a
    value outside the field's valid range; refuses a plugin name TensorRT imports itself."""
    try:
        spec = plugin_spec.get(plugin)
        values = spec.complete(fields)
    except plugin_spec.SpecError as error:
        raise NodeError(str(error)) from error
    check_name(spec.name, spec.lookalike)
    if len(inputs) != len(spec.inputs) or len(outputs) != len(spec.outputs):
        raise NodeError(
            f"{spec.name} takes {len(spec.inputs)} input(s) and gives {len(spec.outputs)} output(s), "
            f"got {len(inputs)} and {len(outputs)}"
        )
    node = helper.make_node(spec.name, inputs, outputs, name=name, domain=PLUGIN_DOMAIN)
    node.attribute.extend(
        [
            helper.make_attribute("plugin_version", spec.version),
            helper.make_attribute("plugin_namespace", PLUGIN_NAMESPACE),
            *(_attribute(field, values[field.name]) for field in spec.fields),
        ]
    )
    return node


def node_fields(node: onnx.NodeProto) -> dict[str, Any]:
    """The fields a plugin node hands its plugin: every field, checked against the spec, defaults filled in,
    unset optional fields as None. Raises NodeError for what TensorRT's parser or our creator would refuse."""
    specs = plugin_spec.all_specs()
    if node.domain != PLUGIN_DOMAIN or node.op_type not in specs:
        raise NodeError(f"node {node.name}: {node.op_type} is not a plugin of {PLUGIN_NAMESPACE}")
    spec = specs[node.op_type]
    attributes = {a.name: a for a in node.attribute}
    lookup = {key: attributes.pop(key, None) for key in LOOKUP_ATTRIBUTES}
    version, namespace = (helper.get_attribute_value(a).decode() if a else None for a in lookup.values())
    if version != spec.version or namespace != PLUGIN_NAMESPACE:
        raise NodeError(
            f"node {node.name}: TensorRT would not find the plugin: plugin_version={version!r}, "
            f"plugin_namespace={namespace!r} (need {spec.version!r} and {PLUGIN_NAMESPACE!r})"
        )
    unknown = sorted(set(attributes) - set(spec.field_names))
    if unknown:
        raise NodeError(f"node {node.name}: {node.op_type} has no field(s) {unknown}")
    values: dict[str, Any] = {}
    for name, attribute in attributes.items():
        field = spec.field(name)
        value = helper.get_attribute_value(attribute)
        if attribute.type == _UNSET_TYPES.get(field.type) and len(value) == 0:
            continue  # empty = not set
        if attribute.type != _ATTRIBUTE_TYPES[(field.type, field.is_scalar)]:
            raise NodeError(
                f"node {node.name}: field {name!r} is a {AttributeProto.AttributeType.Name(attribute.type)} "
                f"attribute, {spec.name} declares {field.type} of length {field.length}"
            )
        values[name] = value.decode() if isinstance(value, bytes) else value
    try:
        return spec.complete(values)
    except plugin_spec.SpecError as error:
        raise NodeError(f"node {node.name}: {error}") from error


def with_fields(node: onnx.NodeProto, **fields) -> onnx.NodeProto:
    """A copy of the plugin node with some fields changed (checked like :func:`make_node`)."""
    values = {k: v for k, v in node_fields(node).items() if v is not None}
    return make_node(node.op_type, list(node.input), list(node.output), node.name, **{**values, **fields})
