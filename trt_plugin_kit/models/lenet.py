"""LeNet-5 for MNIST in NumPy: parameter layout, weight files, and the forward/backward pass for training.

Layout (the Caffe LeNet of the TensorRT MNIST samples, with a learned PReLU as activation)::

    image [N,1,28,28]
      -> conv1 20@5x5 (stride 1, no padding)      [N,20,24,24]
      -> Pool max 2x2/2                           [N,20,12,12]
      -> conv2 50@5x5                             [N,50,8,8]
      -> Pool max 2x2/2                           [N,50,4,4]
      -> FullyConnected 500 (flattens C,H,W)      [N,500]
      -> PReLU (500 learned slopes, one per unit) [N,500]
      -> FullyConnected 10                        [N,10]
      -> softmax                                  probabilities [N,10]

The convolutions stay standard ONNX Conv in both ONNX flavours; pools, fully connected layers and PReLU are
our plugins in the plugin flavour. Weights are stored as ``.npz`` with the names of :data:`PARAMETER_SHAPES`
(PyTorch-like layouts: conv ``[out, in, kh, kw]``, fully connected ``[out, in]``).

The training pass works internally in NHWC (channels last) so that im2col is a reshape followed by one matrix
product; the flatten before fc1 uses NCHW order (C, H, W), as ONNX Flatten and the FullyConnected plugin do.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

PARAMETER_SHAPES: dict[str, tuple[int, ...]] = {
    "conv1.weight": (20, 1, 5, 5),
    "conv1.bias": (20,),
    "conv2.weight": (50, 20, 5, 5),
    "conv2.bias": (50,),
    "fc1.weight": (500, 800),
    "fc1.bias": (500,),
    "prelu.slopes": (500,),
    "fc2.weight": (10, 500),
    "fc2.bias": (10,),
}
PRELU_INITIAL_SLOPE = 0.25


def init_parameters(rng: np.random.Generator, dtype=np.float32) -> dict[str, np.ndarray]:
    """He-normal weights, zero biases, PReLU slopes 0.25."""
    params = {}
    for name, shape in PARAMETER_SHAPES.items():
        if name.endswith(".weight"):
            fan_in = int(np.prod(shape[1:]))
            params[name] = rng.normal(0.0, np.sqrt(2.0 / fan_in), size=shape).astype(dtype)
        elif name == "prelu.slopes":
            params[name] = np.full(shape, PRELU_INITIAL_SLOPE, dtype=dtype)
        else:
            params[name] = np.zeros(shape, dtype=dtype)
    return params


def save_weights(path: str | Path, params: dict[str, np.ndarray]) -> None:
    """Writes float32 weights as a compressed ``.npz`` (validated against :data:`PARAMETER_SHAPES`)."""
    validate_parameters(params)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **{name: params[name].astype(np.float32) for name in PARAMETER_SHAPES})


def load_weights(path: str | Path) -> dict[str, np.ndarray]:
    """Reads and validates a LeNet-5 ``.npz`` weight file (float32 arrays)."""
    with np.load(path, allow_pickle=False) as archive:
        params = {name: archive[name] for name in archive.files}
    validate_parameters(params)
    return {name: params[name].astype(np.float32) for name in PARAMETER_SHAPES}


def validate_parameters(params: dict[str, np.ndarray]) -> None:
    """Raises ValueError when a parameter is missing, unexpected, misshaped or not finite."""
    missing = sorted(set(PARAMETER_SHAPES) - set(params))
    unexpected = sorted(set(params) - set(PARAMETER_SHAPES))
    if missing or unexpected:
        raise ValueError(f"LeNet-5 weights: missing {missing}, unexpected {unexpected}")
    for name, shape in PARAMETER_SHAPES.items():
        array = np.asarray(params[name])
        if array.shape != shape:
            raise ValueError(f"LeNet-5 weights: {name} has shape {array.shape}, expected {shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"LeNet-5 weights: {name} contains NaN or infinity")


# ----------------------------------------------------------------------------- layers (NHWC, training)


def _im2col(x: np.ndarray, k: int) -> np.ndarray:
    """NHWC ``[N,H,W,C]`` -> ``[N, H-k+1, W-k+1, C*k*k]`` in (C, kh, kw) order, matching conv weights."""
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))  # [N,OH,OW,C,k,k]
    n, oh, ow = windows.shape[:3]
    return windows.reshape(n, oh, ow, -1)


def _col2im(cols_grad: np.ndarray, input_shape: tuple[int, ...], k: int) -> np.ndarray:
    """Adjoint of :func:`_im2col`: scatters ``[N,OH,OW,C*k*k]`` gradients back to ``[N,H,W,C]``."""
    n, h, w, c = input_shape
    oh, ow = h - k + 1, w - k + 1
    grads = cols_grad.reshape(n, oh, ow, c, k, k)
    x_grad = np.zeros(input_shape, dtype=cols_grad.dtype)
    for i in range(k):
        for j in range(k):
            x_grad[:, i : i + oh, j : j + ow, :] += grads[:, :, :, :, i, j]
    return x_grad


def _maxpool2x2(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """2x2/2 max pool of NHWC; returns the output and the winning position (0..3) of each window."""
    n, h, w, c = x.shape
    windows = (
        x.reshape(n, h // 2, 2, w // 2, 2, c).transpose(0, 1, 3, 5, 2, 4).reshape(n, h // 2, w // 2, c, 4)
    )
    winner = windows.argmax(axis=-1)
    return np.take_along_axis(windows, winner[..., None], axis=-1)[..., 0], winner


def _maxpool2x2_backward(out_grad: np.ndarray, winner: np.ndarray) -> np.ndarray:
    """Routes each window's gradient to the element that won the max (first one on ties)."""
    n, oh, ow, c = out_grad.shape
    grads = np.zeros((n, oh, ow, c, 4), dtype=out_grad.dtype)
    np.put_along_axis(grads, winner[..., None], out_grad[..., None], axis=-1)
    return grads.reshape(n, oh, ow, c, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(n, oh * 2, ow * 2, c)


def forward(params: dict[str, np.ndarray], images: np.ndarray, keep: bool = False):
    """Logits ``[N, 10]`` for NCHW ``images`` ``[N,1,28,28]``; with ``keep`` also the cache for backward."""
    x = images.transpose(0, 2, 3, 1)  # NHWC
    cols1 = _im2col(x, 5)  # [N,24,24,25]
    conv1 = cols1 @ params["conv1.weight"].reshape(20, -1).T + params["conv1.bias"]
    pool1, winner1 = _maxpool2x2(conv1)  # [N,12,12,20]
    cols2 = _im2col(pool1, 5)  # [N,8,8,500]
    conv2 = cols2 @ params["conv2.weight"].reshape(50, -1).T + params["conv2.bias"]
    pool2, winner2 = _maxpool2x2(conv2)  # [N,4,4,50]
    flat = pool2.transpose(0, 3, 1, 2).reshape(len(images), -1)  # NCHW flatten order
    fc1 = flat @ params["fc1.weight"].T + params["fc1.bias"]
    slopes = params["prelu.slopes"]
    act = np.where(fc1 > 0, fc1, slopes * fc1)
    logits = act @ params["fc2.weight"].T + params["fc2.bias"]
    if not keep:
        return logits
    cache = dict(cols1=cols1, winner1=winner1, pool1_shape=pool1.shape, cols2=cols2, winner2=winner2)
    cache.update(pool2_shape=pool2.shape, flat=flat, fc1=fc1, act=act)
    return logits, cache


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


def loss_and_gradients(
    params: dict[str, np.ndarray], images: np.ndarray, labels: np.ndarray
) -> tuple[float, dict[str, np.ndarray], np.ndarray]:
    """Mean cross-entropy, its gradients w.r.t. every parameter, and the logits."""
    logits, cache = forward(params, images, keep=True)
    n = len(images)
    probs = softmax(logits.astype(np.float64))
    loss = float(-np.mean(np.log(probs[np.arange(n), labels] + 1e-30)))
    d_logits = probs
    d_logits[np.arange(n), labels] -= 1.0
    d_logits = (d_logits / n).astype(logits.dtype)

    grads = {}
    act, fc1 = cache["act"], cache["fc1"]
    grads["fc2.weight"] = d_logits.T @ act
    grads["fc2.bias"] = d_logits.sum(axis=0)
    d_act = d_logits @ params["fc2.weight"]
    positive = fc1 > 0
    grads["prelu.slopes"] = np.where(positive, 0, fc1 * d_act).sum(axis=0)
    d_fc1 = np.where(positive, d_act, params["prelu.slopes"] * d_act)
    grads["fc1.weight"] = d_fc1.T @ cache["flat"]
    grads["fc1.bias"] = d_fc1.sum(axis=0)
    d_flat = d_fc1 @ params["fc1.weight"]
    n_, h2, w2, c2 = cache["pool2_shape"]
    d_pool2 = d_flat.reshape(n, c2, h2, w2).transpose(0, 2, 3, 1)
    d_conv2 = _maxpool2x2_backward(d_pool2, cache["winner2"]).reshape(-1, 50)  # [N*8*8, 50]
    cols2 = cache["cols2"].reshape(len(d_conv2), -1)
    grads["conv2.weight"] = (d_conv2.T @ cols2).reshape(PARAMETER_SHAPES["conv2.weight"])
    grads["conv2.bias"] = d_conv2.sum(axis=0)
    d_cols2 = (d_conv2 @ params["conv2.weight"].reshape(50, -1)).reshape(cache["cols2"].shape)
    d_pool1 = _col2im(d_cols2, cache["pool1_shape"], 5)
    d_conv1 = _maxpool2x2_backward(d_pool1, cache["winner1"]).reshape(-1, 20)  # [N*24*24, 20]
    cols1 = cache["cols1"].reshape(len(d_conv1), -1)
    grads["conv1.weight"] = (d_conv1.T @ cols1).reshape(PARAMETER_SHAPES["conv1.weight"])
    grads["conv1.bias"] = d_conv1.sum(axis=0)
    return loss, grads, logits


def predict(params: dict[str, np.ndarray], images: np.ndarray, batch_size: int = 500) -> np.ndarray:
    """Predicted digits for NCHW float images (the training-side forward pass, batched)."""
    predictions = [
        forward(params, images[i : i + batch_size]).argmax(axis=1) for i in range(0, len(images), batch_size)
    ]
    return np.concatenate(predictions) if predictions else np.zeros(0, dtype=np.int64)
