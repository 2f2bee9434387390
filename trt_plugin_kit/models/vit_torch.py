"""mnist_vit as a PyTorch module, from the committed weights (models/mnist_vit.npz), equal to the NumPy model
of :mod:`trt_plugin_kit.models.vit` (same layout, same names): ``image`` [N,1,28,28] -> logits [N,10].

PyTorch is optional (``pip install -e '.[torch]'``): nothing else in the kit imports this module, and it
imports torch only when a module is made. The three transformer ops are the ``kernels`` object's, so that one
module's glue (patch embedding, linear layers, reshapes, residuals, the mean) serves every flavour:

* :class:`TorchKernels`: PyTorch's own ops (``F.rms_norm``, ``F.scaled_dot_product_attention``, ``F.silu``):
  PyTorch's model, and the standard-ops ONNX export;
* :class:`TorchOpKernels`: the plugins as PyTorch custom ops (:mod:`trt_plugin_kit.models.torch_op`): the
  plugin-flavour ONNX export (nodes ``RmsNormLastAxis``, ``FlashAttentionTriton``, ``SwiGLUSplit``);
* ``trt_plugin_kit.models.vit_graph.PluginKernels``: the plugins themselves, enqueued on the GPU through
  IPluginV3 (libplugin_bench.so), for the CUDA-graph benchmark.
"""

from __future__ import annotations

from trt_plugin_kit.models import vit


def _torch():
    try:
        import torch  # noqa: PLC0415 - optional extra
    except ImportError as error:
        raise ImportError("PyTorch is not installed: pip install -e '.[torch]'") from error
    return torch


class TorchKernels:
    """RMSNorm, attention and SwiGLU in PyTorch's own ops."""

    def __init__(self):
        self.F = _torch().nn.functional

    def rms_norm(self, x, gain):
        return self.F.rms_norm(x, (x.shape[-1],), gain, vit.EPS)

    def attention(self, q, k, v):
        return self.F.scaled_dot_product_attention(q, k, v)  # scale 1/sqrt(D): FlashAttentionTriton's default

    def swiglu(self, x):
        a, b = x.chunk(2, dim=-1)
        return self.F.silu(a) * b


class TorchOpKernels:
    """The plugins as PyTorch custom ops (computed by their NumPy references): what the exporter turns
    into the plugin nodes."""

    def __init__(self):
        from trt_plugin_kit.models.torch_op import torch_op  # noqa: PLC0415

        self._rms = torch_op("RmsNormLastAxis")
        self._attention = torch_op("FlashAttentionTriton")
        self._swiglu = torch_op(
            "SwiGLUSplit", output_shapes=lambda xs, _f: [(*xs[0].shape[:-1], xs[0].shape[-1] // 2)]
        )

    def rms_norm(self, x, gain):
        return self._rms(x, gain, eps=vit.EPS)

    def attention(self, q, k, v):
        return self._attention(q, k, v, causal=0)

    def swiglu(self, x):
        return self._swiglu(x)


PLUGINS = ("RmsNormLastAxis", "FlashAttentionTriton", "SwiGLUSplit")


def make_module(params: dict, kernels):
    """mnist_vit with `kernels`' three ops; the weights as buffers (float32; ``.to()`` moves them)."""
    torch = _torch()
    F = torch.nn.functional
    vit.validate_parameters(params)
    grid = 28 // vit.PATCH

    class MnistVit(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.kernels = kernels
            self.blocks = vit.block_count(params)
            for name, value in params.items():
                self.register_buffer(name.replace(".", "_"), torch.from_numpy(value.copy()))

        def p(self, name: str):
            return getattr(self, name.replace(".", "_"))

        def linear(self, x, name: str):
            return F.linear(x, self.p(f"{name}.weight"), self.p(f"{name}.bias"))

        def block(self, b: int, x):
            k, p = self.kernels, f"block{b}"
            qkv = self.linear(k.rms_norm(x, self.p(f"{p}.norm1")), f"{p}.qkv")
            # [N, S, 3 * WIDTH] -> [3, N, HEADS, S, HEAD_SIZE], contiguous: q, k, v as the plugin takes them
            qkv = qkv.reshape(-1, vit.TOKENS, 3, vit.HEADS, vit.HEAD_SIZE).permute(2, 0, 3, 1, 4).contiguous()
            o = k.attention(qkv[0], qkv[1], qkv[2]).transpose(1, 2).reshape(-1, vit.TOKENS, vit.WIDTH)
            h = x + self.linear(o, f"{p}.proj")
            y = k.swiglu(self.linear(k.rms_norm(h, self.p(f"{p}.norm2")), f"{p}.fc1"))
            return h + self.linear(y, f"{p}.fc2")

        def forward(self, image):
            x = image.reshape(-1, grid, vit.PATCH, grid, vit.PATCH).permute(0, 1, 3, 2, 4)
            x = self.linear(x.reshape(-1, vit.TOKENS, vit.PATCH * vit.PATCH), "patch") + self.p("position")
            for b in range(self.blocks):
                x = self.block(b, x)
            z = self.kernels.rms_norm(x.mean(dim=1), self.p("norm"))
            return self.linear(z, "head")

    return MnistVit()


def served_module(params: dict, kernels):
    """What the served model answers (its ONNX contract): ``image`` -> ``probabilities``, softmax of the
    logits."""
    torch = _torch()
    logits = make_module(params, kernels)

    class Served(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.logits = logits

        def forward(self, image):
            return torch.softmax(self.logits(image), dim=-1)

    return Served()
