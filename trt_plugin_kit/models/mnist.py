"""MNIST data for the `mnist` model: IDX loading, the train/validation split, and THE preprocessing.

Data
    ``../shared/data/mnist/`` (beside the repository, not in git) holds 8,000 real MNIST digits (taken from
    the MNIST test split) as ``mnist-dev-images-idx3-ubyte.gz`` / ``mnist-dev-labels-idx1-ubyte.gz``;
    ``$MNIST_DIR`` (or a tool's ``--mnist-dir``) points at another copy. :func:`load_dev_set` reads them (gzip
    or raw IDX), validating magic numbers, sizes and labels; without them it raises :class:`MnistDataMissing`,
    whose message says where they were looked for and how to point elsewhere.

Split (deterministic, independent of any random number generator)
    Digit ``i`` belongs to the validation split when ``i % 8 == 7``, to the training split otherwise:
    7,000 training and 1,000 validation digits. See :func:`split_indices`.

Preprocessing (the model's input contract; serving, clients and load tests use these)
    * input tensor ``image`` (:data:`INPUT_NAME`): float32, shape ``[1, 28, 28]`` per request
      (``[N, 1, 28, 28]`` batched), ``pixel / 255.0`` (:data:`PIXEL_DIVISOR`), i.e. values in [0, 1];
    * white (high) digit on black (0) background, exactly like the MNIST IDX files; no mean/std
      normalization;
    * output tensor ``probabilities`` (:data:`OUTPUT_NAME`): float32 ``[10]`` per request, softmax
      probabilities of the digits 0..9; the prediction is their argmax.

    MNIST digits (28x28 uint8) go through :func:`to_tensor`. Any other picture (PNG/JPEG, any size, RGB,
    RGBA, dark digit on light paper) goes through :func:`preprocess_image`, which turns it into an MNIST-like
    digit first: grayscale, polarity fixed so that the digit is bright, background removed, the digit fitted
    into a 20x20 box and centred by its centre of mass in 28x28 (how MNIST itself was made).
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trt_plugin_kit.interface import MNIST_DIR, MNIST_DIR_ENV, SHARED_DIR

DEFAULT_DATA_DIR = MNIST_DIR
DEV_IMAGES_FILE = "mnist-dev-images-idx3-ubyte.gz"
DEV_LABELS_FILE = "mnist-dev-labels-idx1-ubyte.gz"

# Model interface (names are part of the Triton model config; keep them exact).
INPUT_NAME = "image"
OUTPUT_NAME = "probabilities"
IMAGE_SIZE = 28
INPUT_SHAPE = (1, IMAGE_SIZE, IMAGE_SIZE)  # per request, without the batch dimension
NUM_CLASSES = 10
PIXEL_DIVISOR = 255.0  # float32 input = uint8 pixel / PIXEL_DIVISOR (white digit on black)

# Split: every VALIDATION_EVERY-th digit (index % VALIDATION_EVERY == VALIDATION_EVERY - 1) validates.
VALIDATION_EVERY = 8

# MNIST's own layout: the digit fits a 20x20 box, centred by centre of mass in 28x28.
DIGIT_BOX = 20

# IDX element type codes (third magic byte) -> NumPy dtype (big-endian as stored).
_IDX_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


class IdxFormatError(ValueError):
    """An IDX file is malformed (bad magic number, truncated, unexpected shape or values)."""


# ------------------------------------------------------------------------------------------------- IDX


def read_idx(path: str | Path) -> np.ndarray:
    """Reads an IDX file (optionally gzip-compressed, detected by content) into an ndarray.

    Raises:
        FileNotFoundError: the file does not exist.
        IdxFormatError: bad magic number, unknown element type, or a size that does not match the header.
    """
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:
            raise IdxFormatError(f"{path}: corrupt gzip data ({error})") from error
    if len(raw) < 4:
        raise IdxFormatError(f"{path}: too short for an IDX header ({len(raw)} bytes)")
    if raw[0] != 0 or raw[1] != 0:
        raise IdxFormatError(f"{path}: bad IDX magic number {raw[:4].hex()} (must start with 0000)")
    type_code, ndim = raw[2], raw[3]
    if type_code not in _IDX_DTYPES:
        raise IdxFormatError(f"{path}: unknown IDX element type 0x{type_code:02x}")
    if ndim == 0:
        raise IdxFormatError(f"{path}: IDX header declares zero dimensions")
    header_size = 4 + 4 * ndim
    if len(raw) < header_size:
        raise IdxFormatError(f"{path}: truncated IDX header ({len(raw)} bytes, need {header_size})")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_DTYPES[type_code]
    expected = int(np.prod(shape)) * dtype.itemsize
    actual = len(raw) - header_size
    if actual != expected:
        raise IdxFormatError(
            f"{path}: header says shape {shape} ({expected} bytes of data) but the file has {actual} bytes"
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header_size).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def load_images(path: str | Path) -> np.ndarray:
    """MNIST images as uint8 ``[N, 28, 28]`` (IDX type 0x08, 3 dimensions)."""
    images = read_idx(path)
    if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE):
        raise IdxFormatError(f"{path}: expected uint8 images [N, 28, 28], got {images.dtype} {images.shape}")
    return images


def load_labels(path: str | Path) -> np.ndarray:
    """MNIST labels as uint8 ``[N]`` with values 0..9 (IDX type 0x08, 1 dimension)."""
    labels = read_idx(path)
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise IdxFormatError(f"{path}: expected uint8 labels [N], got {labels.dtype} {labels.shape}")
    if labels.size and labels.max() >= NUM_CLASSES:
        raise IdxFormatError(f"{path}: labels must be 0..9, found {int(labels.max())}")
    return labels


class MnistDataMissing(FileNotFoundError):
    """The dev digits are not where they were looked for; the message says how to provide them."""


def data_dir(explicit: str | Path | None = None) -> Path:
    """Where the dev digits are looked for: ``explicit`` (a --mnist-dir flag), else $MNIST_DIR, else
    ``../shared/data/mnist`` beside the repository."""
    if explicit is not None and str(explicit) != "":
        return Path(explicit)
    return Path(os.environ.get(MNIST_DIR_ENV) or DEFAULT_DATA_DIR)


def has_dev_set(directory: str | Path | None = None) -> bool:
    folder = data_dir(directory)
    return (folder / DEV_IMAGES_FILE).is_file() and (folder / DEV_LABELS_FILE).is_file()


def missing_data_message(directory: str | Path | None = None) -> str:
    folder = data_dir(directory)
    if directory is not None and str(directory) != "":
        origin = "the folder given"
    elif os.environ.get(MNIST_DIR_ENV):
        origin = f"${MNIST_DIR_ENV}"
    else:
        origin = "the default folder"
    missing = [name for name in (DEV_IMAGES_FILE, DEV_LABELS_FILE) if not (folder / name).is_file()]
    home = f"../{MNIST_DIR.relative_to(SHARED_DIR.parent)}"
    return (
        f"MNIST digits not found: {folder} ({origin}) has no {' and no '.join(missing)}. They are not "
        f"part of the repository: this project keeps them in {home} beside the checkout. Point --mnist-dir "
        f"DIR or ${MNIST_DIR_ENV} at a folder holding {DEV_IMAGES_FILE} and {DEV_LABELS_FILE} (the 8,000 "
        "dev digits as IDX files)."
    )


def load_dev_set(directory: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The 8,000 dev digits: ``(images uint8 [N,28,28], labels uint8 [N])`` from :func:`data_dir`.

    Raises MnistDataMissing (a FileNotFoundError) when the files are not there.
    """
    folder = data_dir(directory)
    if not has_dev_set(folder):
        raise MnistDataMissing(missing_data_message(directory))
    images_path, labels_path = folder / DEV_IMAGES_FILE, folder / DEV_LABELS_FILE
    images, labels = load_images(images_path), load_labels(labels_path)
    if len(images) != len(labels):
        raise IdxFormatError(f"{folder}: {len(images)} images but {len(labels)} labels")
    return images, labels


# ----------------------------------------------------------------------------------------------- split


def split_indices(count: int) -> tuple[np.ndarray, np.ndarray]:
    """``(train_indices, validation_indices)``: index ``i`` validates when ``i % 8 == 7``."""
    indices = np.arange(count)
    is_validation = indices % VALIDATION_EVERY == VALIDATION_EVERY - 1
    return indices[~is_validation], indices[is_validation]


@dataclass(frozen=True)
class MnistSplit:
    train_images: np.ndarray  # uint8 [N, 28, 28]
    train_labels: np.ndarray  # uint8 [N]
    validation_images: np.ndarray
    validation_labels: np.ndarray


def load_split(directory: str | Path | None = None) -> MnistSplit:
    """The dev set split deterministically into 7,000 training and 1,000 validation digits."""
    images, labels = load_dev_set(directory)
    train, validation = split_indices(len(images))
    return MnistSplit(images[train], labels[train], images[validation], labels[validation])


# --------------------------------------------------------------------------------------- preprocessing


def to_tensor(digits: np.ndarray) -> np.ndarray:
    """uint8 MNIST digits ``[28, 28]`` / ``[N, 28, 28]`` -> float32 ``[1, 28, 28]`` / ``[N, 1, 28, 28]``.

    This is the whole preprocessing of the model: ``pixel / 255.0`` as float32, white digit on black.
    """
    digits = np.asarray(digits)
    if digits.dtype != np.uint8:
        raise ValueError(f"digits must be uint8 pixels (0..255), got {digits.dtype}")
    if digits.shape[-2:] != (IMAGE_SIZE, IMAGE_SIZE) or digits.ndim not in (2, 3):
        raise ValueError(f"digits must be [28, 28] or [N, 28, 28], got shape {digits.shape}")
    return (digits.astype(np.float32) / np.float32(PIXEL_DIVISOR))[..., None, :, :]


def _grayscale(image) -> np.ndarray:
    """Any PIL image (L, RGB, RGBA, P, I;16, ...) as float64 luminance 0..255; transparency -> white paper."""
    from PIL import Image

    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        paper = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(paper, rgba)
    if image.mode in ("I", "I;16", "I;16B", "F"):
        array = np.asarray(image, dtype=np.float64)
        top = array.max() if array.size else 1.0
        return array * (255.0 / top) if top > 0 else array
    return np.asarray(image.convert("L"), dtype=np.float64)


def preprocess_image(image) -> np.ndarray:
    """Any digit picture -> the model's float32 ``[1, 28, 28]`` input.

    Accepts a path, a PIL image, or a uint8 array ``[H, W]``/``[H, W, 3|4]``. A (nearly) uniform picture of
    any size is refused. A 28x28 picture with a dark background is taken as an MNIST digit and only scaled by
    1/255 (identical to :func:`to_tensor`). Anything
    else is normalized the MNIST way: grayscale (transparent areas become white paper), inverted when the
    border is light (dark digit on light paper), background level subtracted, contrast stretched to 0..255,
    cropped to the digit, resized to fit 20x20 keeping the aspect ratio, and centred by centre of mass.

    Raises:
        ValueError: the picture is empty or contains no visible digit (uniform image).
    """
    from PIL import Image

    if isinstance(image, (str, Path)):
        with Image.open(image) as opened:
            opened.load()
            image = opened.copy()
    elif isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim not in (2, 3):
            raise ValueError(
                f"array images must be uint8 [H, W] or [H, W, C], got {image.dtype} {image.shape}"
            )
        image = Image.fromarray(image)
    if image.width == 0 or image.height == 0:
        raise ValueError("empty image")
    gray = _grayscale(image)

    border = np.concatenate([gray[0], gray[-1], gray[:, 0], gray[:, -1]])
    background = float(np.median(border))
    if background > 127.5:  # dark digit on light paper: make the digit bright, as in MNIST
        gray = 255.0 - gray
        background = 255.0 - background
    ink = np.clip(gray - background, 0.0, None)
    peak = ink.max()
    if peak < 16.0:  # less than ~6% contrast: nothing that looks like a digit, whatever the size
        raise ValueError("no digit found: the image is (nearly) uniform")
    if gray.shape == (IMAGE_SIZE, IMAGE_SIZE):
        # Already an MNIST-style digit (bright on dark after the polarity fix above): do not touch it beyond
        # the scaling (keeps dev digits bit-exact).
        return to_tensor(np.clip(np.rint(gray), 0, 255).astype(np.uint8))

    ink *= 255.0 / peak
    rows = np.flatnonzero(ink.max(axis=1) > 0.1 * 255)
    cols = np.flatnonzero(ink.max(axis=0) > 0.1 * 255)
    ink = ink[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]

    height, width = ink.shape
    scale = DIGIT_BOX / max(height, width)
    new_size = (max(1, round(width * scale)), max(1, round(height * scale)))
    box = np.asarray(
        Image.fromarray(ink.astype(np.float32), mode="F").resize(new_size, Image.Resampling.LANCZOS),
        dtype=np.float64,
    )
    box = np.clip(box, 0.0, 255.0)

    # Centre of mass of the box goes to the centre of the 28x28 canvas (shift clamped to stay inside).
    total = box.sum()
    ys, xs = np.indices(box.shape)
    center_y = (ys * box).sum() / total if total > 0 else (box.shape[0] - 1) / 2
    center_x = (xs * box).sum() / total if total > 0 else (box.shape[1] - 1) / 2
    top = int(np.clip(round((IMAGE_SIZE - 1) / 2 - center_y), 0, IMAGE_SIZE - box.shape[0]))
    left = int(np.clip(round((IMAGE_SIZE - 1) / 2 - center_x), 0, IMAGE_SIZE - box.shape[1]))
    canvas = np.zeros((IMAGE_SIZE, IMAGE_SIZE))
    canvas[top : top + box.shape[0], left : left + box.shape[1]] = box
    return to_tensor(np.clip(np.rint(canvas), 0, 255).astype(np.uint8))
