"""What the load test sends: payload pools and one task class per request kind.

Nothing here knows about Locust or a protocol. A task instance is a Locust task (Locust calls it with
the user); it builds the input arrays for one request, asks the user to run the inference
(`user.infer(task, inputs)`, which times it and reports it), and checks the outputs that came back so
that a server answering garbage counts as a failure, not as a fast success.
"""

from __future__ import annotations

import io
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from geventhttpclient.response import HTTPConnectionClosed
from PIL import Image
from tritonclient.utils import InferenceServerException

from loadtests import any_model
from loadtests.outcomes import ResponseCheckError, request_name
from trt_plugin_kit.interface import (
    L2NORM,
    L2NORM_INPUT,
    L2NORM_OUTPUT,
    MNIST,
    MNIST_INPUT,
    MNIST_OUTPUT,
    MNIST_PIPELINE,
    PIPELINE_INPUT,
    SAMPLES_DIR,
)
from trt_plugin_kit.models import mnist as mnist_data
from trt_plugin_kit.specs.reference import l2_normalize

PROTOCOLS = ("http", "grpc")
# Request kinds, named after the model each one calls (the names of the serving interface).
REQUEST_KINDS = (MNIST_PIPELINE, MNIST, L2NORM)

# How many real digits the pools hold: enough that requests differ, small enough to build in a second.
DIGIT_POOL_SIZE = 1024
VECTOR_POOL_ROWS = 512


# Errors of the path to a server, not of the request: the server may never have run it. HAProxy answers 502
# when a server dies during a request, 503 when none is up; gRPC reports both as UNAVAILABLE.
RETRYABLE_HTTP_STATUS = ("502", "503", "504")


def is_retryable(error: Exception) -> bool:
    """Whether sending an inference request again may succeed (inference is idempotent): a connection
    refused, reset or closed before the answer, a balancer's 502/503/504, gRPC UNAVAILABLE. A wrong
    answer or a model's own error (400, INVALID_ARGUMENT, INTERNAL) is never retried."""
    # ConnectionRefusedError, ConnectionResetError, BrokenPipeError, ...; a connection closed mid-answer.
    if isinstance(error, (OSError, HTTPConnectionClosed)):
        return True
    if isinstance(error, InferenceServerException):
        status = str(error.status() or "")
        # Triton refuses a restricted API with gRPC UNAVAILABLE too (clients/tritonserver.py): not the path's
        # fault.
        if "restricted" in str(error.message() or "").lower():
            return False
        return status in RETRYABLE_HTTP_STATUS or status == "StatusCode.UNAVAILABLE"
    return False


@dataclass(frozen=True)
class RequestName:
    protocol: str
    model: str
    batch: int


def parse_request_name(name: str) -> RequestName | None:
    """Inverse of request_name(); None for names that are not ours (e.g. Locust's "Aggregated")."""
    parts = name.split(" ")
    if len(parts) != 3 or parts[0] not in PROTOCOLS or not parts[2].startswith("b"):
        return None
    try:
        return RequestName(parts[0], parts[1], int(parts[2][1:]))
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------------
# Payload pools, built once per process and shared by every simulated user.


@dataclass(frozen=True)
class DigitSource:
    """Where the digits come from: the MNIST dev set, or (no data set given and none in the default folder)
    the sample digits of the repository."""

    images: np.ndarray  # uint8 [N, 28, 28]
    description: str
    note: str = ""  # said to the user when the sample digits stand in for the data set


def png_digits(folder: Path) -> np.ndarray:
    """The *.png files of `folder` (not its subfolders), 28x28 MNIST-style digits, as uint8 [N, 28, 28]."""
    files = sorted(folder.glob("*.png"))
    if not files:
        raise FileNotFoundError(f"no *.png digits in {folder}")
    digits = []
    for file in files:
        with Image.open(file) as image:
            digit = np.asarray(image.convert("L"))
        if digit.shape != (mnist_data.IMAGE_SIZE, mnist_data.IMAGE_SIZE):
            raise ValueError(f"{file} is {digit.shape[1]}x{digit.shape[0]}; digits must be 28x28 like MNIST")
        digits.append(digit)
    return np.stack(digits)


@lru_cache(maxsize=4)
def digit_source(mnist_dir: str | None = None) -> DigitSource:
    """The first DIGIT_POOL_SIZE MNIST dev digits from --mnist-dir / $MNIST_DIR / the default folder; a
    folder named by flag or variable may instead hold 28x28 PNG digits (e.g. samples/digits).

    Without a data set named by flag or variable and none in the default folder (a clone without ../shared),
    the 10 sample digits of samples/digits/ stand in. A folder that is named but holds neither is an error
    (mnist.MnistDataMissing, a FileNotFoundError whose message says how to fix it)."""
    folder = mnist_data.data_dir(mnist_dir)
    named = bool(mnist_dir) or folder != mnist_data.DEFAULT_DATA_DIR
    if not mnist_data.has_dev_set(folder) and named and any(folder.glob("*.png")):
        images = png_digits(folder)[:DIGIT_POOL_SIZE]
        return DigitSource(images, f"{len(images)} PNG digits from {folder}")
    if mnist_data.has_dev_set(folder) or named:
        images = mnist_data.load_dev_set(mnist_dir)[0][:DIGIT_POOL_SIZE]
        return DigitSource(images, f"{len(images)} MNIST dev digits from {folder}")
    images = png_digits(SAMPLES_DIR)
    note = (
        f"no MNIST data set: {mnist_data.missing_data_message()} Sending the {len(images)} sample digits of "
        f"{SAMPLES_DIR} instead."
    )
    return DigitSource(images, f"{len(images)} sample digits from {SAMPLES_DIR}", note)


def digit_images(mnist_dir: str | None = None) -> np.ndarray:
    """The digit pool as uint8 [N, 28, 28] (see digit_source)."""
    return digit_source(mnist_dir).images


@lru_cache(maxsize=4)
def png_pool(mnist_dir: str | None = None) -> tuple[bytes, ...]:
    """The digit pool encoded as grayscale PNG files, what a real client of mnist_pipeline uploads."""
    encoded = []
    for image in digit_images(mnist_dir):
        buffer = io.BytesIO()
        Image.fromarray(image, mode="L").save(buffer, format="PNG")
        encoded.append(buffer.getvalue())
    return tuple(encoded)


@lru_cache(maxsize=4)
def preprocessed_pool(mnist_dir: str | None = None) -> np.ndarray:
    """The digit pool preprocessed exactly as the `mnist` model expects: FP32 [N, 1, 28, 28]."""
    return mnist_data.to_tensor(digit_images(mnist_dir))


@lru_cache(maxsize=8)
def vector_pool(dim: int) -> np.ndarray:
    """Random FP32 vectors [VECTOR_POOL_ROWS, dim] (fixed seed: runs send the same data)."""
    return np.random.default_rng(0).standard_normal((VECTOR_POOL_ROWS, dim)).astype(np.float32)


def _batch_rows(pool: np.ndarray | tuple, batch: int) -> np.ndarray | tuple:
    """`batch` consecutive rows at a random start: a view, no copy, so the load generator spends its CPU on
    requests; a pool smaller than the batch (the 10 sample digits) is repeated."""
    if len(pool) < batch:
        pool = (
            np.concatenate([pool] * -(-batch // len(pool))) if isinstance(pool, np.ndarray) else pool * batch
        )
    start = random.randrange(len(pool) - batch + 1)
    return pool[start : start + batch]


# ---------------------------------------------------------------------------------------------------
# Task classes: one per request kind. Instances are Locust tasks; the user runs and reports the call.


class TritonTask(ABC):
    """One kind of inference request against one model."""

    model: str
    output_names: tuple[str, ...]

    def __init__(self, batch: int) -> None:
        if batch < 1:
            raise ValueError(f"{self.model}: batch size must be >= 1, got {batch}")
        self.batch = batch
        # Locust names tasks by __name__ in its reports (task ratios); functions have one, instances not.
        self.__name__ = f"{type(self).__name__} b{batch}"

    def __call__(self, user) -> None:
        user.infer(self, self.make_inputs())

    @abstractmethod
    def make_inputs(self) -> dict[str, np.ndarray]:
        """Input tensors by name, batch dimension first."""

    @abstractmethod
    def check(self, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> None:
        """Raises ResponseCheckError when the outputs are not what the model must return."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, batch={self.batch})"


def _check_probabilities(outputs: dict[str, np.ndarray], batch: int) -> None:
    probabilities = outputs.get(MNIST_OUTPUT)
    if probabilities is None:
        raise ResponseCheckError("response has no 'probabilities' output")
    if probabilities.shape != (batch, 10):
        raise ResponseCheckError(f"probabilities shape {probabilities.shape}, expected {(batch, 10)}")
    if not np.all(np.isfinite(probabilities)):
        raise ResponseCheckError("probabilities contain NaN or Inf")
    sums = probabilities.sum(axis=1)
    if np.any(probabilities < 0) or not np.allclose(sums, 1.0, atol=1e-3):
        raise ResponseCheckError(f"probabilities are not a distribution (row sums {sums.tolist()})")


class MnistPipelineTask(TritonTask):
    """One real PNG digit through the `mnist_pipeline` ensemble (decode + preprocess + classify)."""

    model = MNIST_PIPELINE
    output_names = (MNIST_OUTPUT,)

    def __init__(self, mnist_dir: str | None = None, batch: int = 1) -> None:
        super().__init__(batch)
        self.pngs = png_pool(mnist_dir)

    def make_inputs(self) -> dict[str, np.ndarray]:
        chosen = _batch_rows(self.pngs, self.batch)
        # BYTES input `image_bytes` has shape [1] per request item, hence [batch, 1].
        return {PIPELINE_INPUT: np.array(chosen, dtype=np.object_).reshape(self.batch, 1)}

    def check(self, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> None:
        _check_probabilities(outputs, self.batch)


class MnistBatchTask(TritonTask):
    """A batch of preprocessed digits (FP32 [batch, 1, 28, 28]) to the `mnist` model."""

    model = MNIST
    output_names = (MNIST_OUTPUT,)

    def __init__(self, mnist_dir: str | None = None, batch: int = 8) -> None:
        super().__init__(batch)
        self.images = preprocessed_pool(mnist_dir)

    def make_inputs(self) -> dict[str, np.ndarray]:
        return {MNIST_INPUT: _batch_rows(self.images, self.batch)}

    def check(self, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> None:
        _check_probabilities(outputs, self.batch)


class L2NormTask(TritonTask):
    """A batch of random vectors (FP32 [batch, dim]) to `l2norm`; checks the rows come back unit-length."""

    model = L2NORM
    output_names = (L2NORM_OUTPUT,)

    def __init__(self, dim: int = 128, batch: int = 4) -> None:
        super().__init__(batch)
        if dim < 1:
            raise ValueError(f"l2norm: vector length must be >= 1, got {dim}")
        self.vectors = vector_pool(dim)

    def make_inputs(self) -> dict[str, np.ndarray]:
        return {L2NORM_INPUT: _batch_rows(self.vectors, self.batch)}

    def check(self, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> None:
        vectors = inputs[L2NORM_INPUT]
        normalized = outputs.get(L2NORM_OUTPUT)
        if normalized is None:
            raise ResponseCheckError("response has no 'normalized' output")
        if normalized.shape != vectors.shape:
            raise ResponseCheckError(f"normalized shape {normalized.shape}, expected {vectors.shape}")
        expected = l2_normalize(vectors, axis=-1)
        if not np.allclose(normalized, expected, rtol=1e-4, atol=1e-5):
            worst = float(np.max(np.abs(normalized - expected)))
            raise ResponseCheckError(f"normalized vectors differ from the reference by up to {worst:.3g}")


@dataclass(frozen=True)
class WorkloadConfig:
    """Everything that decides what the simulated users send."""

    protocols: dict[str, int]
    mix: dict[str, int]
    mnist_batch: int = 8
    l2norm_batch: int = 4
    l2norm_dim: int = 128
    mnist_dir: str | None = None
    retries: int = 0  # client retries after an error of the path to a server (is_retryable)
    user_rate: float | None = None  # requests per second per user; None: the next as soon as one returns
    # Any other model named in the mix (loadtests/any_model.py): what its requests hold.
    model_data: any_model.ModelDataOptions = field(default_factory=any_model.ModelDataOptions)

    def build_tasks(self) -> list[TritonTask]:
        """Locust's task list: each task instance repeated by its weight (how Locust weights tasks)."""
        factories = {
            MNIST_PIPELINE: lambda: MnistPipelineTask(self.mnist_dir),
            MNIST: lambda: MnistBatchTask(self.mnist_dir, self.mnist_batch),
            L2NORM: lambda: L2NormTask(self.l2norm_dim, self.l2norm_batch),
        }
        tasks: list[TritonTask] = []
        for kind, weight in self.mix.items():
            if weight > 0:
                model_task = lambda kind=kind: any_model.ModelTask(kind, self.model_data)  # noqa: E731
                tasks.extend([factories.get(kind, model_task)()] * weight)
        return tasks

    def request_names(self) -> list[str]:
        """The request names a run with this config must produce."""
        batches = {MNIST_PIPELINE: 1, MNIST: self.mnist_batch, L2NORM: self.l2norm_batch}
        return [
            request_name(protocol, kind, batches.get(kind, self.model_data.batch))
            for protocol, p_weight in self.protocols.items()
            if p_weight > 0
            for kind, k_weight in self.mix.items()
            if k_weight > 0
        ]
