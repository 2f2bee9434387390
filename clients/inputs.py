"""Reading what the user gives the clients: image files, vectors (.npy / CSV / stdin), labelled digits (MNIST
IDX files, folders of labelled pictures).

Everything is read and checked before the first request, so a bad file stops the command with one message
listing every bad input, and nothing reaches the server half-done.
"""

from __future__ import annotations

import glob
import io
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from clients.errors import BadInputError
from trt_plugin_kit.models import mnist
from trt_plugin_kit.serving import preprocess as serving_preprocess

# Suffixes picked up when a directory is given (files named explicitly are taken whatever their suffix).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".pgm", ".ppm", ".pbm")
# mnist_preprocess decodes these; other formats are re-encoded losslessly as PNG by the client.
SERVER_FORMATS = serving_preprocess.ACCEPTED_FORMATS
MAX_LISTED_ERRORS = 10
T, R = TypeVar("T"), TypeVar("R")


def _raise_listed(header: str, errors: list[str]) -> None:
    shown = errors[:MAX_LISTED_ERRORS]
    more = f"\n  ... and {len(errors) - len(shown)} more" if len(errors) > len(shown) else ""
    raise BadInputError(header + "\n" + "\n".join(f"  - {e}" for e in shown) + more)


def _all_or_listed(
    function: Callable[[T], R],
    items: Iterable[T],
    header: Callable[[int], str],
    errors: list[str] | None = None,
) -> list[R]:
    """function(item) for every item; when any raises BadInputError (or `errors` already holds some), one
    BadInputError listing them all under header(number of errors), so that nothing half-checked is sent."""
    errors = [] if errors is None else errors
    results = []
    for item in items:
        try:
            results.append(function(item))
        except BadInputError as exc:
            errors.append(str(exc))
    if errors:
        _raise_listed(header(len(errors)), errors)
    return results


# --------------------------------------------------------------------------------------------------- images
def expand_image_paths(arguments: list[str]) -> list[Path]:
    """Files, directories (recursively, image suffixes only) and globs (for shells that did not expand
    them, or quoted patterns) -> sorted-per-argument, de-duplicated file list."""
    found, errors = _expand(arguments)
    if errors:
        _raise_listed("cannot use these inputs:", errors)
    return found


def _expand(arguments: list[str]) -> tuple[list[Path], list[str]]:
    found: list[Path] = []
    errors: list[str] = []
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not files:
                errors.append(f"{argument}: directory holds no image files ({', '.join(IMAGE_SUFFIXES)})")
            found.extend(files)
        elif path.is_file():
            found.append(path)
        elif glob.has_magic(argument):
            files = sorted(Path(p) for p in glob.glob(argument, recursive=True) if Path(p).is_file())
            if not files:
                errors.append(f"{argument}: no file matches this pattern")
            found.extend(files)
        elif path.exists():
            errors.append(f"{argument}: not a regular file or directory")
        else:
            errors.append(f"{argument}: no such file or directory")
    return list(dict.fromkeys(found)), errors


@dataclass
class EncodedImage:
    path: Path
    data: bytes  # PNG or JPEG bytes, as sent to mnist_pipeline
    format: str  # format of the file on disk


def read_image(path: Path) -> EncodedImage:
    """Reads and fully decodes an image (so corrupt files fail here); non-PNG/JPEG becomes PNG."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read ({exc.strerror})") from exc
    if not data:
        raise BadInputError(f"{path}: empty file")
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            file_format = image.format or "unknown"
            if image.width == 0 or image.height == 0:
                raise BadInputError(f"{path}: image has no pixels")
            if file_format not in SERVER_FORMATS:
                buffer = io.BytesIO()
                ImageOps.exif_transpose(image).save(buffer, format="PNG")  # PNG would drop the EXIF rotation
                data = buffer.getvalue()
    except UnidentifiedImageError as exc:
        raise BadInputError(f"{path}: not an image Pillow can read") from exc
    except Image.DecompressionBombError as exc:
        raise BadInputError(f"{path}: refused, too many pixels ({exc})") from exc
    except (OSError, ValueError, SyntaxError, EOFError) as exc:  # truncated or corrupt image data
        raise BadInputError(f"{path}: corrupt image ({exc})") from exc
    return EncodedImage(path, data, file_format)


def gather_images(arguments: list[str]) -> list[EncodedImage]:
    """Every image the arguments name, read and checked; one error listing all bad arguments and files."""
    paths, errors = _expand(arguments)
    return _all_or_listed(read_image, paths, lambda bad: f"{bad} bad input(s), nothing was sent:", errors)


def read_images(paths: list[Path]) -> list[EncodedImage]:
    return _all_or_listed(
        read_image,
        paths,
        lambda bad: f"{bad} of {len(paths)} inputs are not usable images (nothing was sent):",
    )


def preprocess_for_mnist(image: EncodedImage) -> np.ndarray:
    """The `mnist` model input ([1, 28, 28] float32) made client side by the very code mnist_preprocess
    runs on the server (same limits, EXIF rotation, trt_plugin_kit.models.mnist.preprocess_image)."""
    try:
        return serving_preprocess.decode_digit(image.data)
    except serving_preprocess.ImageRejected as exc:
        raise BadInputError(f"{image.path}: {exc}") from exc


def preprocess_all_for_mnist(images: list[EncodedImage]) -> list[np.ndarray]:
    """preprocess_for_mnist for every image; one error listing every image that has no usable digit."""
    return _all_or_listed(
        preprocess_for_mnist, images, lambda bad: f"{bad} image(s) cannot be preprocessed, nothing was sent:"
    )


def encode_png(digit: np.ndarray) -> bytes:
    """A 28x28 uint8 MNIST digit as PNG bytes (lossless: the server decodes the very same pixels)."""
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(digit, dtype=np.uint8), mode="L").save(buffer, format="PNG")
    return buffer.getvalue()


def bytes_tensor(items: list[bytes]) -> np.ndarray:
    """[B, 1] BYTES tensor (numpy object array) from encoded images."""
    array = np.empty((len(items), 1), dtype=np.object_)
    for row, item in enumerate(items):
        array[row, 0] = item
    return array


# ------------------------------------------------------------------------------------------------- vectors
def _parse_text_vectors(text: str, source: str) -> np.ndarray:
    """CSV or whitespace-separated numbers, one vector per line; '#' starts a comment."""
    rows: list[list[float]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = [f for f in line.replace(",", " ").replace(";", " ").split()]
        try:
            rows.append([float(f) for f in fields])
        except ValueError as exc:
            raise BadInputError(f"{source}, line {number}: not a number ({exc})") from exc
        if rows and len(rows[-1]) != len(rows[0]):
            raise BadInputError(
                f"{source}, line {number}: {len(rows[-1])} values, but the first vector has {len(rows[0])} "
                "(all vectors of one input must have the same length)"
            )
    if not rows:
        raise BadInputError(f"{source}: no vectors found")
    return np.asarray(rows, dtype=np.float64)


def _from_npy_bytes(data: bytes, source: str) -> np.ndarray:
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise BadInputError(f"{source}: not a readable .npy array ({exc})") from exc


def load_vectors(source: str) -> np.ndarray:
    """float32 [N, D] from a .npy file, a CSV/text file, or '-' (stdin: .npy bytes or text).

    A 1-D array is one vector. Values must be finite numbers, D >= 1.
    """
    if source == "-":
        data = sys.stdin.buffer.read()
        name = "stdin"
    else:
        path = Path(source)
        name = str(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise BadInputError(f"{source}: cannot read ({exc.strerror})") from exc
    if data.startswith(b"\x93NUMPY"):
        array = _from_npy_bytes(data, name)
    elif source != "-" and Path(source).suffix.lower() == ".npy":
        raise BadInputError(f"{name}: has the .npy suffix but no NumPy header")
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadInputError(f"{name}: neither a .npy array nor UTF-8 text (CSV)") from exc
        array = _parse_text_vectors(text, name)
    if array.dtype.kind not in "iuf":
        raise BadInputError(f"{name}: expected numbers, got an array of {array.dtype}")
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise BadInputError(
            f"{name}: expected vectors [N, D] (or one vector [D]), got shape {list(array.shape)}"
        )
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise BadInputError(f"{name}: no values (shape {list(array.shape)})")
    if not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))[0]
        raise BadInputError(f"{name}: vector {bad[0]} element {bad[1]} is not a finite number")
    if np.abs(array).max() > np.finfo(np.float32).max:
        raise BadInputError(f"{name}: values too large for float32")
    return array.astype(np.float32)


def save_vectors(path: str, vectors: np.ndarray) -> None:
    """Writes [N, D] float32 vectors as .npy or .csv (by suffix)."""
    target = Path(path)
    suffix = target.suffix.lower()
    try:
        if suffix == ".npy":
            np.save(target, vectors)
        elif suffix in (".csv", ".txt"):
            np.savetxt(target, vectors, delimiter=",", fmt="%.9g")
        else:
            raise BadInputError(f"--output {path}: use a .npy or .csv file name")
    except OSError as exc:
        raise BadInputError(f"--output {path}: cannot write ({exc.strerror})") from exc


# ---------------------------------------------------------------------------------------------------- IDX
def load_dev_digits(directory: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The MNIST dev digits uint8 [N, 28, 28] and labels uint8 [N] from --mnist-dir / $MNIST_DIR / the
    default folder; a clear BadInputError (what is missing, where, how to point elsewhere) otherwise."""
    try:
        images, labels = mnist.load_dev_set(directory)
    except mnist.MnistDataMissing as exc:
        raise BadInputError(
            f"{exc}\n`eval` needs them and stops here (nothing was sent). Without any data set, "
            "`python -m clients infer samples/digits/` checks a deployment on the 10 sample digits that "
            "come with the repository."
        ) from exc
    except OSError as exc:
        raise BadInputError(f"{exc.filename}: cannot read ({exc.strerror})") from exc
    except mnist.IdxFormatError as exc:
        raise BadInputError(f"not an MNIST IDX file: {exc}") from exc
    if len(images) == 0:
        raise BadInputError(f"{mnist.data_dir(directory)}: no images")
    return images, labels


# ------------------------------------------------------------------------------------- labelled digits
OWN_DATA_HINT = (
    "Your own labelled digits work too: --images FILE --labels FILE (IDX, gzipped or not), --mnist-dir DIR "
    "holding the standard MNIST files, or --image-folder DIR (one sub-folder per label, 0 to 9)."
)


@dataclass
class LabelledDigits:
    """What `eval` measures: labels, with MNIST digits (IDX files) or pictures (a labelled folder)."""

    labels: np.ndarray  # int64 [N]
    source: Path  # the images file, or the folder of pictures
    labels_source: Path | None = None  # the labels file (IDX data)
    digits: np.ndarray | None = None  # uint8 [N, 28, 28] (IDX data)
    pictures: list[EncodedImage] | None = None  # a folder: the files, as mnist_pipeline gets them
    tensors: np.ndarray | None = None  # a folder: float32 [N, 1, 28, 28], the server's own preprocessing
    shipped: bool = False  # the shipped dev digits (known by content: mnist.is_shipped_dev_set)
    dev_names: bool = False  # files named like the dev digits (their content may be anything)
    mnist_dir: Path | None = None  # the folder the files were found in (--mnist-dir / $MNIST_DIR / default)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def is_folder(self) -> bool:
        return self.pictures is not None

    def subset(self, indices: np.ndarray) -> LabelledDigits:
        return replace(
            self,
            labels=self.labels[indices],
            digits=None if self.digits is None else self.digits[indices],
            pictures=None if self.pictures is None else [self.pictures[i] for i in indices],
            tensors=None if self.tensors is None else self.tensors[indices],
        )

    def raw_batch(self, start: int, stop: int) -> np.ndarray:
        """float32 [B, 1, 28, 28] for the mnist model."""
        if self.digits is not None:
            return mnist.to_tensor(self.digits[start:stop])
        return self.tensors[start:stop]

    def encoded_batch(self, start: int, stop: int) -> np.ndarray:
        """[B, 1] BYTES of encoded images for mnist_pipeline: lossless PNG digits, or the picture files."""
        if self.digits is not None:
            return bytes_tensor([encode_png(digit) for digit in self.digits[start:stop]])
        return bytes_tensor([picture.data for picture in self.pictures[start:stop]])

    def as_mnist_digits(self) -> np.ndarray:
        """uint8 [N, 28, 28]: the digits, or the pictures as the model sees them (to compare with others)."""
        if self.digits is not None:
            return self.digits
        return np.rint(self.tensors[:, 0] * mnist.PIXEL_DIVISOR).astype(np.uint8)


def _read_idx_pair(images: Path, labels: Path) -> tuple[np.ndarray, np.ndarray]:
    """mnist.load_labelled_idx with its errors as BadInputError (exit 7)."""
    try:
        digits, values = mnist.load_labelled_idx(images, labels)
    except mnist.IdxFormatError as exc:
        raise BadInputError(f"not an MNIST IDX file: {exc}") from exc
    except IsADirectoryError as exc:
        raise BadInputError(f"{exc.filename}: a folder, not an IDX file") from exc
    except FileNotFoundError as exc:
        raise BadInputError(f"{exc.filename}: no such file") from exc
    except OSError as exc:
        raise BadInputError(f"{exc.filename}: cannot read ({exc.strerror})") from exc
    if len(digits) == 0:
        raise BadInputError(f"{images}: no images")
    return digits, values


def _idx_digits(images: Path, labels: Path, **extra) -> LabelledDigits:
    digits, values = _read_idx_pair(images, labels)
    return LabelledDigits(
        labels=values.astype(np.int64),
        source=images,
        labels_source=labels,
        digits=digits,
        shipped=mnist.is_shipped_dev_set(digits, values),
        **extra,
    )


def load_idx_pair(images: str | Path, labels: str | Path) -> LabelledDigits:
    """--images FILE --labels FILE: any MNIST-style IDX pair (gzipped or not, whatever the names)."""
    images, labels = Path(images), Path(labels)
    dev_names = images.name == mnist.DEV_IMAGES_FILE and labels.name == mnist.DEV_LABELS_FILE
    return _idx_digits(images, labels, dev_names=dev_names)


def load_mnist_dir(directory: str | Path | None = None) -> LabelledDigits:
    """The labelled IDX pair of --mnist-dir / $MNIST_DIR / the default folder: the dev digits, else the
    standard MNIST names (mnist.find_labelled_files); a clear BadInputError otherwise."""
    try:
        found = mnist.find_labelled_files(directory)
    except mnist.MnistDataMissing as exc:
        raise BadInputError(
            f"{exc}\n`eval` needs them and stops here (nothing was sent). {OWN_DATA_HINT} Without any data "
            "set, `python -m clients infer samples/digits/` checks a deployment on the 10 sample digits that "
            "come with the repository."
        ) from exc
    return _idx_digits(
        found.images, found.labels, dev_names=found.dev_names, mnist_dir=mnist.data_dir(directory)
    )


def load_labelled_folder(folder: str | Path) -> LabelledDigits:
    """--image-folder DIR: every picture of its label sub-folders (mnist.labelled_image_files), read and
    preprocessed here by the server's own code, so that a picture without a usable digit is named before
    anything is sent."""
    try:
        files = mnist.labelled_image_files(folder)
    except (FileNotFoundError, mnist.LabelledFolderError) as exc:
        raise BadInputError(f"--image-folder {exc}") from exc
    except OSError as exc:
        raise BadInputError(f"--image-folder {exc.filename}: cannot read ({exc.strerror})") from exc
    pictures = read_images([path for path, _ in files])
    tensors = np.stack(preprocess_all_for_mnist(pictures))
    labels = np.array([label for _, label in files], dtype=np.int64)
    return LabelledDigits(labels=labels, source=Path(folder), pictures=pictures, tensors=tensors)
