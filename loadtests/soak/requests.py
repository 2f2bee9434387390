"""What the soak sends: good requests over the three served models (a spread of batch sizes and vector
lengths, each answer checked by its task), and bad requests, each of which must be refused with an error that
names the problem."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loadtests.workloads import L2NormTask, MnistBatchTask, MnistPipelineTask, TritonTask, png_pool
from trt_plugin_kit.interface import L2NORM, MNIST, MNIST_PIPELINE

MODELS = (MNIST, MNIST_PIPELINE, L2NORM)


@dataclass(frozen=True)
class BadRequest:
    """A request that must be refused with an error mentioning `fragment`."""

    label: str
    model: str
    inputs: dict[str, np.ndarray]
    fragment: str

    def describe(self) -> str:
        return f"{self.label} -> {self.model} (error must mention {self.fragment!r})"


def bad_requests(mnist_dir: str | None) -> list[BadRequest]:
    digit_png = png_pool(mnist_dir)[0]

    def image_bytes(blob: bytes) -> dict[str, np.ndarray]:
        return {"image_bytes": np.array([blob], dtype=np.object_).reshape(1, 1)}

    return [
        BadRequest("corrupt PNG", MNIST_PIPELINE, image_bytes(digit_png[:60]), "corrupt"),
        BadRequest("not an image", MNIST_PIPELINE, image_bytes(b"hello, triton"), "PNG or JPEG"),
        BadRequest("wrong shape", MNIST, {"image": np.zeros((1, 28, 28), np.float32)}, "shape"),
        BadRequest("NaN vector", L2NORM, {"vector": np.array([[1.0, np.nan, 2.0]], np.float32)}, "NaN"),
        BadRequest(
            "batch above max_batch_size", MNIST, {"image": np.zeros((65, 1, 28, 28), np.float32)}, "batch"
        ),
        BadRequest(
            "unknown model", "no_such_model", {"image": np.zeros((1, 1, 28, 28), np.float32)}, "unknown"
        ),
    ]


def good_tasks(mnist_dir: str | None) -> list[TritonTask]:
    """A spread of batch sizes and vector lengths over the three served models."""
    return [
        MnistBatchTask(mnist_dir, batch=1),
        MnistBatchTask(mnist_dir, batch=8),
        MnistBatchTask(mnist_dir, batch=32),
        MnistPipelineTask(mnist_dir, batch=1),
        MnistPipelineTask(mnist_dir, batch=4),
        L2NormTask(dim=16, batch=1),
        L2NormTask(dim=128, batch=8),
        L2NormTask(dim=1000, batch=4),
    ]
