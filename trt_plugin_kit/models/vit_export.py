"""mnist_vit as ONNX (``image`` [N,1,28,28] -> ``probabilities`` [N,10]), in both flavours, from the NumPy
weights of :mod:`trt_plugin_kit.models.vit`:

* ``plugin``: RMSNorm, attention and SwiGLU as this kit's plugins (``RmsNormLastAxis``,
  ``FlashAttentionTriton``, ``SwiGLUSplit``, built by :func:`trt_plugin_kit.specs.nodes.make_node`), the rest
  (patches, linear layers, residuals, mean, softmax) standard ONNX: what TensorRT builds with the library;
* ``native``: the same graph with standard operators only (opset 17: ReduceMean/Sqrt for RMSNorm, MatMul and
  Softmax for attention, Sigmoid for SwiGLU): what ONNX Runtime serves on the CPU.

Both are checked against the NumPy model (tests/unit/test_vit.py): the plugin flavour through the ONNX
evaluator (the plugin nodes computed by their references), the native flavour in ONNX Runtime.

    python -m trt_plugin_kit.models.vit_export
        # model_repository/mnist_vit/model.onnx (plugin: the engine's and the CPU stand-in's input)
        # models/onnx/mnist_vit_native.onnx (native)
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from trt_plugin_kit.interface import MNIST_VIT, MODEL_ONNX_FILE, MODEL_REPOSITORY, MODELS_DIR
from trt_plugin_kit.models import export, vit
from trt_plugin_kit.specs import nodes as plugin_nodes

WEIGHTS_PATH = MODELS_DIR / "mnist_vit.npz"
# One home per flavour: the plugin flavour is the served model's file, the native one beside LeNet's.
PATHS = {
    "plugin": MODEL_REPOSITORY / MNIST_VIT / MODEL_ONNX_FILE,
    "native": export.onnx_path(MNIST_VIT, "native"),
}
FLAVOURS = ("plugin", "native")


class _Graph:
    """Nodes and initializers of one graph, with fresh tensor names."""

    def __init__(self, flavour: str):
        self.flavour = flavour
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.count = 0

    def constant(self, name: str, value) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attributes) -> str:
        self.count += 1
        out = f"{op_type.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], f"{op_type}_{self.count}", **attributes))
        return out

    def plugin(self, creator: str, inputs: list[str], **fields) -> str:
        self.count += 1
        out = f"{creator.lower()}_{self.count}"
        self.nodes.append(plugin_nodes.make_node(creator, inputs, [out], f"{creator}_{self.count}", **fields))
        return out

    def linear(self, x: str, params, name: str) -> str:
        weight = self.constant(f"{name}.weight_t", params[f"{name}.weight"].T.astype(np.float32))
        return self.op(
            "Add", [self.op("MatMul", [x, weight]), self.constant(f"{name}.bias", params[f"{name}.bias"])]
        )

    def rms_norm(self, x: str, gain: str) -> str:
        if self.flavour == "plugin":
            return self.plugin("RmsNormLastAxis", [x, gain], eps=vit.EPS)
        mean_square = self.op("ReduceMean", [self.op("Mul", [x, x])], axes=[-1], keepdims=1)
        root = self.op("Sqrt", [self.op("Add", [mean_square, "rms_eps"])])
        return self.op("Mul", [self.op("Div", [x, root]), gain])

    def attention(self, q: str, k: str, v: str) -> str:
        if self.flavour == "plugin":
            return self.plugin("FlashAttentionTriton", [q, k, v], causal=0)
        scores = self.op(
            "Mul", [self.op("MatMul", [q, self.op("Transpose", [k], perm=[0, 1, 3, 2])]), "qk_scale"]
        )
        return self.op("MatMul", [self.op("Softmax", [scores], axis=-1), v])

    def swiglu(self, x: str) -> str:
        if self.flavour == "plugin":
            return self.plugin("SwiGLUSplit", [x])
        self.count += 1
        a, gate = f"swiglu_a_{self.count}", f"swiglu_b_{self.count}"
        self.nodes.append(
            helper.make_node("Split", [x, "swiglu_halves"], [a, gate], f"Split_{self.count}", axis=-1)
        )
        return self.op("Mul", [self.op("Mul", [a, self.op("Sigmoid", [a])]), gate])


def _block(g: _Graph, params, b: int, x: str) -> str:
    p = f"block{b}"
    u = g.rms_norm(x, g.constant(f"{p}.norm1", params[f"{p}.norm1"]))
    qkv = g.linear(u, params, f"{p}.qkv")
    g.count += 1
    parts = [f"{p}_{t}_{g.count}" for t in "qkv"]
    g.nodes.append(helper.make_node("Split", [qkv, "qkv_thirds"], parts, f"Split_{g.count}", axis=-1))
    q, k, v = (g.op("Transpose", [g.op("Reshape", [t, "heads_shape"])], perm=[0, 2, 1, 3]) for t in parts)
    o = g.op("Reshape", [g.op("Transpose", [g.attention(q, k, v)], perm=[0, 2, 1, 3]), "tokens_shape"])
    h = g.op("Add", [x, g.linear(o, params, f"{p}.proj")])
    w = g.rms_norm(h, g.constant(f"{p}.norm2", params[f"{p}.norm2"]))
    y = g.swiglu(g.linear(w, params, f"{p}.fc1"))
    return g.op("Add", [h, g.linear(y, params, f"{p}.fc2")])


def build(params: dict[str, np.ndarray], flavour: str) -> onnx.ModelProto:
    """mnist_vit in ``flavour`` (``plugin`` or ``native``), float32, the batch dimension dynamic."""
    if flavour not in FLAVOURS:
        raise ValueError(f"flavour must be one of {FLAVOURS}, got {flavour!r}")
    vit.validate_parameters(params)
    g = _Graph(flavour)
    grid = 28 // vit.PATCH
    g.constant("patch_grid_shape", np.array([-1, grid, vit.PATCH, grid, vit.PATCH], np.int64))
    g.constant("patches_shape", np.array([-1, vit.TOKENS, vit.PATCH * vit.PATCH], np.int64))
    g.constant("heads_shape", np.array([-1, vit.TOKENS, vit.HEADS, vit.HEAD_SIZE], np.int64))
    g.constant("tokens_shape", np.array([-1, vit.TOKENS, vit.WIDTH], np.int64))
    g.constant("qkv_thirds", np.array([vit.WIDTH] * 3, np.int64))
    if flavour == "native":
        g.constant("rms_eps", np.float32(vit.EPS))
        g.constant("qk_scale", np.float32(vit.HEAD_SIZE**-0.5))
        g.constant("swiglu_halves", np.array([vit.MLP_HIDDEN] * 2, np.int64))
    pix = g.op("Transpose", [g.op("Reshape", ["image", "patch_grid_shape"])], perm=[0, 1, 3, 2, 4])
    x = g.linear(g.op("Reshape", [pix, "patches_shape"]), params, "patch")
    x = g.op("Add", [x, g.constant("position", params["position"])])
    for b in range(vit.block_count(params)):
        x = _block(g, params, b, x)
    pooled = g.op("ReduceMean", [x], axes=[1], keepdims=0)
    z = g.rms_norm(pooled, g.constant("norm", params["norm"]))
    logits = g.linear(z, params, "head")
    g.nodes.append(helper.make_node("Softmax", [logits], ["probabilities"], "probabilities", axis=-1))
    graph = helper.make_graph(
        g.nodes,
        f"mnist_vit_{flavour}",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 28, 28])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10])],
        g.initializers,
    )
    doc = f"mnist_vit ({flavour} flavour): trt_plugin_kit/models/vit.py, exported by vit_export.py"
    return export._make_model(graph, flavour, doc)


def main(argv: list[str] | None = None) -> int:
    params = vit.load_weights(WEIGHTS_PATH)
    for flavour in FLAVOURS:
        path = PATHS[flavour]
        export.save(build(params, flavour), path)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
