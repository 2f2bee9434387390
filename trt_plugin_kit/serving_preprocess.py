"""Encoded image bytes -> the `mnist` model's input, with the checks a server needs in front of Pillow.

Used by the `mnist_preprocess` Triton model (Python backend) and by the clients' local preprocessing. The
image normalisation itself (greyscale, white digit on black, fitted into 28x28 the MNIST way, pixel / 255) is
THE preprocessing of the model, `trt_plugin_kit.mnist.preprocess_image`; this module adds what untrusted
input needs:

* only PNG or JPEG;
* limits (:class:`ImageLimits`, the model's parameters) on encoded bytes, on the pixels decoded, and on the
  size a JPEG header may claim. A digit needs 28x28 pixels; the limits admit a screenshot or a page scan as
  PNG and a phone photo as JPEG. JPEGs are decoded at reduced size by libjpeg (Pillow's draft mode, 1/2 to
  1/8 scale), so a 12-megapixel photo costs what a 0.2-megapixel one does;
* a JPEG whose header claims more pixels than its data can hold is refused as corrupt. Pillow drops libjpeg's
  corrupt-data warnings (its JpegDecode.c discards them), so data that is missing is filled in silently:
  this size check is the part of that damage that can be seen before decoding;
* a clear `ImageRejected` message for everything else Pillow raises on bad data, and for images with no digit.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import warnings
from dataclasses import dataclass, fields

import numpy as np
from PIL import ExifTags, Image, UnidentifiedImageError

from trt_plugin_kit import mnist

ACCEPTED_FORMATS = ("PNG", "JPEG")
JPEG_FORMATS = ("JPEG", "MPO")  # Pillow names a JPEG with a multi-picture (camera) segment MPO
# JPEGs larger than this are decoded at the largest of 1/2, 1/4, 1/8 scale that keeps both sides >= it.
JPEG_DRAFT_SIDE = 256


@dataclass(frozen=True)
class ImageLimits:
    """Per-image limits; the `mnist_preprocess` parameters of the same names (config.pbtxt) override them."""

    max_image_bytes: int = 8 * 1024 * 1024  # encoded size: a phone photo is 2-5 MB
    max_image_pixels: int = 4 * 1024 * 1024  # pixels decoded: PNG as sent, JPEG after reduced-size decoding
    max_jpeg_pixels: int = 16 * 1024 * 1024  # what a JPEG header may claim: 4032x3024 phone photos fit

    @classmethod
    def from_parameters(cls, parameters: dict[str, str]) -> ImageLimits:
        """From a model's string parameters; names not given keep their defaults, unknown names are errors."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(parameters) - names)
        if unknown:
            raise ValueError(f"unknown image limit parameter(s) {unknown}; known: {sorted(names)}")
        return cls(**{name: int(value) for name, value in parameters.items()})


DEFAULT_LIMITS = ImageLimits()


class ImageRejected(ValueError):
    """The bytes are not an acceptable digit image; the message says why."""


# What a PNG or a JPEG starts with.
_SIGNATURES = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")
BINARY_EXTENSION = "the binary tensor extension (curl example: model_repository/README.md)"


def _transport_hint(data: bytes) -> str:
    """Why image bytes may have arrived mangled: sent inside JSON as a string (JSON strings are UTF-8 text:
    each byte above 0x7F became two) or base64-encoded. Over HTTP, images go with the binary extension."""
    try:
        if data.decode("utf-8").encode("latin-1").startswith(_SIGNATURES):
            return (
                ": these are image bytes that went through a text string (JSON strings are UTF-8, so every "
                f"byte above 0x7F became two); send images over HTTP with {BINARY_EXTENSION}"
            )
    except (UnicodeDecodeError, UnicodeEncodeError):
        pass
    try:
        if base64.b64decode(data[:64], validate=False).startswith(_SIGNATURES):
            return f": this is base64 text; send the image's own bytes, over HTTP with {BINARY_EXTENSION}"
    except (ValueError, binascii.Error):
        pass
    return f"; over HTTP, images go with {BINARY_EXTENSION}, as JSON strings they arrive mangled"


def decode_digit(data: bytes, limits: ImageLimits = DEFAULT_LIMITS) -> np.ndarray:
    """Encoded PNG/JPEG bytes -> float32 [1, 28, 28] in the training scaling. Raises ImageRejected."""
    image = load_image(data, limits)
    try:
        return mnist.preprocess_image(image)
    except ValueError as error:  # e.g. a uniform picture with no digit in it
        raise ImageRejected(str(error)) from error


def load_image(data: bytes, limits: ImageLimits = DEFAULT_LIMITS) -> Image.Image:
    """Decode PNG/JPEG bytes into a PIL image (EXIF rotation applied), enforcing the limits before pixels are
    decoded. Raises ImageRejected whatever Pillow raises on the data."""
    if len(data) == 0:
        raise ImageRejected("image is empty (0 bytes)")
    if len(data) > limits.max_image_bytes:
        raise ImageRejected(f"image is {len(data)} bytes; the limit is {limits.max_image_bytes} bytes")
    description = "image"
    # Pillow's decompression-bomb guard, as an error, at the largest size accepted below. MAX_IMAGE_PIXELS is
    # process-wide and only read by Image.open: set it around the call and put the caller's value back.
    previous_limit = Image.MAX_IMAGE_PIXELS
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            Image.MAX_IMAGE_PIXELS = max(limits.max_image_pixels, limits.max_jpeg_pixels)
            try:
                image = Image.open(io.BytesIO(data), formats=ACCEPTED_FORMATS)
            finally:
                Image.MAX_IMAGE_PIXELS = previous_limit
            description = f"{image.format} image"
            _check_size(image, data, limits)  # from the header, before any pixel is decoded
            image.load()
            return apply_exif_orientation(image)
    except ImageRejected:
        raise
    except MemoryError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise ImageRejected(f"image rejected as a decompression bomb: {error}") from error
    except UnidentifiedImageError as error:
        raise ImageRejected(f"not a {' or '.join(ACCEPTED_FORMATS)} image{_transport_hint(data)}") from error
    except Exception as error:  # noqa: BLE001 - OSError, SyntaxError, struct.error, TypeError...: bad data
        raise ImageRejected(f"corrupt {description} data: {str(error) or type(error).__name__}") from error


def _check_size(image: Image.Image, data: bytes, limits: ImageLimits) -> None:
    width, height = image.size
    if width == 0 or height == 0:
        raise ImageRejected(f"image has no pixels ({width}x{height})")
    if image.format not in JPEG_FORMATS:
        if width * height > limits.max_image_pixels:
            raise ImageRejected(
                f"image is {width}x{height} = {width * height} pixels; "
                f"the limit is {limits.max_image_pixels} pixels"
            )
        return
    if width * height > limits.max_jpeg_pixels:
        raise ImageRejected(
            f"JPEG image is {width}x{height} = {width * height} pixels; "
            f"the limit is {limits.max_jpeg_pixels} pixels"
        )
    _check_jpeg_data_size(data, width, height)
    image.draft(None, (JPEG_DRAFT_SIDE, JPEG_DRAFT_SIDE))  # libjpeg scales while decoding: 1/2, 1/4 or 1/8
    decoded_width, decoded_height = image.size
    if decoded_width * decoded_height > limits.max_image_pixels:
        raise ImageRejected(
            f"JPEG image is {width}x{height}, {decoded_width}x{decoded_height} = "
            f"{decoded_width * decoded_height} pixels at reduced size; the limit is {limits.max_image_pixels}"
        )


# Start-of-frame markers of Huffman-coded JPEGs (baseline, extended, progressive, lossless; plain and
# hierarchical). Arithmetic-coded ones (0xC9-0xCB, 0xCD-0xCF) can code a block in less than a bit.
_HUFFMAN_FRAMES = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7}
_FRAMES = _HUFFMAN_FRAMES | {0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_STANDALONE_MARKERS = {0x01, *range(0xD0, 0xD8)}  # TEM and RST0-7 carry no length


def _check_jpeg_data_size(data: bytes, width: int, height: int) -> None:
    """Refuse a Huffman-coded JPEG whose image data is too short for the size its header claims.

    Every 8x8 block of every component codes its DC coefficient with a Huffman code of at least one bit, so
    the bytes from the first scan on must hold at least (number of blocks) / 8 bytes. libjpeg would fill the
    missing blocks in silently (a few KB claiming 5000x5000 took ~1 s and ~700 MB before this check).
    """
    frame, components, position = None, [], 2
    while position + 4 <= len(data):  # the segments up to the first scan, as Pillow already parsed them
        if data[position] != 0xFF:
            position += 1  # junk between segments, which Pillow and libjpeg skip too
            continue
        marker = data[position + 1]
        if marker == 0xFF or marker in _STANDALONE_MARKERS:
            position += 1 if marker == 0xFF else 2
            continue
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        if marker in _FRAMES and frame is None:
            frame = marker
            segment = data[position + 4 : position + 2 + length]
            components = [(byte >> 4, byte & 15) for byte in segment[7::3]]  # (horizontal, vertical) sampling
        if marker == 0xDA:  # start of scan: entropy-coded data follows its header
            break
        position += 2 + length
    if frame not in _HUFFMAN_FRAMES or not components or min(min(c) for c in components) == 0:
        return
    max_h, max_v = max(h for h, _ in components), max(v for _, v in components)
    blocks = sum(
        math.ceil(math.ceil(width * h / max_h) / 8) * math.ceil(math.ceil(height * v / max_v) / 8)
        for h, v in components
    )
    available = len(data) - position
    if available * 8 < blocks:
        raise ImageRejected(
            f"corrupt JPEG image data: {available} bytes cannot hold the {width}x{height} pixels its header "
            f"claims (at least {math.ceil(blocks / 8)} bytes)"
        )


# EXIF orientation -> the transposition that shows the picture upright (as ImageOps.exif_transpose does).
# Only the pixels are needed here, so the EXIF block is not rewritten: that rewrite is where Pillow raises on
# malformed tags (e.g. an XResolution stored as text made exif_transpose raise TypeError).
_ORIENTATIONS = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}


def apply_exif_orientation(image: Image.Image) -> Image.Image:
    """The picture turned upright by its EXIF orientation (phone JPEGs store their rotation there). Raises
    what Pillow raises while parsing a corrupt EXIF block."""
    orientation = image.getexif().get(ExifTags.Base.Orientation)
    method = _ORIENTATIONS.get(orientation) if isinstance(orientation, int) else None
    return image.transpose(method) if method is not None else image
