"""End-to-end tests against a real tritonserver: the CPU variant of `make serve` (see the `triton_server`
fixture in conftest.py), spoken to over HTTP and gRPC with NVIDIA's tritonclient.

Covers the repository's public interface (model names, tensors, shapes, labels), inference on every model
over both protocols, accuracy through the whole image pipeline, the classification extension, Prometheus
metrics, the hardened administrative APIs, and a matrix of bad inputs after each of which the server must
still answer correctly.
"""

from __future__ import annotations

import io
import re
import struct
import time
import urllib.request
import zlib
from collections.abc import Callable

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from PIL import Image
from tritonclient.grpc import model_config_pb2
from tritonclient.utils import InferenceServerException

from trt_plugin_kit.interface import (
    ADMIN_HEADER,
    GRPC_ADMIN_HEADER,
    MODEL_NAMES,
    REPO_ROOT,
    repository_models,
)
from trt_plugin_kit.models import mnist
from trt_plugin_kit.specs.reference import l2_normalize

PROTOCOLS = ("http", "grpc")
NATIVE_ONNX = REPO_ROOT / "models" / "onnx" / "mnist_native.onnx"
ACCURACY_DIGITS = 1000
MIN_PIPELINE_ACCURACY = 0.97

# name -> (inputs, outputs), each {tensor: (datatype, shape without the batch dimension)}
INTERFACE = {
    "mnist": ({"image": ("FP32", [1, 28, 28])}, {"probabilities": ("FP32", [10])}),
    "l2norm": ({"vector": ("FP32", [-1])}, {"normalized": ("FP32", [-1])}),
    "mnist_preprocess": ({"image_bytes": ("BYTES", [1])}, {"image": ("FP32", [1, 28, 28])}),
    "mnist_pipeline": ({"image_bytes": ("BYTES", [1])}, {"probabilities": ("FP32", [10])}),
}


class Triton:
    """The same calls over HTTP or gRPC, so that every test runs on both protocols."""

    def __init__(self, protocol: str, server):
        self.protocol = protocol
        self.module = httpclient if protocol == "http" else grpcclient
        url = server.http_url if protocol == "http" else server.grpc_url
        self.client = self.module.InferenceServerClient(url=url)

    def infer(
        self,
        model: str,
        tensors: dict[str, np.ndarray],
        datatypes: dict[str, str] | None = None,
        class_count: int = 0,
        headers: dict[str, str] | None = None,
    ):
        inputs = []
        for name, array in tensors.items():
            datatype = (datatypes or {}).get(name) or ("BYTES" if array.dtype == np.object_ else "FP32")
            tensor = self.module.InferInput(name, list(array.shape), datatype)
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        outputs = None
        if class_count:
            output_name = next(iter(INTERFACE[model][1]))
            outputs = [self.module.InferRequestedOutput(output_name, class_count=class_count)]
        return self.client.infer(model, inputs, outputs=outputs, headers=headers)

    def close(self):
        self.client.close()


@pytest.fixture(scope="module", params=PROTOCOLS)
def triton(request, triton_server):
    client = Triton(request.param, triton_server)
    yield client
    client.close()


@pytest.fixture(scope="module")
def validation_digits():
    split = mnist.load_split()
    return split.validation_images[:ACCURACY_DIGITS], split.validation_labels[:ACCURACY_DIGITS]


def png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def as_bytes_tensor(blobs: list[bytes]) -> np.ndarray:
    return np.array(blobs, dtype=np.object_).reshape(-1, 1)


def onnx_reference(images: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(NATIVE_ONNX), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: images})[0]


# ------------------------------------------------------------------------------------- interface


def test_server_is_live_and_serves_every_model(triton_server):
    http = httpclient.InferenceServerClient(url=triton_server.http_url)
    grpc = grpcclient.InferenceServerClient(url=triton_server.grpc_url)
    try:
        assert http.is_server_ready() and grpc.is_server_ready()
        for name in MODEL_NAMES:
            assert http.is_model_ready(name), f"{name} not ready; log:\n{triton_server.log_tail()}"
            assert grpc.is_model_ready(name)
    finally:
        http.close()
        grpc.close()


@pytest.mark.parametrize("model", sorted(INTERFACE))
def test_model_interface_matches_the_documented_table(triton_server, model):
    client = httpclient.InferenceServerClient(url=triton_server.http_url)
    try:
        metadata, config = client.get_model_metadata(model), client.get_model_config(model)
    finally:
        client.close()
    expected_inputs, expected_outputs = INTERFACE[model]
    assert config["max_batch_size"] > 0
    for declared, expected in (
        (metadata["inputs"], expected_inputs),
        (metadata["outputs"], expected_outputs),
    ):
        # Metadata shapes include the batch dimension (-1).
        assert {t["name"]: (t["datatype"], t["shape"]) for t in declared} == {
            name: (datatype, [-1, *shape]) for name, (datatype, shape) in expected.items()
        }
    if model != "mnist_pipeline":  # ensembles batch through their steps' dynamic batchers
        assert "dynamic_batching" in config
    if model in ("mnist", "l2norm"):
        assert config["model_warmup"], f"{model} has no warm-up"


# ------------------------------------------------------------------------------------- inference


def test_generic_image_clients_find_the_layout_of_mnist(triton, validation_digits):
    """What NVIDIA's image_client.py (tritonclient examples) reads before it sends anything: one input with a
    FORMAT_NCHW/NHWC layout (FORMAT_NONE made it stop: issue 18 item 9), C, H, W from the metadata in that
    order, and a classification answer."""
    metadata = triton.client.get_model_metadata("mnist")
    config = triton.client.get_model_config("mnist")
    if triton.protocol == "http":
        layout, shape = config["input"][0]["format"], metadata["inputs"][0]["shape"]
    else:
        layout = model_config_pb2.ModelInput.Format.Name(config.config.input[0].format)
        shape = list(metadata.inputs[0].shape)
    assert layout == "FORMAT_NCHW"
    _, channels, height, width = shape
    assert (channels, height, width) == (1, 28, 28)
    digits, labels = validation_digits[0][:2], validation_digits[1][:2]
    result = triton.infer("mnist", {"image": mnist.to_tensor(digits)}, class_count=1)
    answers = [entry.decode().split(":") for entry in result.as_numpy("probabilities").reshape(-1)]
    assert [int(label) for _, _, label in answers] == labels.tolist()


def test_mnist_matches_onnx_runtime_on_the_native_model(triton, validation_digits):
    images = mnist.to_tensor(validation_digits[0][:16])
    probabilities = triton.infer("mnist", {"image": images}).as_numpy("probabilities")
    assert probabilities.shape == (16, 10) and probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities, onnx_reference(images), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)


def test_pipeline_on_png_bytes_equals_mnist_on_the_tensor(triton, validation_digits):
    digits = validation_digits[0][:8]
    result = triton.infer("mnist_pipeline", {"image_bytes": as_bytes_tensor([png(d) for d in digits])})
    expected = triton.infer("mnist", {"image": mnist.to_tensor(digits)}).as_numpy("probabilities")
    np.testing.assert_allclose(result.as_numpy("probabilities"), expected, rtol=1e-6, atol=1e-7)


def test_pipeline_reads_a_large_dark_on_light_rgb_jpeg(triton, validation_digits):
    """A phone-photo-like input: 10x larger, inverted (black ink on white), RGB, JPEG."""
    digit, label = validation_digits[0][0], int(validation_digits[1][0])
    paper = Image.fromarray(255 - digit).resize((280, 280), Image.Resampling.BICUBIC).convert("RGB")
    buffer = io.BytesIO()
    paper.save(buffer, format="JPEG", quality=90)
    probabilities = triton.infer("mnist_pipeline", {"image_bytes": as_bytes_tensor([buffer.getvalue()])})
    assert int(np.argmax(probabilities.as_numpy("probabilities"))) == label


@pytest.mark.parametrize("length", [1, 7, 128, 1000])
def test_l2norm_matches_the_reference(triton, length):
    vectors = np.random.default_rng(length).normal(size=(4, length)).astype(np.float32)
    normalized = triton.infer("l2norm", {"vector": vectors}).as_numpy("normalized")
    assert normalized.shape == vectors.shape and normalized.dtype == np.float32
    np.testing.assert_allclose(normalized, l2_normalize(vectors), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.linalg.norm(normalized, axis=1), 1.0, rtol=1e-5)


def test_pipeline_accuracy_on_1000_dev_digits_as_png(triton, validation_digits):
    images, labels = validation_digits
    assert len(images) == ACCURACY_DIGITS
    predictions = []
    for start in range(0, len(images), 50):  # 50 digits per request, below max_batch_size (64)
        blobs = as_bytes_tensor([png(d) for d in images[start : start + 50]])
        probabilities = triton.infer("mnist_pipeline", {"image_bytes": blobs}).as_numpy("probabilities")
        predictions.append(np.argmax(probabilities, axis=1))
    accuracy = float(np.mean(np.concatenate(predictions) == labels))
    print(f"\nmnist_pipeline accuracy over {triton.protocol} on {len(images)} PNG digits: {accuracy:.4f}")
    assert accuracy >= MIN_PIPELINE_ACCURACY


@pytest.mark.parametrize("model", ["mnist", "mnist_pipeline"])
def test_classification_extension_returns_labels(triton, validation_digits, model):
    digits = validation_digits[0][:4]
    if model == "mnist":
        result = triton.infer(model, {"image": mnist.to_tensor(digits)}, class_count=3)
        plain = triton.infer(model, {"image": mnist.to_tensor(digits)}).as_numpy("probabilities")
    else:
        blobs = as_bytes_tensor([png(d) for d in digits])
        result = triton.infer(model, {"image_bytes": blobs}, class_count=3)
        plain = triton.infer(model, {"image_bytes": blobs}).as_numpy("probabilities")
    classes = result.as_numpy("probabilities")
    assert classes.shape == (4, 3)
    for row, entries in enumerate(classes):
        # Each entry is "<score>:<class index>:<label>"; labels.txt names class i as the digit i.
        parsed = [entry.decode().split(":") for entry in entries]
        scores = [float(score) for score, _, _ in parsed]
        assert scores == sorted(scores, reverse=True)
        assert all(label == index for _, index, label in parsed)
        assert int(parsed[0][1]) == int(np.argmax(plain[row]))
        assert scores[0] == pytest.approx(float(plain[row].max()), abs=1e-5)


# ------------------------------------------------------------------------------------- metrics


def read_metric(metrics_url: str, name: str, model: str) -> float:
    """Sum of a Prometheus counter over every series of `model` (e.g. all failure reasons)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    pattern = re.compile(rf'^{name}\{{[^}}]*model="{model}"[^}}]*\}} (\S+)$', re.MULTILINE)
    return sum(float(value) for value in pattern.findall(text))


def metric_increase(metrics_url: str, name: str, model: str, before: float, expected: float) -> float:
    """The counter's increase once it reached `expected` (statistics land just after the response), or
    what it is after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        increase = read_metric(metrics_url, name, model) - before
        if increase >= expected or time.monotonic() > deadline:
            return increase
        time.sleep(0.1)


def test_prometheus_metrics_count_the_requests(triton, triton_server):
    url = triton_server.metrics_url
    counters = [
        ("nv_inference_request_success", "l2norm"),
        ("nv_inference_count", "l2norm"),
        ("nv_inference_request_success", "mnist_pipeline"),
        ("nv_inference_request_failure", "mnist_pipeline"),
    ]
    before = {counter: read_metric(url, *counter) for counter in counters}
    for _ in range(5):
        triton.infer("l2norm", {"vector": np.ones((2, 16), dtype=np.float32)})  # 5 requests, 10 inferences
    digit = as_bytes_tensor([_digit_png()])
    for _ in range(3):
        triton.infer("mnist_pipeline", {"image_bytes": digit})
    with pytest.raises(InferenceServerException):
        triton.infer("mnist_pipeline", {"image_bytes": as_bytes_tensor([b"not an image"])})

    def increase(counter, expected):
        return metric_increase(url, *counter, before=before[counter], expected=expected)

    assert increase(counters[0], 5) == 5
    assert increase(counters[1], 10) == 10
    assert increase(counters[2], 3) == 3
    # The ensemble records the failed request (Triton 2.51 counts it under more than one reason series).
    assert increase(counters[3], 1) >= 1


# ------------------------------------------------------------------------------------- hardening


def test_administrative_apis_are_closed_without_the_admin_key(triton, triton_server):
    with pytest.raises(InferenceServerException, match="restricted"):
        triton.client.get_model_repository_index()
    with pytest.raises(InferenceServerException, match="restricted"):
        triton.client.unload_model("mnist")
    # The key opens the API, but model control mode `none` still refuses to change what is loaded.
    key = {ADMIN_HEADER if triton.protocol == "http" else GRPC_ADMIN_HEADER: triton_server.admin_key}
    index = triton.client.get_model_repository_index(headers=key)
    names = [m["name"] for m in index] if triton.protocol == "http" else [m.name for m in index.models]
    assert set(MODEL_NAMES) <= set(names)  # and the models a user added (new-plugin):
    assert sorted(names) == repository_models(triton_server.model_repository)
    with pytest.raises(InferenceServerException, match="not allowed"):
        triton.client.unload_model("mnist", headers=key)
    assert triton.client.is_model_ready("mnist")


# ------------------------------------------------------------------------------------- bad input


def png_header_claiming(width: int, height: int) -> bytes:
    """A small, valid PNG whose header claims width x height pixels (the decompression-bomb shape)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    pixels = zlib.compress(b"\x00" * (width + 1) * 4)  # a few rows; the decoder never gets that far
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _digit_png() -> bytes:
    return png(mnist.load_split().validation_images[0])


# name -> (model, tensors, datatypes, expected message fragment). Built lazily: some need the data set.
BAD_INPUTS: dict[str, Callable[[], tuple[str, dict, dict, str]]] = {
    "wrong shape": lambda: ("mnist", {"image": np.zeros((1, 28, 28), np.float32)}, {}, "shape"),
    "wrong dtype": lambda: (
        "mnist",
        {"image": np.zeros((1, 1, 28, 28), np.float64)},
        {"image": "FP64"},
        "FP64",
    ),
    "missing input": lambda: ("mnist", {}, {}, "input"),
    "unknown input name": lambda: ("l2norm", {"vectr": np.ones((1, 4), np.float32)}, {}, "vectr"),
    "unknown model": lambda: (
        "no_such_model",
        {"image": np.zeros((1, 1, 28, 28), np.float32)},
        {},
        "unknown",
    ),
    "batch above max_batch_size": lambda: (
        "mnist",
        {"image": np.zeros((65, 1, 28, 28), np.float32)},
        {},
        "batch",
    ),
    "corrupt PNG": lambda: (
        "mnist_pipeline",
        {"image_bytes": as_bytes_tensor([_digit_png()[:60]])},
        {},
        "corrupt",
    ),
    "not an image": lambda: (
        "mnist_pipeline",
        {"image_bytes": as_bytes_tensor([b"hello, triton"])},
        {},
        "PNG or JPEG",
    ),
    "empty bytes": lambda: ("mnist_pipeline", {"image_bytes": as_bytes_tensor([b""])}, {}, "empty"),
    "20 MB payload": lambda: (
        "mnist_pipeline",
        {"image_bytes": as_bytes_tensor([b"\x89PNG\r\n\x1a\n" + bytes(20 * 1024 * 1024)])},
        {},
        "limit is 8388608 bytes",
    ),
    "huge-pixel PNG": lambda: (
        "mnist_pipeline",
        {"image_bytes": as_bytes_tensor([png_header_claiming(30_000, 30_000)])},
        {},
        "pixels",
    ),
    "blank image": lambda: (
        "mnist_pipeline",
        {"image_bytes": as_bytes_tensor([png(np.full((40, 40), 255, np.uint8))])},
        {},
        "no digit",
    ),
    "blank 28x28 image": lambda: (  # was classified "1" at p=0.9996 (issue 18 item 7)
        "mnist_pipeline",
        {"image_bytes": as_bytes_tensor([png(np.zeros((28, 28), np.uint8))])},
        {},
        "no digit",
    ),
    "NaN image": lambda: (  # answered NaN probabilities before (issue 18 item 8)
        "mnist",
        {"image": np.full((1, 1, 28, 28), np.nan, np.float32)},
        {},
        "NaN or Inf in batch row(s) [0]",
    ),
    "Inf pixel in row 2": lambda: (
        "mnist",
        {
            "image": np.where(np.arange(3 * 784).reshape(3, 1, 28, 28) == 2 * 784 + 5, np.inf, 0.5).astype(
                np.float32
            )
        },
        {},
        "NaN or Inf in batch row(s) [2]",
    ),
    "NaN vector": lambda: ("l2norm", {"vector": np.array([[1.0, np.nan, 2.0]], np.float32)}, {}, "NaN"),
    "Inf vector": lambda: ("l2norm", {"vector": np.array([[np.inf, 1.0]], np.float32)}, {}, "Inf"),
    "empty vector": lambda: ("l2norm", {"vector": np.zeros((1, 0), np.float32)}, {}, "empty"),
    "vector too long": lambda: ("l2norm", {"vector": np.ones((1, 4097), np.float32)}, {}, "at most 4096"),
}


def assert_still_serving(triton) -> None:
    vectors = np.array([[3.0, 4.0]], dtype=np.float32)
    np.testing.assert_allclose(
        triton.infer("l2norm", {"vector": vectors}).as_numpy("normalized"), [[0.6, 0.8]]
    )
    digit = as_bytes_tensor([_digit_png()])
    assert triton.infer("mnist_pipeline", {"image_bytes": digit}).as_numpy("probabilities").shape == (1, 10)


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_gets_a_clear_error_and_the_server_keeps_serving(triton, case):
    model, tensors, datatypes, fragment = BAD_INPUTS[case]()
    with pytest.raises(InferenceServerException) as caught:
        triton.infer(model, tensors, datatypes)
    message = str(caught.value)
    assert fragment.lower() in message.lower(), f"{case}: unhelpful error {message!r}"
    assert_still_serving(triton)


def test_zero_vector_normalizes_to_zeros(triton):
    """Not an error: eps in max(sum(x^2), eps) keeps 0/0 away, as in TensorFlow's l2_normalize."""
    vectors = np.zeros((2, 32), dtype=np.float32)
    vectors[1, 0] = 2.0
    normalized = triton.infer("l2norm", {"vector": vectors}).as_numpy("normalized")
    assert np.all(np.isfinite(normalized))
    np.testing.assert_array_equal(normalized[0], 0.0)
    np.testing.assert_allclose(normalized[1], l2_normalize(vectors[1]))


def test_one_bad_image_fails_alone_while_its_batch_neighbours_succeed(triton_server, validation_digits):
    """Requests sent at once land in the same dynamic batch of mnist_preprocess; each gets its own answer."""
    good = [png(d) for d in validation_digits[0][:7]]
    blobs = good[:3] + [b"definitely not a png"] + good[3:]
    client = httpclient.InferenceServerClient(url=triton_server.http_url, concurrency=len(blobs))
    try:
        pending = []
        for blob in blobs:
            tensor = httpclient.InferInput("image_bytes", [1, 1], "BYTES")
            tensor.set_data_from_numpy(as_bytes_tensor([blob]))
            pending.append(client.async_infer("mnist_pipeline", [tensor]))
        outcomes = []
        for request in pending:
            try:
                outcomes.append(int(np.argmax(request.get_result().as_numpy("probabilities"))))
            except InferenceServerException as error:
                outcomes.append(str(error))
    finally:
        client.close()
    assert isinstance(outcomes[3], str) and "PNG or JPEG" in outcomes[3]
    assert all(isinstance(outcome, int) for outcome in outcomes[:3] + outcomes[4:]), outcomes
