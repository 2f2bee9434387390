"""`python -m clients eval` on the user's own labelled data, against the real tritonserver (the
`triton_server` fixture): an IDX pair under the standard MNIST names (uncompressed) through --images/--labels
and through --mnist-dir, and a folder of PNGs with one sub-folder per label. The accuracy must be exactly the
one the same ONNX model gives locally, and the split line must not claim a training split for data that has
none.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image

from clients.errors import EXIT_USAGE
from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.models import mnist
from trt_plugin_kit.serving import preprocess as serving_preprocess

NATIVE_ONNX = REPO_ROOT / "models" / "onnx" / "mnist_native.onnx"
OWN_DIGITS = 200  # the first dev digits: 175 of them trained the model (i % 8 != 7), 25 were held out
FOLDER_DIGITS = 20  # held-out (validation) dev digits, as PNG files in label folders


def eval_cli(server, protocol: str, *args: str) -> subprocess.CompletedProcess:
    url = server.grpc_url if protocol == "grpc" else server.http_url
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "clients",
            "eval",
            "--protocol",
            protocol,
            "--url",
            url,
            "--no-progress",
            *args,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("TRITON_") and k != "MNIST_DIR"},
    )


def write_idx(path: Path, array: np.ndarray) -> None:
    """Uncompressed IDX (uint8), as some MNIST copies come."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


@pytest.fixture(scope="module")
def session():
    return ort.InferenceSession(str(NATIVE_ONNX), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def standard_files(tmp_path_factory):
    """The first OWN_DIGITS dev digits as uncompressed IDX files under the standard MNIST test-set names."""
    folder = tmp_path_factory.mktemp("mnist-standard")
    images, labels = mnist.load_dev_set()
    write_idx(folder / "t10k-images-idx3-ubyte", images[:OWN_DIGITS])
    write_idx(folder / "t10k-labels-idx1-ubyte", labels[:OWN_DIGITS])
    return folder, images[:OWN_DIGITS], labels[:OWN_DIGITS]


@pytest.fixture(scope="module")
def png_folder(tmp_path_factory):
    """FOLDER_DIGITS held-out dev digits as PNGs in my_digits/<label>/."""
    root = tmp_path_factory.mktemp("own") / "my_digits"
    split = mnist.load_split()
    files, labels = [], []
    for i in range(FOLDER_DIGITS):
        label = int(split.validation_labels[i])
        path = root / str(label) / f"digit_{i:02d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(split.validation_images[i]).save(path)
        files.append(path)
        labels.append(label)
    return root, files, np.array(labels)


def expected_accuracy(session, tensors: np.ndarray, labels: np.ndarray) -> str:
    predicted = session.run(None, {"image": tensors})[0].argmax(axis=1)
    return f"accuracy: {np.mean(predicted == labels):.4f}"


@pytest.mark.parametrize("source", ["images-labels", "mnist-dir"])
def test_eval_on_standard_idx_files(triton_server, session, standard_files, source):
    folder, images, labels = standard_files
    if source == "images-labels":
        where = [
            "--images",
            str(folder / "t10k-images-idx3-ubyte"),
            "--labels",
            str(folder / "t10k-labels-idx1-ubyte"),
        ]
        protocol, raw = "grpc", []
    else:
        where, protocol, raw = ["--mnist-dir", str(folder)], "http", ["--raw"]
    result = eval_cli(triton_server, protocol, *where, *raw, "--batch-size", "50")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    how = "preprocessed on the client" if raw else "PNG-encoded"
    assert lines[0].startswith(
        f"eval: 200 digits (your data) of {folder / 't10k-images-idx3-ubyte'}, {how}, "
    )
    # Exact: no dev digit is near a tie (tests/unit/test_models.py), so the server predicts what ONNX does.
    assert lines[-2:] == [
        "split: all 200 digits of t10k-images-idx3-ubyte (your data; 175 of them are dev digits the model "
        "was trained on: expect a higher figure than on new digits)",
        expected_accuracy(session, mnist.to_tensor(images), labels),
    ]
    assert "held out" not in result.stdout


@pytest.mark.parametrize("raw", [False, True], ids=["pipeline", "raw"])
def test_eval_on_a_folder_of_labelled_pngs(triton_server, session, png_folder, raw):
    root, files, labels = png_folder
    result = eval_cli(triton_server, "grpc", "--image-folder", str(root), *(["--raw"] if raw else []))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    how = "preprocessed on the client" if raw else "image files as they are"
    assert lines[0].startswith(f"eval: 20 images (your data) of {root}, {how}, through model ")
    tensors = np.stack([serving_preprocess.decode_digit(path.read_bytes()) for path in files])
    assert lines[-2:] == [
        "split: all 20 images of my_digits (your data)",
        expected_accuracy(session, tensors, labels),
    ]
    refused = eval_cli(triton_server, "grpc", "--image-folder", str(root), "--split", "validation")
    assert refused.returncode == EXIT_USAGE
    assert "--split validation applies only to the MNIST dev digits" in refused.stderr
