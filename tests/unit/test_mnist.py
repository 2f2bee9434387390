"""MNIST data handling: IDX parsing and its errors, the deterministic split, the preprocessing contract."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest
from PIL import Image

from trt_plugin_kit.models import mnist


def write_idx(path, array: np.ndarray, type_code: int = 0x08, compress: bool = False) -> None:
    header = bytes([0, 0, type_code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    data = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    path.write_bytes(gzip.compress(data) if compress else data)


@pytest.fixture(scope="module")
def dev_set():
    return mnist.load_dev_set()


# ----------------------------------------------------------------------------------------------- IDX


@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_round_trip(tmp_path, compress):
    images = np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28)
    write_idx(tmp_path / "images.idx", images, compress=compress)
    np.testing.assert_array_equal(mnist.load_images(tmp_path / "images.idx"), images)
    values = np.array([[1, -2], [3, 70000]], dtype=np.int32)
    write_idx(tmp_path / "ints.idx", values, type_code=0x0C, compress=compress)
    read = mnist.read_idx(tmp_path / "ints.idx")
    assert read.dtype == np.int32 and read.dtype.isnative
    np.testing.assert_array_equal(read, values)


def test_read_idx_errors(tmp_path):
    path = tmp_path / "bad.idx"
    path.write_bytes(b"\x01\x00\x08\x01\x00\x00\x00\x01\x05")
    with pytest.raises(mnist.IdxFormatError, match="magic"):
        mnist.read_idx(path)
    path.write_bytes(b"\x00\x00\x07\x01\x00\x00\x00\x01\x05")
    with pytest.raises(mnist.IdxFormatError, match="element type"):
        mnist.read_idx(path)
    path.write_bytes(b"\x00\x00\x08\x03\x00\x00\x00\x02")
    with pytest.raises(mnist.IdxFormatError, match="truncated"):
        mnist.read_idx(path)
    write_idx(path, np.zeros((3, 28, 28), np.uint8))
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(mnist.IdxFormatError, match="header says shape"):
        mnist.read_idx(path)
    path.write_bytes(b"\x1f\x8bnot really gzip")
    with pytest.raises(mnist.IdxFormatError, match="gzip"):
        mnist.read_idx(path)
    with pytest.raises(FileNotFoundError):
        mnist.read_idx(tmp_path / "missing.idx")


def test_load_images_and_labels_validate_content(tmp_path):
    write_idx(tmp_path / "small.idx", np.zeros((2, 14, 14), np.uint8))
    with pytest.raises(mnist.IdxFormatError, match=r"\[N, 28, 28\]"):
        mnist.load_images(tmp_path / "small.idx")
    write_idx(tmp_path / "labels.idx", np.array([1, 10], np.uint8))
    with pytest.raises(mnist.IdxFormatError, match="0..9"):
        mnist.load_labels(tmp_path / "labels.idx")
    write_idx(tmp_path / "labels2d.idx", np.zeros((2, 2), np.uint8))
    with pytest.raises(mnist.IdxFormatError, match=r"labels \[N\]"):
        mnist.load_labels(tmp_path / "labels2d.idx")


def test_load_dev_set_mismatch_and_missing(tmp_path):
    write_idx(tmp_path / mnist.DEV_IMAGES_FILE, np.zeros((3, 28, 28), np.uint8), compress=True)
    with pytest.raises(FileNotFoundError, match=mnist.DEV_LABELS_FILE):
        mnist.load_dev_set(tmp_path)
    write_idx(tmp_path / mnist.DEV_LABELS_FILE, np.zeros(2, np.uint8), compress=True)
    with pytest.raises(mnist.IdxFormatError, match="3 images but 2 labels"):
        mnist.load_dev_set(tmp_path)


def test_dev_set_is_the_shared_data(dev_set):
    images, labels = dev_set
    assert images.shape == (8000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (8000,) and set(np.unique(labels)) == set(range(10))
    assert images.max() == 255 and images.min() == 0
    # MNIST digits are white on black: the border is background.
    assert images[:, 0, :].mean() < 1.0


# --------------------------------------------------------------------------------------------- split


def test_split_is_deterministic_disjoint_and_complete():
    train, validation = mnist.split_indices(8000)
    assert len(train) == 7000 and len(validation) == 1000
    assert np.all(validation % 8 == 7)
    assert np.intersect1d(train, validation).size == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([train, validation])), np.arange(8000))
    again_train, again_validation = mnist.split_indices(8000)
    np.testing.assert_array_equal(train, again_train)
    np.testing.assert_array_equal(validation, again_validation)


def test_load_split_matches_indices(dev_set):
    images, labels = dev_set
    split = mnist.load_split()
    np.testing.assert_array_equal(split.validation_images, images[7::8])
    np.testing.assert_array_equal(split.validation_labels, labels[7::8])
    np.testing.assert_array_equal(split.train_images[:7], images[:7])
    # Every digit is well represented in validation (at least 7% each).
    assert np.bincount(split.validation_labels, minlength=10).min() >= 70


# ------------------------------------------------------------------------------------- preprocessing


def test_to_tensor_is_pixel_over_255(dev_set):
    images, _ = dev_set
    tensor = mnist.to_tensor(images[:5])
    assert tensor.shape == (5, 1, 28, 28) and tensor.dtype == np.float32
    np.testing.assert_array_equal(tensor[:, 0], images[:5].astype(np.float32) / np.float32(255.0))
    assert mnist.to_tensor(images[0]).shape == mnist.INPUT_SHAPE
    assert tensor.min() == 0.0 and tensor.max() == 1.0
    assert mnist.to_tensor(np.zeros((0, 28, 28), np.uint8)).shape == (0, 1, 28, 28)


def test_to_tensor_errors():
    with pytest.raises(ValueError, match="uint8"):
        mnist.to_tensor(np.zeros((28, 28), np.float32))
    with pytest.raises(ValueError, match="shape"):
        mnist.to_tensor(np.zeros((32, 32), np.uint8))


def test_preprocess_image_keeps_mnist_digits_exact(dev_set, tmp_path):
    images, _ = dev_set
    digit = images[123]
    np.testing.assert_array_equal(mnist.preprocess_image(digit), mnist.to_tensor(digit))
    Image.fromarray(digit).save(tmp_path / "digit.png")
    np.testing.assert_array_equal(mnist.preprocess_image(tmp_path / "digit.png"), mnist.to_tensor(digit))


@pytest.mark.numeric
def test_preprocess_image_normalizes_real_world_pictures(dev_set):
    """Pillow's float Lanczos resize may round an ulp otherwise on another CPU, one pixel level at most: the
    bounds are far from that (correlation 0.83 here; the bar comes out as pure 0 and 1 pixels)."""
    images, _ = dev_set
    digit = images[7]
    reference = mnist.to_tensor(digit)[0]
    # Dark digit on light paper, 8x larger, RGB: comes back white-on-black, 28x28, centred like MNIST.
    big = Image.fromarray(255 - digit).resize((224, 224), Image.Resampling.BICUBIC).convert("RGB")
    tensor = mnist.preprocess_image(big)
    assert tensor.shape == (1, 28, 28) and tensor.dtype == np.float32
    assert tensor[0, 0].max() == 0.0 and tensor.max() == pytest.approx(1.0, abs=0.02)
    # The same strokes: high correlation with the original digit.
    correlation = np.corrcoef(tensor[0].ravel(), reference.ravel())[0, 1]
    assert correlation > 0.8
    # RGBA with transparent background: composited on white paper, then treated like the above.
    rgba = np.zeros((100, 60, 4), np.uint8)
    rgba[20:80, 25:35, 3] = 255  # an opaque black vertical bar ("1") on transparent background
    one = mnist.preprocess_image(rgba)[0]
    rows, cols = np.nonzero(one > 0.5)
    assert rows.max() - rows.min() + 1 == pytest.approx(20, abs=1)  # fitted into the 20-pixel box
    assert (
        abs((rows.min() + rows.max()) / 2 - 13.5) <= 1.0 and abs((cols.min() + cols.max()) / 2 - 13.5) <= 1.0
    )


@pytest.mark.parametrize("size", [28, 50])
@pytest.mark.parametrize("level", [0, 200, 255])
def test_preprocess_image_rejects_blank_pictures_of_any_size(size, level):
    """28x28 included: it used to take the MNIST shortcut before the check and a black square read as "1"."""
    with pytest.raises(ValueError, match="no digit"):
        mnist.preprocess_image(np.full((size, size), level, np.uint8))


def test_preprocess_image_rejects_bad_arrays():
    with pytest.raises(ValueError, match="uint8"):
        mnist.preprocess_image(np.zeros((50, 50), np.float32))
