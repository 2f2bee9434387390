"""Encoded image bytes -> the `mnist` model's input, with the checks a server needs in front of Pillow.

Used by the `mnist_preprocess` Triton model (Python backend) and importable on its own. The image
normalisation itself (greyscale, white digit on black, fitted into 28x28 the MNIST way, pixel / 255) is
THE preprocessing of the model, `trt_plugin_kit.mnist.preprocess_image`; this module adds what untrusted
input needs: only PNG or JPEG, limits on encoded bytes and on pixels (Pillow's decompression-bomb guard
as an error), and a clear `ImageRejected` message for empty, corrupt or digit-less images.
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from trt_plugin_kit import mnist

ACCEPTED_FORMATS = ("PNG", "JPEG")
# Defaults of the model's `max_image_bytes` / `max_image_pixels` parameters (request size limits).
MAX_IMAGE_BYTES = 8 * 1024 * 1024
MAX_IMAGE_PIXELS = 25_000_000


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


def decode_digit(
    data: bytes, max_bytes: int = MAX_IMAGE_BYTES, max_pixels: int = MAX_IMAGE_PIXELS
) -> np.ndarray:
    """Encoded PNG/JPEG bytes -> float32 [1, 28, 28] in the training scaling. Raises ImageRejected."""
    image = load_image(data, max_bytes, max_pixels)
    try:
        return mnist.preprocess_image(image)
    except ValueError as error:  # e.g. a uniform picture with no digit in it
        raise ImageRejected(str(error)) from error


def load_image(
    data: bytes, max_bytes: int = MAX_IMAGE_BYTES, max_pixels: int = MAX_IMAGE_PIXELS
) -> Image.Image:
    """Decode PNG/JPEG bytes into a PIL image, enforcing the size limits before pixels are decoded."""
    if len(data) == 0:
        raise ImageRejected("image is empty (0 bytes)")
    if len(data) > max_bytes:
        raise ImageRejected(f"image is {len(data)} bytes; the limit is {max_bytes} bytes")
    description = "image"
    # Pillow's decompression-bomb guard, as an error, with our limit. MAX_IMAGE_PIXELS is process-wide and
    # only read by Image.open: set it around the call and put the caller's value back.
    previous_limit = Image.MAX_IMAGE_PIXELS
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            Image.MAX_IMAGE_PIXELS = max_pixels
            try:
                image = Image.open(io.BytesIO(data), formats=ACCEPTED_FORMATS)
            finally:
                Image.MAX_IMAGE_PIXELS = previous_limit
            description = f"{image.format} image"
            width, height = image.size
            if width * height > max_pixels:  # known from the header, before any pixel is decoded
                raise ImageRejected(
                    f"image is {width}x{height} = {width * height} pixels; the limit is {max_pixels}"
                )
            if width == 0 or height == 0:
                raise ImageRejected(f"image has no pixels ({width}x{height})")
            image.load()
            return ImageOps.exif_transpose(image)  # phone JPEGs store their rotation in EXIF
    except ImageRejected:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise ImageRejected(f"image rejected as a decompression bomb: {error}") from error
    except UnidentifiedImageError as error:
        raise ImageRejected(f"not a {' or '.join(ACCEPTED_FORMATS)} image{_transport_hint(data)}") from error
    except (OSError, SyntaxError, ValueError, EOFError) as error:  # Pillow's ways of reporting corrupt data
        raise ImageRejected(f"corrupt {description} data: {error}") from error
