"""From a PyTorch module using your op to the plugin-flavour ONNX that TensorRT's parser makes a plugin of.

PyTorch is optional (``pip install -e '.[torch]'``); nothing else in the kit imports this module. For a plugin
of ``plugins/`` (its spec), :func:`torch_op` registers a PyTorch custom operator ``trt_plugin_kit::<Creator>``
computed by the plugin's NumPy reference (so the module runs and trains around it on any machine), with a fake
(meta) implementation for tracing, and the two ONNX translations to the node
:func:`trt_plugin_kit.specs.nodes.make_node` would write (op_type = creator, domain ``trt_plugin_kit``,
``plugin_version``, ``plugin_namespace``, one typed attribute per set field):

* the current exporter, ``torch.onnx.export(..., dynamo=True, custom_translation_table=...)`` with
  :func:`translation_table`;
* the legacy TorchScript exporter, ``torch.onnx.export(..., dynamo=False)`` after
  :func:`register_legacy_symbolic` (``torch.onnx.register_custom_op_symbolic``).

    op = torch_op("LeakyReLU")
    class Net(torch.nn.Module):
        def forward(self, x):
            return op(x * 2, negative_slope=0.1) + 1
    torch.onnx.export(Net(), (x,), "net.onnx", dynamo=True,
                      custom_translation_table=translation_table("LeakyReLU"))

Unset optional fields are left out of the node (the creator reads a missing field as unset). Output shapes: a
plugin whose spec example keeps the input's shape needs nothing; another takes
``output_shapes(inputs, fields)`` for tracing with symbolic sizes (a dynamic batch), else the reference is run
on zeros of the concrete shapes.
``python -m trt_plugin_kit.models.torch_op --out DIR`` exports a module per plugin both ways and checks the
files (checker, our node check, the NumPy evaluation against the module's output): the record of the run on a
machine with PyTorch is records/torch-export/torch-export.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

from trt_plugin_kit.interface import PLUGIN_DOMAIN, PLUGIN_NAMESPACE
from trt_plugin_kit.specs import reference
from trt_plugin_kit.specs import spec as plugin_spec

_SCHEMA_TYPES = {("float32", True): "float", ("float32", False): "float[]", ("int32", True): "int"}
_SCHEMA_TYPES |= {("int32", False): "int[]", ("char", False): "str"}
_LEGACY = {("float32", True): "f", ("float32", False): "fs", ("int32", True): "i", ("int32", False): "is"}
_LEGACY |= {("char", False): "s"}
_registered: dict[str, Callable] = {}


def _torch():
    try:
        import torch  # noqa: PLC0415 - optional extra
    except ImportError as error:
        raise ImportError("PyTorch is not installed: pip install -e '.[torch]'") from error
    return torch


def schema(spec: plugin_spec.PluginSpec) -> str:
    """The operator's schema: the tensors, then every field (an optional one may be None)."""
    tensors = [f"Tensor {t.name}" for t in spec.inputs]
    fields = [
        f"{_SCHEMA_TYPES[(f.type, f.is_scalar)]}{'?' if f.optional else ''} {f.name}" for f in spec.fields
    ]
    outputs = "Tensor" if len(spec.outputs) == 1 else f"({', '.join(['Tensor'] * len(spec.outputs))})"
    return f"({', '.join(tensors + fields)}) -> {outputs}"


def torch_op(plugin: str, output_shapes: Callable | None = None) -> Callable:
    """``op(*tensors, **fields)``: torch.ops.trt_plugin_kit.<plugin> with the spec's defaults filled in."""
    torch = _torch()
    spec = plugin_spec.get(plugin)
    if plugin not in _registered:
        n_in = len(spec.inputs)
        same_shape = all(tuple(s) == tuple(spec.shape_inputs[0]) for s in spec.shape_outputs)

        def compute(*args):
            tensors, values = args[:n_in], dict(zip(spec.field_names, args[n_in:], strict=True))
            fields = {k: v for k, v in values.items() if v is not None}
            arrays = [t.detach().cpu().numpy() for t in tensors]
            outputs = reference.REFERENCES[plugin](*arrays, **fields)
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            result = [torch.from_numpy(np.ascontiguousarray(o)).to(tensors[0].device) for o in outputs]
            return result[0] if len(result) == 1 else tuple(result)

        def fake(*args):
            tensors, values = args[:n_in], dict(zip(spec.field_names, args[n_in:], strict=True))
            if output_shapes is not None:
                shapes = output_shapes(tensors, values)
            elif same_shape:
                shapes = [tensors[0].shape] * len(spec.outputs)
            elif all(isinstance(d, int) for t in tensors for d in t.shape):
                from torch._subclasses.fake_tensor import unset_fake_temporarily  # noqa: PLC0415

                with unset_fake_temporarily():  # real zeros, the reference computes on them
                    zeros = [torch.zeros(tuple(t.shape), dtype=t.dtype) for t in tensors]
                    real = compute(*zeros, *values.values())
                shapes = [o.shape for o in (real if isinstance(real, tuple) else (real,))]
            else:
                raise RuntimeError(
                    f"{plugin}: pass output_shapes to torch_op to trace it with symbolic sizes"
                )
            result = [tensors[0].new_empty(tuple(shape)) for shape in shapes]
            return result[0] if len(result) == 1 else tuple(result)

        library = torch.library.Library(PLUGIN_DOMAIN, "FRAGMENT")
        library.define(f"{spec.name}{schema(spec)}")
        library.impl(spec.name, compute, "CompositeExplicitAutograd")
        torch.library.register_fake(f"{PLUGIN_DOMAIN}::{spec.name}", fake, lib=library)
        _registered[plugin] = library  # keeps the registration alive

    packet = getattr(torch.ops, PLUGIN_DOMAIN)
    operator = getattr(packet, spec.name)

    def call(*tensors, **fields):
        values = spec.complete(fields)  # checked and completed as the node helper does
        return operator(*tensors, *(values[name] for name in spec.field_names))

    call.__name__ = spec.name
    return call


def _legacy_attributes(spec: plugin_spec.PluginSpec, values) -> dict:
    """The node's attributes: lookup, then every set field in the field's ONNX type."""
    attributes = {"plugin_version": spec.version, "plugin_namespace": PLUGIN_NAMESPACE}
    for field, value in zip(spec.fields, values, strict=True):
        if value is None:
            continue
        if field.type == "float32":
            value = float(value) if field.is_scalar else [float(v) for v in value]
        elif field.type == "int32":
            value = int(value) if field.is_scalar else [int(v) for v in value]
        attributes[field.name] = value
    return attributes


def _annotation(field: plugin_spec.FieldSpec) -> str:
    """The parameter's annotation: the exporter tells attributes (typed) from tensor inputs by it."""
    base = {"float32": "float", "int32": "int", "char": "str"}[field.type]
    typed = base if field.is_scalar or field.type == "char" else f"list[{base}]"
    return f"Optional[{typed}]" if field.optional else typed


_ONNX_TENSOR_TYPES = {"float32": "tensor(float)", "float16": "tensor(float16)", "int8": "tensor(int8)"}
_ONNX_TENSOR_TYPES |= {"int32": "tensor(int32)", "bfloat16": "tensor(bfloat16)"}


def onnx_schema(plugin: str):
    """The node as an ONNX operator schema (what onnxscript needs to build it in the new exporter): the spec's
    tensors and types, the lookup attributes and one optional attribute per field."""
    from onnx import defs  # noqa: PLC0415

    spec = plugin_spec.get(plugin)
    schema_class = defs.OpSchema
    kinds = {("float32", True): "FLOAT", ("float32", False): "FLOATS", ("int32", True): "INT"}
    kinds |= {("int32", False): "INTS", ("char", False): "STRING"}
    attributes = [
        schema_class.Attribute(name, schema_class.AttrType.STRING, "TensorRT's plugin lookup", required=True)
        for name in ("plugin_version", "plugin_namespace")
    ] + [
        schema_class.Attribute(
            f.name, getattr(schema_class.AttrType, kinds[(f.type, f.is_scalar)]), f.meaning, required=False
        )
        for f in spec.fields
    ]
    constraints = [
        (f"{prefix}{i}", [_ONNX_TENSOR_TYPES[t] for t in tensor.types], tensor.meaning)
        for prefix, tensors in (("T", spec.inputs), ("O", spec.outputs))
        for i, tensor in enumerate(tensors)
    ]
    return schema_class(
        spec.name,
        PLUGIN_DOMAIN,
        1,
        inputs=[schema_class.FormalParameter(t.name, f"T{i}") for i, t in enumerate(spec.inputs)],
        outputs=[schema_class.FormalParameter(t.name, f"O{i}") for i, t in enumerate(spec.outputs)],
        type_constraints=constraints,
        attributes=attributes,
    )


def translation_table(*plugins: str) -> dict:
    """``custom_translation_table`` for ``torch.onnx.export(dynamo=True)``: each op to its plugin node.

    The exporter calls a translation with the op's arguments by position and reads its signature (names as
    in the op's schema, attributes by their annotations), so each function is written as source, one per
    plugin, and loaded; it builds the node with onnxscript and our ONNX schema (:func:`onnx_schema`), leaving
    unset optional fields out. (``@onnxscript.script`` functions did not export: inlining them failed in
    onnx_ir, records/torch-export/torch-export.md.)"""
    torch = _torch()
    lines = [
        "from typing import Optional",
        "import onnxscript",
        f"opset = onnxscript.values.Opset({PLUGIN_DOMAIN!r}, 1)",
    ]
    names = {}
    for plugin in plugins:
        spec = plugin_spec.get(plugin)
        inputs = [t.name for t in spec.inputs]
        signature = ", ".join(inputs + [f"{f.name}: {_annotation(f)}" for f in spec.fields])
        lookup = f"plugin_version={spec.version!r}, plugin_namespace={PLUGIN_NAMESPACE!r}"
        outputs = f", _num_outputs={len(spec.outputs)}" if len(spec.outputs) > 1 else ""
        names[plugin] = f"translate_{spec.name}"
        lines += [
            "",
            f"def {names[plugin]}({signature}):",
            f"    fields = dict({', '.join(f'{f.name}={f.name}' for f in spec.fields)})",
            f"    node = onnxscript.values.Op(opset, {spec.name!r}, SCHEMAS[{spec.name!r}])",
            f"    return node({', '.join(inputs)}, {lookup}, "
            f"**{{k: v for k, v in fields.items() if v is not None}}{outputs})",
        ]
    path = Path(tempfile.mkdtemp(prefix="trt_plugin_kit_onnx_")) / "trt_plugin_kit_translations.py"
    path.write_text("\n".join(lines) + "\n")
    loader = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(loader)
    sys.modules[path.stem] = module
    loader.loader.exec_module(module)
    module.SCHEMAS = {plugin_spec.get(p).name: onnx_schema(p) for p in plugins}
    packet = getattr(torch.ops, PLUGIN_DOMAIN)
    return {getattr(packet, plugin_spec.get(p).name).default: getattr(module, f) for p, f in names.items()}


def _constant(value, descriptor: str):
    """A field's value in the TorchScript graph (a constant, or a list of constants) as a Python value."""
    from torch.onnx import symbolic_helper  # noqa: PLC0415

    try:
        constant = symbolic_helper._maybe_get_const(value, descriptor)
    except Exception:  # noqa: BLE001 - not a form _maybe_get_const knows: read the node
        node = value.node()
        if node.kind() == "prim::ListConstruct":
            return [symbolic_helper._maybe_get_const(v, descriptor[0]) for v in node.inputs()]
        constant = symbolic_helper._node_get(node, "value")
    return constant.tolist() if hasattr(constant, "tolist") else constant


def register_legacy_symbolic(*plugins: str) -> None:
    """The TorchScript exporter's symbolic functions (``g.op`` with typed attribute suffixes), registered at
    version 1 of our domain: export with ``custom_opsets={"trt_plugin_kit": 1}``."""
    torch = _torch()
    from torch.onnx import symbolic_helper  # noqa: PLC0415

    for plugin in plugins:
        spec = plugin_spec.get(plugin)
        n_in, n_out = len(spec.inputs), len(spec.outputs)

        def symbolic(g, *args, spec=spec, n_in=n_in, n_out=n_out):
            values = [
                None if symbolic_helper._is_none(value) else _constant(value, _LEGACY[(f.type, f.is_scalar)])
                for f, value in zip(spec.fields, args[n_in:], strict=True)
            ]
            attributes = {}
            for name, value in _legacy_attributes(spec, values).items():
                field = spec.field(name) if name in spec.field_names else None
                suffix = (
                    "s"
                    if field is None or field.type == "char"
                    else ("f" if field.type == "float32" else "i")
                )
                attributes[f"{name}_{suffix}"] = value
            return g.op(f"{PLUGIN_DOMAIN}::{spec.name}", *args[:n_in], outputs=n_out, **attributes)

        torch.onnx.register_custom_op_symbolic(f"{PLUGIN_DOMAIN}::{spec.name}", symbolic, 1)


# ------------------------------------------------------------------------------------ the checked run


def check_exported(path: Path, feeds: dict[str, np.ndarray], expected: list[np.ndarray]) -> dict:
    """What our side says about an exported file: onnx.checker, every plugin node through the node check
    (what TensorRT's parser and our creator accept), and the NumPy evaluation against the module's output."""
    import onnx  # noqa: PLC0415

    from trt_plugin_kit.models import onnx_eval  # noqa: PLC0415
    from trt_plugin_kit.specs import nodes as plugin_nodes  # noqa: PLC0415

    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    plugin_nodes_found = []
    for node in model.graph.node:
        if node.domain == PLUGIN_DOMAIN:
            fields = plugin_nodes.node_fields(node)
            plugin_nodes_found.append(
                {"op_type": node.op_type, "attributes": sorted(a.name for a in node.attribute),
                 "fields": {k: (v if not isinstance(v, list) or len(v) <= 4 else f"{len(v)} values")
                            for k, v in fields.items()}}
            )  # fmt: skip
    if not plugin_nodes_found:
        raise AssertionError("no plugin node in the exported graph")
    names = [
        i.name for i in model.graph.input if i.name not in {init.name for init in model.graph.initializer}
    ]
    outputs = onnx_eval.run(model, dict(zip(names, feeds.values(), strict=True)))
    differences = [
        float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())
        for got, want in zip(outputs.values(), expected, strict=True)
    ]
    return {
        "nodes": [f"{n.domain or 'ai.onnx'}::{n.op_type}" for n in model.graph.node],
        "plugin_nodes": plugin_nodes_found,
        "max_abs_difference_vs_torch": max(differences),
        "inputs": {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
                   for i in model.graph.input if i.name in names},
    }  # fmt: skip


def _cases():
    """Modules using four plugins: a float field (LeakyReLU), FLOATS + INT + an unset optional field
    (FullyConnected), STRING + INTS (Pool), two inputs and two outputs (ConcatCopy)."""
    torch = _torch()
    rng = np.random.default_rng(0)
    leaky = torch_op("LeakyReLU")
    fc = torch_op("FullyConnected", output_shapes=lambda xs, f: [(xs[0].shape[0], f["num_outputs"])])
    pool = torch_op("Pool")
    concat = torch_op("ConcatCopy")
    weights = rng.standard_normal(3 * 8).astype(np.float32).tolist()

    class Leaky(torch.nn.Module):
        def forward(self, x):
            return leaky(x * 2.0, negative_slope=0.125) + 1.0

    class Dense(torch.nn.Module):
        def forward(self, x):
            return torch.relu(fc(x, weights=weights, num_outputs=3))

    class Pooled(torch.nn.Module):
        def forward(self, x):
            return pool(x + 0.5, mode="max", kernel=[2, 2])

    class Pair(torch.nn.Module):
        def forward(self, a, b):
            first, second = concat(a, b)
            return first * 2.0, second

    def floats(*shape):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))

    return [
        ("LeakyReLU", Leaky(), (floats(4, 6),), True),
        ("FullyConnected", Dense(), (floats(5, 8),), True),
        ("Pool", Pooled(), (floats(2, 3, 6, 6),), False),
        ("ConcatCopy", Pair(), (floats(2, 3), floats(4, 3)), False),
    ]


def run_checks(out: Path) -> dict:
    torch = _torch()
    import onnxscript  # noqa: PLC0415

    record = {
        "torch": torch.__version__,
        "onnxscript": onnxscript.__version__,
        "python": sys.version.split()[0],
    }
    import onnx  # noqa: PLC0415

    record["onnx"] = onnx.__version__
    cases = _cases()
    plugins = [c[0] for c in cases]
    register_legacy_symbolic(*plugins)
    results = []
    for plugin, module, inputs, dynamic_batch in cases:
        expected = module(*inputs)
        expected = [t.detach().numpy() for t in (expected if isinstance(expected, tuple) else (expected,))]
        feeds = {f"input{i}": t.numpy() for i, t in enumerate(inputs)}
        ways = {
            "dynamo": lambda path, m=module, a=inputs, d=dynamic_batch, p=plugin: torch.onnx.export(
                m, a, str(path), dynamo=True, custom_translation_table=translation_table(p),
                dynamic_shapes=({0: torch.export.Dim("batch")},) * len(a) if d else None,
            ),
            "legacy": lambda path, m=module, a=inputs, d=dynamic_batch: torch.onnx.export(
                m, a, str(path), dynamo=False, opset_version=17, custom_opsets={PLUGIN_DOMAIN: 1},
                input_names=[f"input{i}" for i in range(len(a))],
                dynamic_axes={f"input{i}": {0: "batch"} for i in range(len(a))} if d else None,
            ),
        }  # fmt: skip
        for way, export in ways.items():
            path = out / f"{plugin}_{way}.onnx"
            entry = {"plugin": plugin, "exporter": way}
            try:
                export(path)
                entry.update(check_exported(path, feeds, expected))
                entry["ok"] = entry["max_abs_difference_vs_torch"] <= 1e-5
                if dynamic_batch:  # the same file at another batch size
                    fewer = tuple(t[:3] for t in inputs)
                    again = module(*fewer)
                    again = [t.detach().numpy() for t in (again if isinstance(again, tuple) else (again,))]
                    other = check_exported(path, {f"input{i}": t.numpy() for i, t in enumerate(fewer)}, again)
                    entry["batch_3_max_abs_difference"] = other["max_abs_difference_vs_torch"]
                    entry["ok"] = entry["ok"] and other["max_abs_difference_vs_torch"] <= 1e-5
            except Exception as error:  # noqa: BLE001 - recorded, the other ways go on
                entry["ok"] = False
                entry["error"] = "".join(traceback.format_exception_only(type(error), error)).strip()[-1500:]
            print(json.dumps(entry)[:400], flush=True)
            results.append(entry)
    record["results"] = results
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Export modules using our plugins with both exporters; check."
    )
    parser.add_argument("--out", type=Path, required=True, help="where torch-export.json goes")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    record = run_checks(Path(tempfile.mkdtemp(prefix="trt_plugin_kit_torch_export_")))
    (args.out / "torch-export.json").write_text(json.dumps(record, indent=1))
    failed = [f"{r['plugin']} {r['exporter']}" for r in record["results"] if not r["ok"]]
    checked = len(record["results"]) - len(failed)
    print(f"{checked} of {len(record['results'])} exports checked; failed: {failed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
