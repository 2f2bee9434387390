"""MNIST data for the `mnist` model: IDX loading, the train/validation split, and THE preprocessing.

Data
    ``../shared/data/mnist/`` (beside the repository, not in git) holds 8,000 real MNIST digits (taken from
    the MNIST test split) as ``mnist-dev-images-idx3-ubyte.gz`` / ``mnist-dev-labels-idx1-ubyte.gz``;
    ``$MNIST_DIR`` (or a tool's ``--mnist-dir``) points at another copy. :func:`load_dev_set` reads them (gzip
    or raw IDX), validating magic numbers, sizes and labels; without them it raises :class:`MnistDataMissing`,
    whose message says where they were looked for and how to point elsewhere. The shipped digits are known by
    their content (:data:`DEV_SET_SHA256`, :func:`is_shipped_dev_set`), whatever their file names.

Other labelled data (what ``python -m clients eval`` measures besides the dev digits)
    :func:`find_labelled_files` finds a labelled set in a folder: the dev names, else the standard MNIST names
    (``t10k-images-idx3-ubyte[.gz]`` + ``t10k-labels-idx1-ubyte[.gz]``, else ``train-...``);
    :func:`load_labelled_idx` reads any images/labels pair of IDX files (gzipped or not: :func:`read_idx` goes
    by the gzip magic bytes, not the name); :func:`labelled_image_files` / :func:`load_image_folder` read a
    folder of pictures with one sub-folder per label (``0`` .. ``9``); :func:`dev_digit_overlap` tells how
    many digits of another set are dev digits the model was trained on.

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
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trt_plugin_kit.interface import MNIST_DIR, MNIST_DIR_ENV, SHARED_DIR

DEFAULT_DATA_DIR = MNIST_DIR
DEV_IMAGES_FILE = "mnist-dev-images-idx3-ubyte.gz"
DEV_LABELS_FILE = "mnist-dev-labels-idx1-ubyte.gz"
# SHA-256 of the shipped dev digits as decoded: the 8,000 x 28 x 28 pixel bytes, then the 8,000 label bytes.
# Only data with this content is the set the model was trained and validated on (see dev_set_sha256).
DEV_SET_SHA256 = "856ec361d8d4e486d42caa557deb5c3dfa0f7356428d15b6173079b5049ceb6a"
# The standard MNIST file names (yann.lecun.com and its mirrors), test set first; each name is also found
# uncompressed (without .gz) and in the dotted spelling some copies use (t10k-images.idx3-ubyte).
STANDARD_SETS = ("t10k", "train")
STANDARD_IMAGES = "{}-images-idx3-ubyte"
STANDARD_LABELS = "{}-labels-idx1-ubyte"
# A folder of labelled pictures: one sub-folder per label, holding these.
LABELLED_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")

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


class LabelledFolderError(ValueError):
    """A folder of labelled pictures is not laid out as one sub-folder per label (0..9) holding images."""


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
        hint = " (an IDX labels file? images are idx3, labels idx1)" if images.ndim == 1 else ""
        raise IdxFormatError(
            f"{path}: expected uint8 images [N, 28, 28], got {images.dtype} {images.shape}{hint}"
        )
    return images


def load_labels(path: str | Path) -> np.ndarray:
    """MNIST labels as uint8 ``[N]`` with values 0..9 (IDX type 0x08, 1 dimension)."""
    labels = read_idx(path)
    if labels.dtype != np.uint8 or labels.ndim != 1:
        hint = " (an IDX images file? labels are idx1, images idx3)" if labels.ndim == 3 else ""
        raise IdxFormatError(f"{path}: expected uint8 labels [N], got {labels.dtype} {labels.shape}{hint}")
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


def missing_data_message(directory: str | Path | None = None, standard_too: bool = False) -> str:
    """What is missing where, and how to point elsewhere; ``standard_too``: the standard MNIST names were
    looked for as well (:func:`find_labelled_files`)."""
    folder = data_dir(directory)
    if directory is not None and str(directory) != "":
        origin = "the folder given"
    elif os.environ.get(MNIST_DIR_ENV):
        origin = f"${MNIST_DIR_ENV}"
    else:
        origin = "the default folder"
    missing = [name for name in (DEV_IMAGES_FILE, DEV_LABELS_FILE) if not (folder / name).is_file()]
    home = f"../{MNIST_DIR.relative_to(SHARED_DIR.parent)}"
    standard = f", nor the standard MNIST files ({standard_names_text()})" if standard_too else ""
    alternative = " or the standard MNIST files" if standard_too else ""
    return (
        f"MNIST digits not found: {folder} ({origin}) has no {' and no '.join(missing)}{standard}. They are "
        f"not part of the repository: this project keeps them in {home} beside the checkout. Point "
        f"--mnist-dir DIR or ${MNIST_DIR_ENV} at a folder holding {DEV_IMAGES_FILE} and {DEV_LABELS_FILE} "
        f"(the 8,000 dev digits as IDX files){alternative}."
    )


def load_dev_set(directory: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The 8,000 dev digits: ``(images uint8 [N,28,28], labels uint8 [N])`` from :func:`data_dir`.

    Raises MnistDataMissing (a FileNotFoundError) when the files are not there.
    """
    folder = data_dir(directory)
    if not has_dev_set(folder):
        raise MnistDataMissing(missing_data_message(directory))
    return load_labelled_idx(folder / DEV_IMAGES_FILE, folder / DEV_LABELS_FILE)


def load_labelled_idx(images_path: str | Path, labels_path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Any MNIST-style pair of IDX files (gzipped or not): ``(images uint8 [N,28,28], labels uint8 [N])``.

    Raises:
        FileNotFoundError: a file does not exist.
        IdxFormatError: either file is malformed (see :func:`load_images`, :func:`load_labels`), or the
            numbers of images and labels differ.
    """
    images, labels = load_images(images_path), load_labels(labels_path)
    if len(images) != len(labels):
        raise IdxFormatError(
            f"{len(images)} images but {len(labels)} labels ({images_path}, {labels_path}): every image "
            "needs exactly one label"
        )
    return images, labels


def dev_set_sha256(images: np.ndarray, labels: np.ndarray) -> str:
    """SHA-256 of decoded digits (uint8 pixels, then uint8 labels): the same for gzipped or plain files."""
    digest = hashlib.sha256(np.ascontiguousarray(images, dtype=np.uint8).tobytes())
    digest.update(np.ascontiguousarray(labels, dtype=np.uint8).tobytes())
    return digest.hexdigest()


def is_shipped_dev_set(images: np.ndarray, labels: np.ndarray) -> bool:
    """True only for the 8,000 shipped dev digits, in their order: the data :func:`split_indices` was made
    for (the model trained on digits ``i % 8 != 7`` of exactly these)."""
    return len(images) == len(labels) and dev_set_sha256(images, labels) == DEV_SET_SHA256


# ------------------------------------------------------------------------------------- other labelled data


@dataclass(frozen=True)
class LabelledFiles:
    """An images/labels pair of IDX files found in a folder."""

    images: Path
    labels: Path
    dev_names: bool  # named like the shipped dev digits (their content still decides: is_shipped_dev_set)


def _standard_candidates(pattern: str, prefix: str) -> list[str]:
    name = pattern.format(prefix)
    dotted = name.replace("-idx", ".idx")  # t10k-images.idx3-ubyte
    return [name + ".gz", name, dotted + ".gz", dotted]


def standard_names_text() -> str:
    """The standard names as the messages spell them."""
    pairs = [
        f"{STANDARD_IMAGES.format(prefix)}[.gz] + {STANDARD_LABELS.format(prefix)}[.gz]"
        for prefix in STANDARD_SETS
    ]
    return ", or ".join(pairs)


def find_labelled_files(directory: str | Path | None = None) -> LabelledFiles:
    """The labelled IDX pair in :func:`data_dir`: the dev names, else the standard MNIST names (t10k before
    train; gzipped or not). Half a pair is refused rather than passed over for the next candidate.

    Raises MnistDataMissing (a FileNotFoundError) naming what was looked for, when no pair is there.
    """
    folder = data_dir(directory)
    dev_images, dev_labels = folder / DEV_IMAGES_FILE, folder / DEV_LABELS_FILE
    if dev_images.is_file() or dev_labels.is_file():
        if not has_dev_set(folder):
            raise MnistDataMissing(missing_data_message(directory))
        return LabelledFiles(dev_images, dev_labels, dev_names=True)
    for prefix in STANDARD_SETS:
        images = [folder / n for n in _standard_candidates(STANDARD_IMAGES, prefix) if (folder / n).is_file()]
        labels = [folder / n for n in _standard_candidates(STANDARD_LABELS, prefix) if (folder / n).is_file()]
        if images and labels:
            return LabelledFiles(images[0], labels[0], dev_names=False)
        if images or labels:
            there, missing = (images[0], STANDARD_LABELS) if images else (labels[0], STANDARD_IMAGES)
            raise MnistDataMissing(
                f"{folder}: {there.name} is there but not its partner {missing.format(prefix)}[.gz]; "
                "the images and their labels go together"
            )
    raise MnistDataMissing(missing_data_message(directory, standard_too=True))


def labelled_image_files(folder: str | Path) -> list[tuple[Path, int]]:
    """``(path, label)`` of every picture in a folder laid out as one sub-folder per label: ``0/``..``9/``
    holding .png/.jpg/.jpeg files (any case). Sorted by label, then file name. Hidden entries (``.name``)
    are skipped; anything else out of place is refused, so that no picture is silently left out.

    Raises:
        FileNotFoundError: the folder does not exist.
        LabelledFolderError: not a folder, other sub-folders or files, or no picture at all.
    """
    root = Path(folder)
    if not root.exists():
        raise FileNotFoundError(f"{root}: no such folder")
    if not root.is_dir():
        raise LabelledFolderError(f"{root}: not a folder (expected one sub-folder per label, 0 to 9)")
    suffixes = "/".join(LABELLED_IMAGE_SUFFIXES)
    layout = f"expected one sub-folder per label, named 0 to 9, holding {suffixes} files"
    found: list[tuple[Path, int]] = []
    problems: list[str] = []
    loose: list[str] = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if not entry.is_dir():
            if entry.suffix.lower() in LABELLED_IMAGE_SUFFIXES:
                loose.append(entry.name)
            continue  # a README or the like beside the label folders
        if entry.name not in {str(label) for label in range(NUM_CLASSES)}:
            problems.append(f"{entry}: not a label folder (0 to 9)")
            continue
        for item in sorted(entry.iterdir()):
            if item.name.startswith("."):
                continue
            if item.is_file() and item.suffix.lower() in LABELLED_IMAGE_SUFFIXES:
                found.append((item, int(entry.name)))
            else:
                problems.append(f"{item}: not a {suffixes} file")
    if loose:
        shown = ", ".join(loose[:3]) + (f" and {len(loose) - 3} more" if len(loose) > 3 else "")
        problems.insert(0, f"{root}: pictures outside a label folder ({shown}): which digit are they?")
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems[:10])
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise LabelledFolderError(f"{root}: {layout}; found\n{listed}{more}")
    if not found:
        raise LabelledFolderError(f"{root}: no pictures ({layout})")
    return found


def load_image_folder(folder: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Every picture of a labelled folder (:func:`labelled_image_files`) through :func:`preprocess_image`:
    ``(float32 [N, 1, 28, 28], labels uint8 [N])``.

    Raises LabelledFolderError naming the pictures that cannot be read or hold no digit.
    """
    files = labelled_image_files(folder)
    tensors, problems = [], []
    for path, _ in files:
        try:
            tensors.append(preprocess_image(path))
        except (OSError, ValueError, SyntaxError) as error:  # PIL: unreadable; preprocess_image: no digit
            problems.append(f"{path}: {error}")
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems[:10])
        raise LabelledFolderError(f"{len(problems)} of {len(files)} pictures are not usable:\n{listed}")
    labels = np.array([label for _, label in files], dtype=np.uint8)
    return np.stack(tensors), labels


@dataclass(frozen=True)
class DevOverlap:
    """How many digits of a set are, pixel for pixel, shipped dev digits of each split."""

    train: int  # digits the model was trained on
    validation: int  # held-out digits


def dev_digit_overlap(digits: np.ndarray, directory: str | Path | None = None) -> DevOverlap | None:
    """Counts the digits (uint8 ``[N, 28, 28]``) equal to a shipped dev digit, per split; None when the
    shipped dev digits are not in :func:`data_dir` (so nothing can be said). MNIST's own t10k files hold the
    8,000 dev digits: 7,000 of their 10,000 trained the model."""
    try:
        images, labels = load_dev_set(directory)
    except (OSError, IdxFormatError):
        return None
    if not is_shipped_dev_set(images, labels):
        return None
    train, validation = split_indices(len(images))
    train_set = {images[i].tobytes() for i in train}
    validation_set = {images[i].tobytes() for i in validation}
    keys = [np.ascontiguousarray(digit, dtype=np.uint8).tobytes() for digit in digits]
    return DevOverlap(
        train=sum(key in train_set for key in keys), validation=sum(key in validation_set for key in keys)
    )


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
