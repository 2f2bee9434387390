"""Encoded image bytes -> the `mnist` model's input, with the checks a server needs in front of Pillow.

Used by the `mnist_preprocess` Triton model (Python backend) and by the clients' local preprocessing. The
image normalisation itself (greyscale, white digit on black, fitted into 28x28 the MNIST way, pixel / 255) is
THE preprocessing of the model, `trt_plugin_kit.models.mnist.preprocess_image`; this module adds what
untrusted
input needs:

* only PNG or JPEG;
* limits (:class:`ImageLimits`, the model's parameters) on encoded bytes, on the pixels decoded, and on the
  size a JPEG header may claim. A digit needs 28x28 pixels; the limits admit a screenshot or a page scan as
  PNG and a phone photo as JPEG. JPEGs are decoded at reduced size by libjpeg (Pillow's draft mode, 1/2 to
  1/8 scale), so a 12-megapixel photo costs what a 0.2-megapixel one does;
* a JPEG whose header claims more pixels than its data can hold is refused as corrupt. Pillow drops libjpeg's
  corrupt-data warnings (its JpegDecode.c discards them), so data that is missing is filled in silently:
  this size check is the part of that damage that can be seen before decoding;
* the work of a JPEG bounded before decoding: libjpeg decodes every scan of a progressive JPEG over all the
  blocks of its component, however few bytes the scan has, so a 12 MP JPEG with one 26-byte scan repeated
  3,000 times (150 KB) took 22 s of CPU to decode, 8 MiB of them would take ~40 min. The scans are counted
  (:func:`_read_jpeg_layout`, before Pillow decodes) and both their number and scans x pixels are limited;
* a CPU-time budget for the whole decoding, checked each time Pillow feeds libjpeg another
  :data:`DECODE_BLOCK` bytes: libjpeg cannot be interrupted in between, so the limits above are what bound
  the work of one block;
* a clear `ImageRejected` message for everything else Pillow raises on bad data, and for images with no digit.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np
from PIL import ExifTags, Image, UnidentifiedImageError

from trt_plugin_kit.models import mnist

ACCEPTED_FORMATS = ("PNG", "JPEG")
JPEG_FORMATS = ("JPEG", "MPO")  # Pillow names a JPEG with a multi-picture (camera) segment MPO
# JPEGs larger than this are decoded at the largest of 1/2, 1/4, 1/8 scale that keeps both sides >= it.
JPEG_DRAFT_SIDE = 256
# Pillow feeds the decoder this many bytes at a time (its default: 64 KiB); the CPU-time budget is checked in
# between. A scan of a 12 MP progressive JPEG can be 26 bytes and take 9 ms, so a block is at most ~0.4 s of
# work; smaller blocks cost more Python: 1 KiB blocks add ~20 ms to an 8 MB photo (4 KiB: ~15 ms).
DECODE_BLOCK = 1024


@dataclass(frozen=True)
class ImageLimits:
    """Per-image limits; the `mnist_preprocess` parameters of the same names (config.pbtxt) override them."""

    max_image_bytes: int = 8 * 1024 * 1024  # encoded size: a phone photo is 2-5 MB
    max_image_pixels: int = 4 * 1024 * 1024  # pixels decoded: PNG as sent, JPEG after reduced-size decoding
    max_jpeg_pixels: int = 16 * 1024 * 1024  # what a JPEG header may claim: 4032x3024 phone photos fit
    # Scans (SOS segments) in a JPEG. libjpeg's progressive script writes 6 (grey), 10 (YCbCr) or 6 per
    # component (24 for CMYK); mozjpeg's scan optimisation picks its scans among 64 candidates (YCbCr);
    # a baseline JPEG has 1 (or 1 per component). 100 is above every encoder's output and still 40 times
    # less work than 4,000 scans. (NVIDIA's nvImageCodec refuses more than 256 by default.)
    max_jpeg_scans: int = 100
    # Scans x the pixels the header claims: libjpeg decodes every scan over all the blocks of its component,
    # at up to ~0.9 ns per pixel (AMD EPYC core) for a scan of a few bytes. 24 scans of the largest JPEG
    # admitted (max_jpeg_pixels): a 12 MP photo may have 33 scans, a 4 MP one 96, a 1 MP one the 100 of
    # max_jpeg_scans. At most ~0.4 s of scan decoding, whatever the bytes.
    max_jpeg_scan_pixels: int = 24 * 16 * 1024 * 1024
    # CPU time of the decoding thread (other load on the machine does not count) for reading the header and
    # decoding, checked between the DECODE_BLOCK-byte blocks fed to the decoder: a bound on what the limits
    # above do not foresee. A 12 MP phone photo takes 0.06 s (baseline) to 0.4 s (8 MB progressive 4:4:4).
    max_decode_cpu_ms: int = 2000

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
    source = _BudgetedReader(data, limits.max_decode_cpu_ms)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            Image.MAX_IMAGE_PIXELS = max(limits.max_image_pixels, limits.max_jpeg_pixels)
            try:
                image = Image.open(source, formats=ACCEPTED_FORMATS)
            finally:
                Image.MAX_IMAGE_PIXELS = previous_limit
            description = f"{image.format} image"
            _check_size(image, data, limits, source.check)  # from the header, before any pixel is decoded
            image.decodermaxblock = DECODE_BLOCK  # the budget is checked between blocks
            image.load()
            return apply_exif_orientation(image)
    except _OverBudget as error:
        raise ImageRejected(
            f"decoding the {description} was stopped after {error.used_ms:.0f} ms of CPU time; "
            f"the limit is {limits.max_decode_cpu_ms} ms"
        ) from None
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


class _OverBudget(Exception):  # noqa: N818 - internal, turned into ImageRejected by load_image
    def __init__(self, used_ms: float) -> None:
        super().__init__(f"{used_ms:.0f} ms")
        self.used_ms = used_ms


class _BudgetedReader(io.BytesIO):
    """The image bytes as the file Pillow reads, refusing to hand out more once the decoding thread has used
    its CPU time (time.thread_time: the work of this decode, whatever else the machine is doing). Pillow
    reads the header, then feeds the decoder `decodermaxblock` bytes at a time, from Python: between two
    reads libjpeg works uninterrupted, on one block of data."""

    def __init__(self, data: bytes, budget_ms: int) -> None:
        super().__init__(data)
        self._start = time.thread_time()
        self._budget_s = budget_ms / 1000

    def check(self) -> None:
        used = time.thread_time() - self._start
        if used > self._budget_s:
            raise _OverBudget(used * 1000)

    def read(self, size: int | None = -1, /) -> bytes:
        self.check()
        return super().read(size)


def _check_size(
    image: Image.Image, data: bytes, limits: ImageLimits, check_budget: Callable[[], None]
) -> None:
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
    # Enough scans to go over either limit are enough to refuse: counting stops there.
    most_scans = min(limits.max_jpeg_scans, limits.max_jpeg_scan_pixels // (width * height))
    layout = _read_jpeg_layout(data, stop_after_scans=most_scans + 1, check_budget=check_budget)
    _check_jpeg_data_size(layout, len(data), width, height)
    if layout.scans > limits.max_jpeg_scans:
        raise ImageRejected(
            f"JPEG image has more than {limits.max_jpeg_scans} scans; the limit is {limits.max_jpeg_scans} "
            "(encoders write at most a few dozen)"
        )
    if layout.scans * width * height > limits.max_jpeg_scan_pixels:
        raise ImageRejected(
            f"JPEG image is {width}x{height} with at least {layout.scans} scans = "
            f"{layout.scans * width * height} pixels to decode scan by scan; "
            f"the limit is {limits.max_jpeg_scan_pixels}"
        )
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
_SOS, _EOI = 0xDA, 0xD9
# Markers that carry no length: TEM, RST0-7 and SOI (a second SOI is an error to libjpeg; skipping just the
# marker keeps the segments after it in view).
_STANDALONE_MARKERS = {0x01, *range(0xD0, 0xD9)}
# A marker, found the way libjpeg finds one: 0xFF, any 0xFF fill bytes, then a code other than 0x00. Inside
# a scan's entropy-coded data 0xFF00 is a stuffed 0xFF byte; between segments libjpeg skips it as junk, as it
# skips every byte that is not part of a marker. Searching for this from one segment's end to the next marker
# therefore skips the entropy-coded data of a scan, its stuffed bytes and its RSTn markers included.
_MARKER = re.compile(rb"\xff+([^\x00\xff])")


@dataclass
class _JpegLayout:
    frame: int | None = None  # the start-of-frame marker
    components: list[tuple[int, int]] | None = None  # (horizontal, vertical) sampling of each component
    first_scan: int | None = None  # offset of the first start-of-scan marker
    scans: int = 0  # start-of-scan segments before the end-of-image marker (counting stopped at the limit)


def _read_jpeg_layout(data: bytes, stop_after_scans: int, check_budget: Callable[[], None]) -> _JpegLayout:
    """The frame and the scans of a JPEG, from its marker segments as libjpeg reads them: each segment's
    length is skipped (an EXIF thumbnail inside APP1 is not read as scans), and the entropy-coded data after
    each start-of-scan up to the next marker. Reading stops at the end-of-image marker, where libjpeg stops,
    or once `stop_after_scans` scans are counted. Calls `check_budget` every 1024 segments: 8 MiB of empty
    comment segments are 2 million of them, ~4 s of this loop."""
    layout, position, segments = _JpegLayout(), 2, 0  # after SOI
    while layout.scans < stop_after_scans and (match := _MARKER.search(data, position)):
        marker, position, segments = match.group(1)[0], match.end(), segments + 1
        if segments % 1024 == 0:
            check_budget()
        if marker == _EOI:
            break
        if marker in _STANDALONE_MARKERS:
            continue
        length = int.from_bytes(data[position : position + 2], "big")
        if marker in _FRAMES and layout.frame is None:
            layout.frame = marker
            segment = data[position + 2 : position + length]
            layout.components = [(byte >> 4, byte & 15) for byte in segment[7::3]]
        elif marker == _SOS:
            layout.scans += 1
            if layout.first_scan is None:
                layout.first_scan = match.start(1) - 1
        position += max(length, 2)  # libjpeg skips a length below 2 as if it were 2 (its skip_variable)
    return layout


def _check_jpeg_data_size(layout: _JpegLayout, size: int, width: int, height: int) -> None:
    """Refuse a Huffman-coded JPEG whose image data is too short for the size its header claims.

    Every 8x8 block of every component codes its DC coefficient with a Huffman code of at least one bit, so
    the bytes from the first scan on must hold at least (number of blocks) / 8 bytes. libjpeg would fill the
    missing blocks in silently (a few KB claiming 5000x5000 took ~1 s and ~700 MB before this check).
    """
    components = layout.components
    if layout.frame not in _HUFFMAN_FRAMES or not components or min(min(c) for c in components) == 0:
        return
    max_h, max_v = max(h for h, _ in components), max(v for _, v in components)
    blocks = sum(
        math.ceil(math.ceil(width * h / max_h) / 8) * math.ceil(math.ceil(height * v / max_v) / 8)
        for h, v in components
    )
    available = size - (layout.first_scan if layout.first_scan is not None else size)
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
