"""perf_analyzer's input data (`--input-data FILE.json`) for every model, generated from the repository.

    python -m loadtests.perf.data OUT_DIR        # writes OUT_DIR/{mnist,mnist_pipeline,l2norm}.json

perf_analyzer's default random data is refused by our server (`mnist` refuses NaN/Inf, which random bytes
hold; `mnist_pipeline` random strings are no images), so every model gets real data:

  mnist           the PNG digits of samples/digits/ through the server's own preprocessing (decode_digit:
                  what mnist_preprocess hands to mnist inside mnist_pipeline), FP32 [1, 28, 28] each
  mnist_pipeline  the same PNG files as BYTES elements: base64 of the 4-byte little-endian length followed by
                  the bytes (Triton's serialization of one BYTES element; base64 of the bare PNG would be read
                  as a length of about 1.2 billion)
  l2norm          FP32 vectors of a fixed seed, with their shape given (the input's dimension is -1)

Any other model the server serves (a model of yours) gets its data from what the server reports about it
(names, datatypes, per-item shapes: trt_plugin_kit/tritonserver/model_io.py), generated in --model-range, or
from your file (--model-data NAME=FILE: .npy for one input, .npz with an array per input name), as the load
test's `--mix NAME=1` sends it (loadtests/any_model.py): any_model_data.

Each "data" entry is one batch-1 sample; perf_analyzer sends them round-robin and fills a batch of -b N from
consecutive entries. The files are made at run time (a second each), never committed.
"""

from __future__ import annotations

import argparse
import base64
import json
import struct
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from trt_plugin_kit.interface import (
    L2NORM,
    L2NORM_INPUT,
    MNIST,
    MNIST_INPUT,
    MNIST_PIPELINE,
    MNIST_VIT,
    PIPELINE_INPUT,
    SAMPLES_DIR,
)
from trt_plugin_kit.serving.preprocess import decode_digit

if TYPE_CHECKING:  # model_io needs tritonclient, which the compose perf image lacks (the kit's models only)
    from trt_plugin_kit.tritonserver.model_io import ModelIO

PERF_MODELS = (MNIST, MNIST_PIPELINE, L2NORM, MNIST_VIT)  # mnist_vit: mnist's input, the same digits
DEFAULT_L2NORM_DIM = 128  # the load test's default --l2norm-dim: both tools send the same requests
L2NORM_VECTORS = 64
SEED = 0


def sample_pngs(folder: Path = SAMPLES_DIR) -> list[bytes]:
    """The PNG files of `folder` (not its subfolders), in name order."""
    files = sorted(folder.glob("*.png"))
    if not files:
        raise FileNotFoundError(f"no *.png digits in {folder}")
    return [file.read_bytes() for file in files]


def _b64(data: bytes) -> dict[str, str]:
    return {"b64": base64.b64encode(data).decode("ascii")}


def bytes_element(data: bytes) -> bytes:
    """One BYTES tensor element as Triton serializes it: uint32 little-endian length, then the bytes."""
    return struct.pack("<I", len(data)) + data


def mnist_data(pngs: list[bytes]) -> dict:
    entries = []
    for png in pngs:
        tensor = np.ascontiguousarray(decode_digit(png), dtype="<f4")
        if not np.isfinite(tensor).all():
            raise ValueError("preprocessing produced a non-finite value")
        entries.append({MNIST_INPUT: _b64(tensor.tobytes())})
    return {"data": entries}


def pipeline_data(pngs: list[bytes]) -> dict:
    return {"data": [{PIPELINE_INPUT: _b64(bytes_element(png))} for png in pngs]}


def l2norm_data(dim: int = DEFAULT_L2NORM_DIM, count: int = L2NORM_VECTORS) -> dict:
    vectors = np.random.default_rng(SEED).standard_normal((count, dim)).astype("<f4")
    return {
        "data": [{L2NORM_INPUT: {"content": _b64(vector.tobytes()), "shape": [dim]}} for vector in vectors]
    }


def any_model_data(io: ModelIO, arrays: dict[str, np.ndarray]) -> dict:
    """perf_analyzer's input data for any model: one entry per item (its shape given, so that dynamic dims
    are filled), or the one sample of a model without a batch dimension."""
    from trt_plugin_kit.tritonserver.model_io import ModelDataError  # noqa: PLC0415 - see TYPE_CHECKING above

    if any(tensor.datatype == "BYTES" for tensor in io.inputs):
        raise ModelDataError(f"{io.name} has BYTES inputs: make perf generates numeric inputs only")

    def tensor(array: np.ndarray) -> dict:
        little_endian = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
        return {"content": _b64(little_endian.tobytes()), "shape": list(array.shape)}

    if not io.batching:
        return {"data": [{name: tensor(array) for name, array in arrays.items()}]}
    items = len(next(iter(arrays.values())))
    return {"data": [{name: tensor(array[i]) for name, array in arrays.items()} for i in range(items)]}


def write_input_data(
    out_dir: Path, l2norm_dim: int = DEFAULT_L2NORM_DIM, others: dict[str, dict] | None = None
) -> dict[str, Path]:
    """{model: path of its input-data JSON} for every model of PERF_MODELS and the `others` (model ->
    any_model_data document), written into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pngs = sample_pngs()
    documents = {
        MNIST: mnist_data(pngs),
        MNIST_PIPELINE: pipeline_data(pngs),
        L2NORM: l2norm_data(l2norm_dim),
        MNIST_VIT: mnist_data(pngs),
        **(others or {}),
    }
    paths = {}
    for model, document in documents.items():
        paths[model] = out_dir / f"{model}.json"
        paths[model].write_text(json.dumps(document))
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--l2norm-dim", type=int, default=DEFAULT_L2NORM_DIM)
    args = parser.parse_args(argv)
    for model, path in write_input_data(args.out_dir, args.l2norm_dim).items():
        print(f"{model}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
