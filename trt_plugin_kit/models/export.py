"""ONNX export of the models, in two flavours from the same weights, plus the FP16 and INT8 variants.

    .venv/bin/python -m trt_plugin_kit.models.export                  # models/onnx/*.onnx + INT8 scales
    .venv/bin/python -m trt_plugin_kit.models.export --variants build/onnx   # also the FP16/INT8 graphs

Flavours
    *plugin*: the custom layers are plugin nodes built from the plugins' specs by
    :func:`trt_plugin_kit.specs.nodes.make_node`: ``op_type`` = creator name, one attribute per field (every
    field, defaults included), plus ``plugin_version`` and ``plugin_namespace`` so that TensorRT's ONNX parser
    finds the plugin creator in the registry. *native*: standard ONNX operators only (runs in ONNX Runtime,
    and in TensorRT without plugins).

Models (tensor names are interface, see the Triton configs)
    ``mnist``: ``image`` float32 [N,1,28,28] -> ``probabilities`` float32 [N,10] (LeNet-5, see
    :mod:`trt_plugin_kit.models.lenet`). Intermediate tensors carry the same names in both flavours (conv1,
    pool1,
    conv2, pool2, fc1, prelu, logits), which makes layer-by-layer comparisons easy.
    ``l2norm``: ``vector`` float32 [N,D] (D dynamic, up to 4096 in the engines) -> ``normalized``
    (L2Normalize over the last axis, eps 1e-12).

Variants (made from the FP32 graphs by :func:`to_fp16` and :func:`to_int8`; used by build_engines.py where
the network is strongly typed and precision comes from the graph's types)
    FP16: weights and activations in float16, float32 graph inputs/outputs (Cast nodes at the edges).
    INT8: every pool runs on int8 between QuantizeLinear/DequantizeLinear, with scales calibrated on the
    validation digits (max-abs of the pool input / 127, see :func:`calibrate_pool_scales`); the plugin Pool
    nodes then carry ``input_scale``/``output_scale``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from trt_plugin_kit.interface import (
    FLAVOURS,
    L2NORM_INPUT,
    L2NORM_OUTPUT,
    MODELS_DIR,
    ONNX_DIR,
    PLUGIN_DOMAIN,
    PRECISIONS,
)
from trt_plugin_kit.interface import TENSORRT_MODELS as MODELS
from trt_plugin_kit.models import lenet, mnist
from trt_plugin_kit.specs import nodes as plugin_nodes
from trt_plugin_kit.tritonserver import options as cli_options
from trt_plugin_kit.tritonserver.options import run_reporting_input_errors

OPSET = 17
WEIGHTS_PATH = MODELS_DIR / "lenet5_mnist.npz"
INT8_SCALES_PATH = MODELS_DIR / "lenet5_mnist_int8_scales.json"

L2NORM_EPS = 1e-12
L2NORM_MAX_DIM = 4096  # longest vector the TensorRT engines are built for (optimization profile)
INT8_MAX = 127.0
# Calibrated scales are kept to this many significant digits. The activations' max-abs comes out of float32
# convolutions whose sums the CPU's BLAS orders as it likes, so it differs by an ulp or two between processors
# (AMD vs Intel kernels, thread counts); rounded, the scale is the same on every machine except in the rare
# case of a max-abs within a few ulps of a rounding boundary. Rounding to nearest moves the max-abs at most
# 0.05 % of a step from 127, which INT8's own rounding absorbs: nothing clips and no other value moves by
# more than 0.03 of a step.
SCALE_SIGNIFICANT_DIGITS = 4


def _float_list(array: np.ndarray) -> list[float]:
    """float32 values as Python floats (exactly representable, so the FLOATS attribute is bit-exact)."""
    return np.asarray(array, dtype=np.float32).reshape(-1).tolist()


def _make_model(graph: onnx.GraphProto, flavour: str, doc: str) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", OPSET)]
    if flavour == "plugin":
        opsets.append(helper.make_opsetid(PLUGIN_DOMAIN, 1))
    model = helper.make_model(
        graph, opset_imports=opsets, producer_name="trt_plugin_kit.export"
    )  # as the committed files say
    model.ir_version = 8  # readable by every ONNX Runtime and TensorRT 10/11 parser
    model.doc_string = doc
    return model


# ------------------------------------------------------------------------------------------------- mnist


def build_mnist(params: dict[str, np.ndarray], flavour: str) -> onnx.ModelProto:
    """LeNet-5 as ONNX (``image`` -> ``probabilities``) in the ``plugin`` or ``native`` flavour."""
    if flavour not in FLAVOURS:
        raise ValueError(f"flavour must be one of {FLAVOURS}, got {flavour!r}")
    lenet.validate_parameters(params)
    p = {name: np.asarray(value, dtype=np.float32) for name, value in params.items()}
    batch = "batch"
    initializers = [numpy_helper.from_array(p[name], name) for name in ("conv1.weight", "conv1.bias")]
    initializers += [numpy_helper.from_array(p[name], name) for name in ("conv2.weight", "conv2.bias")]
    conv = {"kernel_shape": [5, 5], "strides": [1, 1], "pads": [0, 0, 0, 0]}
    nodes = [
        helper.make_node("Conv", ["image", "conv1.weight", "conv1.bias"], ["conv1"], name="conv1", **conv)
    ]

    def pool(source: str, target: str) -> onnx.NodeProto:
        if flavour == "plugin":
            return plugin_nodes.make_node(
                "Pool", [source], [target], target, mode="max", kernel=[2, 2], stride=[2, 2], padding=[0, 0]
            )
        return helper.make_node(
            "MaxPool", [source], [target], name=target, kernel_shape=[2, 2], strides=[2, 2]
        )

    nodes.append(pool("conv1", "pool1"))
    nodes.append(
        helper.make_node("Conv", ["pool1", "conv2.weight", "conv2.bias"], ["conv2"], name="conv2", **conv)
    )
    nodes.append(pool("conv2", "pool2"))
    if flavour == "plugin":
        fc = {"num_outputs": 500, "weights": _float_list(p["fc1.weight"]), "bias": _float_list(p["fc1.bias"])}
        nodes.append(plugin_nodes.make_node("FullyConnected", ["pool2"], ["fc1"], "fc1", **fc))
        nodes.append(
            plugin_nodes.make_node(
                "PReLU", ["fc1"], ["prelu"], "prelu", slopes=_float_list(p["prelu.slopes"])
            )
        )
        fc = {"num_outputs": 10, "weights": _float_list(p["fc2.weight"]), "bias": _float_list(p["fc2.bias"])}
        nodes.append(plugin_nodes.make_node("FullyConnected", ["prelu"], ["logits"], "fc2", **fc))
    else:
        for name in ("fc1.weight", "fc1.bias", "prelu.slopes", "fc2.weight", "fc2.bias"):
            initializers.append(numpy_helper.from_array(p[name], name))
        nodes.append(helper.make_node("Flatten", ["pool2"], ["flat"], name="flatten", axis=1))
        nodes.append(
            helper.make_node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["fc1"], name="fc1", transB=1)
        )
        nodes.append(helper.make_node("PRelu", ["fc1", "prelu.slopes"], ["prelu"], name="prelu"))
        nodes.append(
            helper.make_node("Gemm", ["prelu", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1)
        )
    nodes.append(helper.make_node("Softmax", ["logits"], [mnist.OUTPUT_NAME], name="softmax", axis=1))

    shapes = {
        "conv1": [batch, 20, 24, 24],
        "pool1": [batch, 20, 12, 12],
        "conv2": [batch, 50, 8, 8],
        "pool2": [batch, 50, 4, 4],
        "fc1": [batch, 500],
        "prelu": [batch, 500],
        "logits": [batch, 10],
    }
    if flavour == "native":
        shapes["flat"] = [batch, 800]
    graph = helper.make_graph(
        nodes,
        f"lenet5_mnist_{flavour}",
        [helper.make_tensor_value_info(mnist.INPUT_NAME, TensorProto.FLOAT, [batch, *mnist.INPUT_SHAPE])],
        [helper.make_tensor_value_info(mnist.OUTPUT_NAME, TensorProto.FLOAT, [batch, mnist.NUM_CLASSES])],
        initializer=initializers,
        value_info=[helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in shapes.items()],
    )
    doc = (
        f"LeNet-5 for MNIST ({flavour} flavour). Input 'image' float32 [N,1,28,28] = pixel / 255.0, white "
        "digit on black. Output 'probabilities' float32 [N,10] (softmax)."
    )
    return _make_model(graph, flavour, doc)


# ------------------------------------------------------------------------------------------------ l2norm


def build_l2norm(flavour: str, eps: float = L2NORM_EPS) -> onnx.ModelProto:
    """``vector`` [N,D] -> ``normalized`` = vector / sqrt(max(sum(vector^2, last axis), eps))."""
    if flavour not in FLAVOURS:
        raise ValueError(f"flavour must be one of {FLAVOURS}, got {flavour!r}")
    shape = ["batch", "dim"]
    initializers = []
    if flavour == "plugin":
        nodes = [
            plugin_nodes.make_node(
                "L2Normalize", [L2NORM_INPUT], [L2NORM_OUTPUT], "l2normalize", axis=-1, eps=eps
            )
        ]
    else:
        initializers.append(numpy_helper.from_array(np.array(eps, dtype=np.float32), "eps"))
        nodes = [
            helper.make_node(
                "ReduceSumSquare",
                [L2NORM_INPUT],
                ["sum_of_squares"],
                name="sum_of_squares",
                axes=[-1],
                keepdims=1,
            ),
            helper.make_node("Max", ["sum_of_squares", "eps"], ["clamped"], name="clamp_eps"),
            helper.make_node("Sqrt", ["clamped"], ["norm"], name="norm"),
            helper.make_node("Div", [L2NORM_INPUT, "norm"], [L2NORM_OUTPUT], name="normalize"),
        ]
    graph = helper.make_graph(
        nodes,
        f"l2norm_{flavour}",
        [helper.make_tensor_value_info(L2NORM_INPUT, TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(L2NORM_OUTPUT, TensorProto.FLOAT, shape)],
        initializer=initializers,
    )
    doc = (
        f"L2 normalization over the last axis ({flavour} flavour): 'vector' float32 [N,D] -> 'normalized' "
        f"= vector / sqrt(max(sum(vector^2), {eps}))."
    )
    return _make_model(graph, flavour, doc)


# ---------------------------------------------------------------------------------------------- variants


def _tensor_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type of every named tensor that the graph declares (inputs, outputs, value_info, weights)."""
    graph = model.graph
    types = {
        vi.name: vi.type.tensor_type.elem_type for vi in [*graph.input, *graph.output, *graph.value_info]
    }
    types.update({init.name: init.data_type for init in graph.initializer})
    return types


# Ops computed in float32 inside the FP16 variant: a float16 sum of squares overflows beyond 65504 and
# eps = 1e-12 flushes to zero in float16, so the native l2norm keeps its reduction in float32.
FP32_OPS = {"ReduceSumSquare", "Max", "Sqrt", "Div"}


def to_fp16(model: onnx.ModelProto) -> onnx.ModelProto:
    """FP16 variant: float16 weights and activations, float32 graph inputs and outputs.

    Float initializers become float16, a Cast follows each float32 input and precedes each float32 output.
    Ops in :data:`FP32_OPS` compute in float32 (Casts are inserted around them). Plugin nodes run with
    float16 I/O (their float fields stay float32, as PluginFields are).
    """
    fp16 = onnx.ModelProto()
    fp16.CopyFrom(model)
    graph = fp16.graph
    types = _tensor_types(model)
    initializers = {init.name: init for init in graph.initializer}
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))
            types[init.name] = TensorProto.FLOAT16

    new_nodes: list[onnx.NodeProto] = []
    available: dict[tuple[str, int], str] = {}  # (tensor, type) -> name of a tensor holding it in that type

    def as_type(name: str, elem_type: int) -> str:
        if types.get(name) != TensorProto.FLOAT and types.get(name) != TensorProto.FLOAT16:
            return name  # not a float tensor (e.g. int8): leave alone
        if types[name] == elem_type:
            return name
        if (name, elem_type) not in available:
            suffix = "fp16" if elem_type == TensorProto.FLOAT16 else "fp32"
            cast_name = f"{name}_{suffix}"
            new_nodes.append(
                helper.make_node("Cast", [name], [cast_name], name=f"cast_{cast_name}", to=elem_type)
            )
            types[cast_name] = elem_type
            available[(name, elem_type)] = cast_name
        return available[(name, elem_type)]

    for node in model.graph.node:
        original, node = node, onnx.NodeProto()
        node.CopyFrom(original)
        compute = TensorProto.FLOAT if node.op_type in FP32_OPS else TensorProto.FLOAT16
        if node.op_type in ("QuantizeLinear", "DequantizeLinear", "Cast"):
            raise ValueError(f"to_fp16 expects an FP32 graph without {node.op_type} nodes")
        for index, name in enumerate(node.input):
            if name in initializers and types[name] == TensorProto.FLOAT16 and compute == TensorProto.FLOAT:
                # A weight used by an FP32 op: store it in float32 rather than casting at run time.
                array = numpy_helper.to_array(initializers[name]).astype(np.float32)
                initializers[name].CopyFrom(numpy_helper.from_array(array, name))
                types[name] = TensorProto.FLOAT
            node.input[index] = as_type(name, compute)
        for name in node.output:
            if types.get(name, TensorProto.FLOAT) in (TensorProto.FLOAT, TensorProto.FLOAT16):
                types[name] = compute
        new_nodes.append(node)
    for output in graph.output:
        if types[output.name] != TensorProto.FLOAT:
            internal = f"{output.name}_fp16"
            for node in new_nodes:
                node.output[:] = [internal if o == output.name else o for o in node.output]
                node.input[:] = [internal if i == output.name else i for i in node.input]
            types[internal] = types.pop(output.name)
            new_nodes.append(
                helper.make_node(
                    "Cast", [internal], [output.name], name=f"cast_{output.name}", to=TensorProto.FLOAT
                )
            )
            types[output.name] = TensorProto.FLOAT
    del graph.node[:]
    graph.node.extend(new_nodes)
    _retype_value_info(graph, types)
    graph.name += "_fp16"
    return fp16


def _retype_value_info(graph: onnx.GraphProto, types: dict[str, int]) -> None:
    """Updates value_info element types (and drops entries for tensors that no longer exist)."""
    produced = {o for node in graph.node for o in node.output}
    kept = []
    for vi in graph.value_info:
        if vi.name in produced:
            vi.type.tensor_type.elem_type = types.get(vi.name, vi.type.tensor_type.elem_type)
            kept.append(vi)
    del graph.value_info[:]
    graph.value_info.extend(kept)


def pool_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The pooling nodes of a graph: plugin ``Pool`` nodes or native ``MaxPool``/``AveragePool``."""
    return [
        node
        for node in model.graph.node
        if (node.op_type == "Pool" and node.domain == PLUGIN_DOMAIN)
        or node.op_type in ("MaxPool", "AveragePool")
    ]


def _pool_mode(node: onnx.NodeProto) -> str:
    if node.op_type == "MaxPool":
        return "max"
    if node.op_type == "AveragePool":
        return "average"
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    mode = attributes.get("mode", b"max")
    return mode.decode() if isinstance(mode, bytes) else mode


def calibrate_pool_scales(
    model: onnx.ModelProto, calibration_inputs: dict[str, np.ndarray]
) -> dict[str, dict]:
    """INT8 scales of every pool from calibration data: ``scale = max|activation| / 127``, rounded by
    ``round_scale`` so that every processor computes the same file.

    Runs ``model`` (FP32, either flavour) with the NumPy evaluator and measures each pool's input. A max pool
    reuses the input scale for its output (the max of int8 values needs no requantization); an average pool
    gets its own output scale from its output's max-abs.

    Returns:
        ``{pool_node: {"input": tensor, "output": tensor, "mode": m, "input_scale": s, "output_scale": s}}``
    """
    from trt_plugin_kit.models import onnx_eval

    nodes = pool_nodes(model)
    if not nodes:
        raise ValueError("the graph has no pooling node to calibrate")
    wanted = [node.input[0] for node in nodes] + [node.output[0] for node in nodes]
    values = onnx_eval.run(model, calibration_inputs, outputs=wanted)
    scales = {}
    for node in nodes:
        mode = _pool_mode(node)
        input_range = float(np.max(np.abs(values[node.input[0]])))
        output_range = input_range if mode == "max" else float(np.max(np.abs(values[node.output[0]])))
        if input_range <= 0 or output_range <= 0:
            raise ValueError(f"pool {node.name}: calibration data gives an all-zero activation, no scale")
        scales[node.name] = {
            "input": node.input[0],
            "output": node.output[0],
            "mode": mode,
            "input_scale": round_scale(input_range / INT8_MAX),
            "output_scale": round_scale(output_range / INT8_MAX),
        }
    return scales


def round_scale(scale: float) -> float:
    """``scale`` to ``SCALE_SIGNIFICANT_DIGITS`` significant digits (see there for why)."""
    return float(f"{scale:.{SCALE_SIGNIFICANT_DIGITS}g}")


def to_int8(model: onnx.ModelProto, scales: dict[str, dict]) -> onnx.ModelProto:
    """INT8 variant: every pool runs on int8 between QuantizeLinear and DequantizeLinear.

    Plugin flavour: ``x -> QuantizeLinear(s_in) -> Pool[int8 in/out, input_scale=s_in,
    output_scale=s_out] -> DequantizeLinear(s_out)``. Native flavour (ONNX Q/DQ convention): ``x -> Q(s_in)
    -> DQ(s_in) -> MaxPool -> Q(s_out) -> DQ(s_out)``. Both compute the same numbers; zero points are 0
    (symmetric, as TensorRT requires).
    """
    int8 = onnx.ModelProto()
    int8.CopyFrom(model)
    graph = int8.graph
    by_name = {node.name: node for node in pool_nodes(int8)}
    missing = sorted(set(by_name) - set(scales))
    if missing:
        raise ValueError(f"no INT8 scales for pool(s) {missing}")
    types = _tensor_types(int8)
    new_nodes = []
    for node in graph.node:
        if node.name not in by_name:
            new_nodes.append(node)
            continue
        entry = scales[node.name]
        s_in, s_out = float(entry["input_scale"]), float(entry["output_scale"])
        if not (s_in > 0 and s_out > 0 and np.isfinite(s_in) and np.isfinite(s_out)):
            raise ValueError(f"pool {node.name}: scales must be finite and > 0, got {s_in}, {s_out}")
        source, target = node.input[0], node.output[0]
        name = node.name
        graph.initializer.extend(
            [
                numpy_helper.from_array(np.array(s_in, dtype=np.float32), f"{name}_input_scale"),
                numpy_helper.from_array(np.array(s_out, dtype=np.float32), f"{name}_output_scale"),
                numpy_helper.from_array(np.array(0, dtype=np.int8), f"{name}_zero_point"),
            ]
        )
        zero = f"{name}_zero_point"
        quantize = helper.make_node(
            "QuantizeLinear",
            [source, f"{name}_input_scale", zero],
            [f"{source}_int8"],
            name=f"{name}_quantize",
        )
        dequantize_out = helper.make_node(
            "DequantizeLinear",
            [f"{target}_int8", f"{name}_output_scale", zero],
            [target],
            name=f"{name}_dequantize",
        )
        types[f"{source}_int8"] = TensorProto.INT8
        types[f"{target}_int8"] = TensorProto.INT8
        if node.domain == PLUGIN_DOMAIN:
            pool = plugin_nodes.with_fields(node, input_scale=s_in, output_scale=s_out)
            pool.input[0], pool.output[0] = f"{source}_int8", f"{target}_int8"
            new_nodes += [quantize, pool, dequantize_out]
        else:
            dequantize_in = helper.make_node(
                "DequantizeLinear",
                [f"{source}_int8", f"{name}_input_scale", zero],
                [f"{source}_dq"],
                name=f"{name}_dequantize_input",
            )
            pool = onnx.NodeProto()
            pool.CopyFrom(node)
            pool.input[0], pool.output[0] = f"{source}_dq", f"{target}_float"
            quantize_out = helper.make_node(
                "QuantizeLinear",
                [f"{target}_float", f"{name}_output_scale", zero],
                [f"{target}_int8"],
                name=f"{name}_quantize_output",
            )
            new_nodes += [quantize, dequantize_in, pool, quantize_out, dequantize_out]
    del graph.node[:]
    graph.node.extend(new_nodes)
    for tensor in list(types):
        if tensor.endswith("_int8"):
            graph.value_info.append(helper.make_tensor_value_info(tensor, TensorProto.INT8, None))
    _retype_value_info(graph, types)
    graph.name += "_int8"
    return int8


def make_variant(model: onnx.ModelProto, precision: str, int8_scales: dict | None = None) -> onnx.ModelProto:
    """The ``fp32`` (unchanged), ``fp16`` or ``int8`` variant of an FP32 graph."""
    if precision == "fp32":
        return model
    if precision == "fp16":
        return to_fp16(model)
    if precision == "int8":
        if int8_scales is None:
            raise ValueError(
                "the int8 variant needs calibrated scales (models/lenet5_mnist_int8_scales.json)"
            )
        return to_int8(model, int8_scales)
    raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")


# ------------------------------------------------------------------------------------------- entry point


def build(model_name: str, flavour: str, weights: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    """The FP32 ONNX model ``model_name`` in ``flavour`` (mnist uses the committed weights by default)."""
    if model_name == "mnist":
        return build_mnist(weights if weights is not None else lenet.load_weights(WEIGHTS_PATH), flavour)
    if model_name == "l2norm":
        return build_l2norm(flavour)
    raise ValueError(f"model must be one of {MODELS}, got {model_name!r}")


def onnx_path(model_name: str, flavour: str, directory: Path = ONNX_DIR) -> Path:
    return Path(directory) / f"{model_name}_{flavour}.onnx"


def load_int8_scales(path: Path = INT8_SCALES_PATH) -> dict[str, dict]:
    """The calibrated pool scales written by this module (``pools`` entry of the JSON file)."""
    record = json.loads(Path(path).read_text())
    return record["pools"]


def save(model: onnx.ModelProto, path: Path) -> None:
    onnx.checker.check_model(model, full_check=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Export the mnist and l2norm models to ONNX (both flavours)."
    )
    parser.add_argument("--weights", type=Path, default=WEIGHTS_PATH)
    parser.add_argument("--output-dir", type=Path, default=ONNX_DIR)
    parser.add_argument(
        "--scales", type=Path, default=INT8_SCALES_PATH, help="INT8 calibration output (JSON)"
    )
    cli_options.add_mnist_dir_argument(parser, "for INT8 calibration")
    parser.add_argument("--variants", type=Path, metavar="DIR", help="also write FP16 and INT8 variants here")
    args = parser.parse_args(argv)

    weights = lenet.load_weights(args.weights)
    models = {(m, f): build(m, f, weights) for m in MODELS for f in FLAVOURS}
    for (model_name, flavour), model in models.items():
        path = onnx_path(model_name, flavour, args.output_dir)
        save(model, path)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")

    split = mnist.load_split(args.mnist_dir)
    calibration = {mnist.INPUT_NAME: mnist.to_tensor(split.validation_images)}
    scales = calibrate_pool_scales(models[("mnist", "plugin")], calibration)
    record = {
        "method": "max-abs of each pool's input over the validation digits / 127, to "
        f"{SCALE_SIGNIFICANT_DIGITS} significant digits; max pools reuse it for their output",
        "calibration_data": f"{len(split.validation_images)} validation digits (mnist.load_split)",
        "weights": args.weights.name,
        "pools": scales,
    }
    args.scales.parent.mkdir(parents=True, exist_ok=True)
    args.scales.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.scales}: " + ", ".join(f"{n} {s['input_scale']:.6g}" for n, s in scales.items()))

    if args.variants:
        for (model_name, flavour), model in models.items():
            for precision in ("fp16", "int8"):
                if precision == "int8" and model_name != "mnist":
                    continue  # l2norm has no pool: its INT8 engine is the FP32 one
                variant = make_variant(model, precision, scales)
                path = args.variants / f"{model_name}_{flavour}_{precision}.onnx"
                save(variant, path)
                print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Runs the command; missing or malformed input files end with one clear line and exit code 2."""
    return run_reporting_input_errors(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
