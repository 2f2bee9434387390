"""perf_analyzer's input data (loadtests/perf/data.py): what each entry decodes to is what the model takes."""

from __future__ import annotations

import base64
import json
import struct

import numpy as np

from loadtests.perf.data import PERF_MODELS, write_input_data
from trt_plugin_kit.interface import SAMPLES_DIR
from trt_plugin_kit.serving.preprocess import decode_digit


def test_every_model_gets_data_made_from_the_repository(tmp_path):
    paths = write_input_data(tmp_path, l2norm_dim=16)
    assert set(paths) == set(PERF_MODELS)
    documents = {model: json.loads(path.read_text())["data"] for model, path in paths.items()}
    pngs = [file.read_bytes() for file in sorted(SAMPLES_DIR.glob("*.png"))]
    assert len(documents["mnist"]) == len(documents["mnist_pipeline"]) == len(pngs) == 10

    for entry, png in zip(documents["mnist"], pngs, strict=True):
        tensor = np.frombuffer(base64.b64decode(entry["image"]["b64"]), "<f4").reshape(1, 28, 28)
        np.testing.assert_array_equal(tensor, decode_digit(png))  # the server's own preprocessing
    for entry, png in zip(documents["mnist_pipeline"], pngs, strict=True):
        element = base64.b64decode(entry["image_bytes"]["b64"])
        # One BYTES element as Triton reads it: uint32 little-endian length, then the PNG itself.
        assert struct.unpack("<I", element[:4])[0] == len(png) and element[4:] == png

    vectors = documents["l2norm"]
    assert len(vectors) == 64 and all(entry["vector"]["shape"] == [16] for entry in vectors)
    first = np.frombuffer(base64.b64decode(vectors[0]["vector"]["content"]["b64"]), "<f4")
    assert first.shape == (16,) and np.isfinite(first).all() and np.linalg.norm(first) > 0
    assert (
        write_input_data(tmp_path / "again", l2norm_dim=16)["l2norm"].read_text()
        == paths["l2norm"].read_text()
    )
