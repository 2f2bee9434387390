"""mnist_vit served by the real tritonserver on the CPU (model_repository/mnist_vit/: the plugin_onnx stand-in
of model.onnx, the plugin flavour TensorRT builds its engine from): its answers over HTTP and gRPC are the
NumPy model's (trt_plugin_kit/models/vit.py, the committed weights) on validation digits, and PyTorch's
(the logits its module gave on a GPU, recorded), its accuracy on them is the record's, and the mnist clients
take it (`eval --raw --model mnist_vit`)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from trt_plugin_kit.interface import MNIST_VIT, MODELS_DIR, REPO_ROOT
from trt_plugin_kit.models import mnist, vit

MODEL = MNIST_VIT
DIGITS = 48  # validation digits sent (in batches of 16): enough for every class, little CPU
# PyTorch's logits of the 1,000 validation digits: mnist_vit's PyTorch module (models/vit_torch.py, FP32, TF32
# off) on the H200, written by `python3 -m trt_plugin_kit.models.vit_graph` (scripts/gpu_transformer.sh).
TORCH_LOGITS = MODELS_DIR / "mnist_vit_torch_logits.npy"


@pytest.fixture(scope="module")
def server(triton_server):
    """The suite's server of model_repository/ (tests/conftest.py): mnist_vit is one of its models."""
    assert MODEL in triton_server.loaded_models()
    return triton_server


@pytest.fixture(scope="module")
def digits():
    split = mnist.load_split()
    return mnist.to_tensor(split.validation_images[:DIGITS]), split.validation_labels[:DIGITS].astype(
        np.int64
    )


def _http(server, images):
    client = httpclient.InferenceServerClient(url=server.http_url)
    try:
        tensor = httpclient.InferInput("image", list(images.shape), "FP32")
        tensor.set_data_from_numpy(images)
        return client.infer(MODEL, [tensor]).as_numpy("probabilities")
    finally:
        client.close()


def _grpc(server, images):
    client = grpcclient.InferenceServerClient(url=server.grpc_url)
    try:
        tensor = grpcclient.InferInput("image", list(images.shape), "FP32")
        tensor.set_data_from_numpy(images)
        return client.infer(MODEL, [tensor]).as_numpy("probabilities")
    finally:
        client.close()


@pytest.mark.parametrize("protocol", [_http, _grpc], ids=["http", "grpc"])
def test_served_answers_are_the_numpy_models(server, digits, protocol):
    images, labels = digits
    params = vit.load_weights(MODELS_DIR / "mnist_vit.npz")
    want = vit.probabilities(params, images)
    got = np.concatenate([protocol(server, images[i : i + 16]) for i in range(0, DIGITS, 16)])
    assert got.shape == (DIGITS, 10) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert np.array_equal(got.argmax(axis=1), want.argmax(axis=1))
    assert np.mean(got.argmax(axis=1) == labels) >= 0.95


@pytest.fixture(scope="module")
def torch_logits():
    if not TORCH_LOGITS.is_file():  # before the server starts: nothing to compare with yet
        pytest.skip(f"{TORCH_LOGITS.name} not recorded: scripts/gpu_transformer.sh on a GPU host writes it")
    logits = np.load(TORCH_LOGITS)
    assert logits.shape == (1000, 10) and logits.dtype == np.float32 and np.all(np.isfinite(logits))
    return logits


@pytest.mark.parametrize("protocol", [_http, _grpc], ids=["http", "grpc"])
def test_served_answers_are_pytorchs(torch_logits, server, digits, protocol):
    """The served probabilities are the softmax of PyTorch's recorded logits; the predictions PyTorch's."""
    images, _labels = digits
    logits = torch_logits[:DIGITS].astype(np.float64)
    want = np.exp(logits - logits.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    got = np.concatenate([protocol(server, images[i : i + 16]) for i in range(0, DIGITS, 16)])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
    assert np.array_equal(got.argmax(axis=1), logits.argmax(axis=1))


def test_the_mnist_client_evaluates_it(server, digits):
    """`eval --raw --model mnist_vit` (mnist's contract: same tensors) reports the accuracy the NumPy model
    has on the same validation digits (its last line, `accuracy: <fraction>`)."""
    images, labels = digits
    params = vit.load_weights(MODELS_DIR / "mnist_vit.npz")
    want = float(np.mean(vit.predict(params, images) == labels))
    run = subprocess.run(
        [sys.executable, "-m", "clients", "eval", "--raw", "--model", MODEL, "--url", f"http://{server.http_url}",
         "--limit", str(DIGITS)],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().splitlines()[-1] == f"accuracy: {want:.4f}"


@pytest.mark.timeout(180)
def test_the_load_test_takes_it(server, tmp_path):
    """Locust (`python -m loadtests --mix mnist_vit=1`) over both protocols, no failed request."""
    http_host, http_port = server.http_url.rsplit(":", 1)
    grpc_port = server.grpc_url.rsplit(":", 1)[1]
    run = subprocess.run(
        [sys.executable, "-m", "loadtests", "--host", http_host, "--http-port", http_port,
         "--grpc-port", grpc_port, "--mix", f"{MODEL}=1", "--users", "2", "--run-time", "3s",
         "--reports-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=150, cwd=REPO_ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["passed"], summary
