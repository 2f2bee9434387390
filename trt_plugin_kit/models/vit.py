"""mnist_vit: a small Vision Transformer for the MNIST digits in NumPy (forward, backward, weights).

Layout (pre-norm blocks, the transformer plugins of issue 43 in its plugin flavour)::

    image [N,1,28,28] -> 49 patches of 4x4 pixels [N,49,16]
      -> patch embedding: linear 16 -> 64, + learned position embedding [49,64]     tokens [N,49,64]
      -> BLOCKS x:  h = x + Wo . attention(RMSNorm(x))           (RmsNormLastAxis, FlashAttentionTriton:
                    x = h + W2 . swiglu(W1 . RMSNorm(h))          4 heads of 16, q.k^T / 4; SwiGLUSplit)
      -> mean over the tokens, RMSNorm, linear 64 -> 10, softmax                    probabilities [N,10]

Linear layers keep PyTorch's layout (``weight [out, in]``, ``y = x . weight^T + bias``). Weights are
``.npz`` with the names and shapes of :func:`parameter_shapes`. The training pass works in float32 and keeps
what the backward pass needs (:func:`forward` with ``keep=True``); :func:`loss_and_gradients` is checked
against finite differences in float64 (tests/unit/test_vit.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

PATCH = 4
TOKENS = (28 // PATCH) ** 2  # 49
WIDTH = 64
HEADS = 4
HEAD_SIZE = WIDTH // HEADS  # 16: one of FlashAttentionTriton's head sizes
MLP_HIDDEN = 128  # SwiGLU: W1 gives 2 x 128 (a and b), W2 takes 128
BLOCKS = 3
EPS = 1e-6  # every RMSNorm's eps (RmsNormLastAxis's default)


def parameter_shapes(blocks: int = BLOCKS) -> dict[str, tuple[int, ...]]:
    shapes = {
        "patch.weight": (WIDTH, PATCH * PATCH),
        "patch.bias": (WIDTH,),
        "position": (TOKENS, WIDTH),
    }
    for b in range(blocks):
        shapes |= {
            f"block{b}.norm1": (WIDTH,),
            f"block{b}.qkv.weight": (3 * WIDTH, WIDTH),
            f"block{b}.qkv.bias": (3 * WIDTH,),
            f"block{b}.proj.weight": (WIDTH, WIDTH),
            f"block{b}.proj.bias": (WIDTH,),
            f"block{b}.norm2": (WIDTH,),
            f"block{b}.fc1.weight": (2 * MLP_HIDDEN, WIDTH),
            f"block{b}.fc1.bias": (2 * MLP_HIDDEN,),
            f"block{b}.fc2.weight": (WIDTH, MLP_HIDDEN),
            f"block{b}.fc2.bias": (WIDTH,),
        }
    return shapes | {"norm": (WIDTH,), "head.weight": (10, WIDTH), "head.bias": (10,)}


def block_count(params: dict[str, np.ndarray]) -> int:
    return sum(1 for name in params if name.endswith(".qkv.weight"))


def init_parameters(
    rng: np.random.Generator, blocks: int = BLOCKS, dtype=np.float32
) -> dict[str, np.ndarray]:
    """Truncation-free normal weights with std 0.02 (ViT's), 1/sqrt(2 blocks) on the residual outputs,
    zero biases, RMSNorm gains of 1."""
    params = {}
    for name, shape in parameter_shapes(blocks).items():
        if name.endswith("bias"):
            value = np.zeros(shape)
        elif "norm" in name:
            value = np.ones(shape)
        else:
            std = 0.02 / np.sqrt(2 * blocks) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
            value = rng.normal(0.0, std, size=shape)
        params[name] = value.astype(dtype)
    return params


def save_weights(path: str | Path, params: dict[str, np.ndarray]) -> None:
    validate_parameters(params)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **{name: value.astype(np.float32) for name, value in params.items()})


def load_weights(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as archive:
        params = {name: archive[name].astype(np.float32) for name in archive.files}
    validate_parameters(params)
    return params


def validate_parameters(params: dict[str, np.ndarray]) -> None:
    """Raises ValueError when a parameter is missing, unexpected, misshaped or not finite."""
    expected = parameter_shapes(block_count(params))
    missing, unexpected = sorted(set(expected) - set(params)), sorted(set(params) - set(expected))
    if missing or unexpected:
        raise ValueError(f"mnist_vit weights: missing {missing}, unexpected {unexpected}")
    for name, shape in expected.items():
        if params[name].shape != shape or not np.all(np.isfinite(params[name])):
            raise ValueError(
                f"mnist_vit weights: {name} must be finite {list(shape)}, got {params[name].shape}"
            )


# ------------------------------------------------------------------------------------------- the ops


def patches(images: np.ndarray) -> np.ndarray:
    """[N,1,28,28] -> [N,49,16]: row-major 4x4 patches, each flattened row-major (the ONNX export's
    Reshape/Transpose/Reshape does the same)."""
    n = images.shape[0]
    grid = 28 // PATCH
    x = images.reshape(n, grid, PATCH, grid, PATCH).transpose(0, 1, 3, 2, 4)
    return x.reshape(n, TOKENS, PATCH * PATCH)


def rms_norm(x: np.ndarray, gain: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RmsNormLastAxis: returns (y, 1/rms) over the last axis."""
    inv = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS)
    return x * inv * gain, inv


def rms_norm_backward(dy, x, inv, gain) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dgain) of y = x * inv * gain, inv = (mean(x^2) + eps)^-1/2."""
    g = dy * gain
    dx = inv * g - x * inv**3 * np.mean(g * x, axis=-1, keepdims=True)
    dgain = np.sum(dy * x * inv, axis=tuple(range(dy.ndim - 1)))
    return dx, dgain


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``x . weight^T + bias`` over any leading axes, as one 2-D product (NumPy's stacked matmul with a
    transposed operand does not reach BLAS: 100x slower here)."""
    return (x.reshape(-1, x.shape[-1]) @ weight.T + bias).reshape(*x.shape[:-1], weight.shape[0])


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def split_heads(x: np.ndarray) -> np.ndarray:
    """[N,S,WIDTH] -> [N,HEADS,S,HEAD_SIZE] (FlashAttentionTriton's layout)."""
    n, s, _ = x.shape
    return x.reshape(n, s, HEADS, HEAD_SIZE).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    n, _, s, _ = x.shape
    return x.transpose(0, 2, 1, 3).reshape(n, s, WIDTH)


def silu(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = 1.0 / (1.0 + np.exp(-a))
    return a * s, s


# ------------------------------------------------------------------------------------ forward, backward


def _block_forward(params, b: int, x: np.ndarray, cache: dict | None) -> np.ndarray:
    p = f"block{b}."
    u, inv1 = rms_norm(x, params[p + "norm1"])
    qkv = linear(u, params[p + "qkv.weight"], params[p + "qkv.bias"])
    q, k, v = (split_heads(t) for t in np.split(qkv, 3, axis=-1))
    attn = softmax(q @ k.transpose(0, 1, 3, 2) * HEAD_SIZE**-0.5)
    o = merge_heads(attn @ v)
    h = x + linear(o, params[p + "proj.weight"], params[p + "proj.bias"])
    w, inv2 = rms_norm(h, params[p + "norm2"])
    ab = linear(w, params[p + "fc1.weight"], params[p + "fc1.bias"])
    a, gate = np.split(ab, 2, axis=-1)
    silu_a, sig = silu(a)
    y = silu_a * gate
    out = h + linear(y, params[p + "fc2.weight"], params[p + "fc2.bias"])
    if cache is not None:
        cache[b] = (x, u, inv1, q, k, v, attn, o, h, w, inv2, a, gate, silu_a, sig, y)
    return out


def forward(params: dict[str, np.ndarray], images: np.ndarray, keep: bool = False):
    """Logits [N,10] (and, with keep, what the backward pass needs)."""
    cache: dict | None = {} if keep else None
    pix = patches(images)
    x = linear(pix, params["patch.weight"], params["patch.bias"]) + params["position"]
    for b in range(block_count(params)):
        x = _block_forward(params, b, x, cache)
    pooled = x.mean(axis=1)
    z, inv = rms_norm(pooled, params["norm"])
    logits = linear(z, params["head.weight"], params["head.bias"])
    if keep:
        cache["top"] = (pix, x, pooled, z, inv)
        return logits, cache
    return logits


def _linear_backward(dy, x, weight, grads, name) -> np.ndarray:
    """y = x . weight^T + bias over any leading axes: fills the gradients, returns dx."""
    flat_dy, flat_x = dy.reshape(-1, dy.shape[-1]), x.reshape(-1, x.shape[-1])
    grads[name + ".weight"] = flat_dy.T @ flat_x
    grads[name + ".bias"] = flat_dy.sum(axis=0)
    return (flat_dy @ weight).reshape(*dy.shape[:-1], weight.shape[1])


def _block_backward(params, b: int, dout: np.ndarray, cache, grads) -> np.ndarray:
    p = f"block{b}."
    x, u, inv1, q, k, v, attn, o, h, w, inv2, a, gate, silu_a, sig, y = cache[b]
    dh = dout.copy()
    dy = _linear_backward(dout, y, params[p + "fc2.weight"], grads, p + "fc2")
    da = dy * gate * sig * (1.0 + a * (1.0 - sig))
    dgate = dy * silu_a
    dw = _linear_backward(np.concatenate([da, dgate], axis=-1), w, params[p + "fc1.weight"], grads, p + "fc1")
    dh_norm, grads[p + "norm2"] = rms_norm_backward(dw, h, inv2, params[p + "norm2"])
    dh += dh_norm
    dx = dh.copy()
    do = split_heads(_linear_backward(dh, o, params[p + "proj.weight"], grads, p + "proj"))
    dattn = do @ v.transpose(0, 1, 3, 2)
    dv = attn.transpose(0, 1, 3, 2) @ do
    dscores = attn * (dattn - np.sum(dattn * attn, axis=-1, keepdims=True)) * HEAD_SIZE**-0.5
    dq, dk = dscores @ k, dscores.transpose(0, 1, 3, 2) @ q
    dqkv = np.concatenate([merge_heads(dq), merge_heads(dk), merge_heads(dv)], axis=-1)
    du = _linear_backward(dqkv, u, params[p + "qkv.weight"], grads, p + "qkv")
    dx_norm, grads[p + "norm1"] = rms_norm_backward(du, x, inv1, params[p + "norm1"])
    return dx + dx_norm


def loss_and_gradients(params, images: np.ndarray, labels: np.ndarray) -> tuple[float, dict, np.ndarray]:
    """Mean cross-entropy over the batch, its gradients (same names as params), and the logits."""
    logits, cache = forward(params, images, keep=True)
    n = images.shape[0]
    probs = softmax(logits)
    loss = float(-np.mean(np.log(probs[np.arange(n), labels] + 1e-12)))
    dlogits = probs
    dlogits[np.arange(n), labels] -= 1.0
    dlogits /= n
    pix, x, pooled, z, inv = cache["top"]
    grads: dict[str, np.ndarray] = {}
    dz = _linear_backward(dlogits, z, params["head.weight"], grads, "head")
    dpooled, grads["norm"] = rms_norm_backward(dz, pooled, inv, params["norm"])
    dx = np.broadcast_to(dpooled[:, None, :] / x.shape[1], x.shape).astype(x.dtype)
    for b in reversed(range(block_count(params))):
        dx = _block_backward(params, b, dx, cache, grads)
    grads["position"] = dx.sum(axis=0)
    _linear_backward(dx, pix, params["patch.weight"], grads, "patch")
    return loss, {name: grads[name].astype(params[name].dtype) for name in params}, logits


def predict(params: dict[str, np.ndarray], images: np.ndarray, batch_size: int = 500) -> np.ndarray:
    return np.concatenate(
        [
            np.argmax(forward(params, images[i : i + batch_size]), axis=1)
            for i in range(0, len(images), batch_size)
        ]
    )


def probabilities(params: dict[str, np.ndarray], images: np.ndarray) -> np.ndarray:
    """What the served model answers: softmax of the logits, float32 [N,10]."""
    return softmax(forward(params, images.astype(np.float32))).astype(np.float32)
