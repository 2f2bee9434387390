"""The image guard of mnist_preprocess (trt_plugin_kit/serving/preprocess.py) on its own, without a
server: formats, limits, reduced-size JPEG decoding, malformed metadata, and a fuzz of the decoder with
mutated images. The same attacks against the running server are in test_security.py."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
from hostile_inputs import (
    MALFORMED_EXIF,
    encode,
    fuzz_seeds,
    jpeg_claiming_more_than_it_holds,
    jpeg_with_exif,
    mutated_images,
    on_paper,
)
from PIL import Image

from trt_plugin_kit.models import mnist
from trt_plugin_kit.serving.preprocess import (
    DEFAULT_LIMITS,
    JPEG_DRAFT_SIDE,
    ImageLimits,
    ImageRejected,
    decode_digit,
    load_image,
)

FUZZ_CASES = 400
FUZZ_SEED = 18  # issue 18


@pytest.fixture(scope="module")
def digit():
    return mnist.load_split().validation_images[0]


def test_a_dev_digit_png_decodes_to_exactly_the_training_tensor(digit):
    np.testing.assert_array_equal(decode_digit(encode(Image.fromarray(digit))), mnist.to_tensor(digit))


@pytest.mark.parametrize("mode", ["L", "RGB", "RGBA", "LA", "P"])
def test_every_colour_mode_decodes_to_the_model_input(digit, mode):
    big = Image.fromarray(255 - digit).resize((112, 112), Image.Resampling.BICUBIC)  # dark ink on paper
    tensor = decode_digit(encode(big.convert(mode)))
    assert tensor.shape == (1, 28, 28) and tensor.dtype == np.float32
    assert 0.0 <= tensor.min() and tensor.max() <= 1.0
    # The digit ends up white on black, like the training data: bright centre of mass, dark border.
    assert tensor[0, 0, :].max() < 0.1 and tensor.max() > 0.9


def test_transparent_canvas_with_dark_strokes_is_read_as_a_digit(digit):
    rgba = np.zeros((28, 28, 4), dtype=np.uint8)  # black strokes, alpha = ink, fully transparent elsewhere
    rgba[..., 3] = digit
    tensor = decode_digit(encode(Image.fromarray(rgba, mode="RGBA")))
    assert tensor.max() > 0.9 and tensor[0, 0, :].max() < 0.1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"GIF89a" + bytes(100), "not a PNG or JPEG image"),
        (b"%PDF-1.7 not an image", "not a PNG or JPEG image"),
    ],
)
def test_what_is_not_a_png_or_jpeg_is_rejected(data, message):
    with pytest.raises(ImageRejected, match=message):
        decode_digit(data)


def test_gif_is_rejected_even_when_pillow_could_read_it(digit):
    with pytest.raises(ImageRejected, match="not a PNG or JPEG"):
        decode_digit(encode(Image.fromarray(digit), "GIF"))


def test_truncated_png_and_jpeg_are_reported_as_corrupt(digit):
    image = Image.fromarray(digit).resize((200, 200))
    for image_format in ("PNG", "JPEG"):
        data = encode(image, image_format)
        with pytest.raises(ImageRejected, match=f"corrupt {image_format} image"):
            decode_digit(data[: len(data) // 2])


@pytest.mark.parametrize("level", [0, 255])
def test_blank_images_have_no_digit_at_any_size(level):
    """A blank 28x28 used to take the MNIST shortcut and was classified "1" (issue 18 item 7)."""
    for size in (28, 64):
        with pytest.raises(ImageRejected, match="no digit"):
            decode_digit(encode(Image.new("L", (size, size), level)))


# ------------------------------------------------------------------------------------- limits


def test_byte_limit_is_enforced_before_decoding():
    with pytest.raises(ImageRejected, match="1025 bytes; the limit is 1024"):
        load_image(b"\x89PNG" + bytes(1021), ImageLimits(max_image_bytes=1024))


def test_png_pixel_limit_is_enforced_from_the_header():
    data = encode(Image.new("L", (120, 100)))
    with pytest.raises(ImageRejected, match="120x100 = 12000 pixels"):
        load_image(data, ImageLimits(max_image_pixels=10_000))
    assert load_image(data, ImageLimits(max_image_pixels=12_000)).size == (120, 100)


def test_default_limits_are_set_by_what_a_digit_photo_needs(digit):
    """PNGs up to 4 MiP; a JPEG header may claim 16 MiP (a 12 MP phone photo, decoded by libjpeg at 1/8)."""
    assert DEFAULT_LIMITS.max_image_pixels == 4 * 1024 * 1024
    assert DEFAULT_LIMITS.max_jpeg_pixels == 16 * 1024 * 1024
    with pytest.raises(ImageRejected, match="2100x2100 = 4410000 pixels"):
        load_image(encode(Image.new("L", (2100, 2100))))
    with pytest.raises(ImageRejected, match="25000000 pixels"):
        load_image(encode(Image.new("L", (5000, 5000)), "JPEG", quality=10))


def test_large_jpegs_are_decoded_at_reduced_size(digit):
    photo = encode(on_paper(digit, (4032, 3024)), "JPEG", quality=90)  # a phone photo's size
    assert load_image(photo).size == (504, 378)  # 1/8 scale
    medium = encode(on_paper(digit, (700, 600)), "JPEG", quality=90)
    assert load_image(medium).size == (350, 300)  # 1/2: both sides stay >= JPEG_DRAFT_SIDE
    small = encode(on_paper(digit, (300, 300)), "JPEG", quality=90)
    assert load_image(small).size == (300, 300) and 300 < 2 * JPEG_DRAFT_SIDE
    assert decode_digit(photo).shape == (1, 28, 28)


def test_the_decoded_pixel_limit_applies_to_jpegs_after_reduction(digit):
    photo = encode(on_paper(digit, (1024, 1024)), "JPEG", quality=50)  # decoded at 1/4: 256x256
    with pytest.raises(ImageRejected, match="256x256 = 65536 pixels at reduced size"):
        load_image(photo, ImageLimits(max_image_pixels=60_000))
    with pytest.raises(ImageRejected, match="1024x1024 = 1048576 pixels; the limit is 1000000"):
        load_image(photo, ImageLimits(max_jpeg_pixels=1_000_000))


def test_a_jpeg_claiming_more_pixels_than_its_data_can_hold_is_corrupt(digit):
    """A few KB claiming 4000x4000: libjpeg would fill in the missing blocks silently (issue 18 item 6)."""
    crafted = jpeg_claiming_more_than_it_holds(digit, (4000, 4000), keep_bytes=3000)
    assert len(crafted) < 4000
    with pytest.raises(ImageRejected, match="corrupt JPEG image data: .* cannot hold the 4000x4000 pixels"):
        load_image(crafted)
    # Junk between segments (which decoders skip) does not hide it.
    scan = crafted.index(b"\xff\xda")
    with pytest.raises(ImageRejected, match="cannot hold"):
        load_image(crafted[:scan] + b"\x00\x00" + crafted[scan:])


@pytest.mark.parametrize("progressive", [False, True])
def test_complete_jpegs_pass_the_data_size_check(digit, progressive):
    for size in ((4032, 3024), (1000, 1000), (29, 31)):
        for colour in ("L", "RGB"):
            image = on_paper(digit, size).convert(colour)
            data = encode(image, "JPEG", quality=5, progressive=progressive)  # as small as JPEG gets
            assert load_image(data).size[0] >= 1


# ------------------------------------------------------------------------------------- work per JPEG

# The scan limits turned off, to show what the CPU budget stops on its own.
NO_SCAN_LIMITS = ImageLimits(max_jpeg_scans=10**9, max_jpeg_scan_pixels=10**18)


def with_repeated_scan(data: bytes, copies: int, separator: bytes = b"") -> bytes:
    """A valid progressive JPEG with its last scan (header and data, a few bytes) repeated `copies` times
    before the end-of-image marker: libjpeg decodes every copy over all the blocks of the image. At 12 MP,
    3,000 copies of a 26-byte scan (150 KB) took 22 s of CPU to decode before the scans were counted."""
    last_scan, end = data.rindex(b"\xff\xda"), data.rindex(b"\xff\xd9")
    return data[:end] + (separator + data[last_scan:end]) * copies + data[end:]


def white_progressive(size: tuple[int, int], mode: str = "RGB") -> bytes:
    return encode(Image.new(mode, size, "white"), "JPEG", quality=5, progressive=True)


def timed_load(data: bytes, limits: ImageLimits = DEFAULT_LIMITS):
    """(seconds, the decoded image or the ImageRejected message)."""
    start = time.perf_counter()
    try:
        outcome = load_image(data, limits)
    except ImageRejected as error:
        outcome = str(error)
    return time.perf_counter() - start, outcome


def test_a_phone_photo_sized_jpeg_repeating_one_scan_is_refused_before_decoding():
    hostile = with_repeated_scan(white_progressive((4032, 3024)), 3000)
    assert len(hostile) < 200_000
    seconds, outcome = timed_load(hostile)
    assert outcome == (
        "JPEG image is 4032x3024 with at least 34 scans = 414554112 pixels to decode scan by scan; "
        f"the limit is {DEFAULT_LIMITS.max_jpeg_scan_pixels}"
    )
    assert seconds < 0.5


@pytest.mark.parametrize("separator", [b"", b"\xff\xd0", b"\x00\xff\x00junk"], ids=["plain", "RST", "junk"])
def test_a_small_jpeg_with_more_scans_than_any_encoder_writes_is_refused(separator):
    """Restart markers and junk between the copies (libjpeg skips both) do not hide the scans."""
    hostile = with_repeated_scan(white_progressive((640, 480)), 2000, separator)
    seconds, outcome = timed_load(hostile)
    assert (
        outcome == "JPEG image has more than 100 scans; the limit is 100 (encoders write at most a few dozen)"
    )
    assert seconds < 0.5


def test_the_scan_limit_is_exact():
    colour = white_progressive((300, 300))  # libjpeg's progressive script: 10 scans for YCbCr
    assert load_image(with_repeated_scan(colour, 90)).size == (300, 300)
    with pytest.raises(ImageRejected, match="more than 100 scans"):
        load_image(with_repeated_scan(colour, 91))
    grey = white_progressive((300, 300), "L")  # 6 scans
    assert load_image(grey, ImageLimits(max_jpeg_scans=6)).size == (300, 300)
    with pytest.raises(ImageRejected, match="more than 5 scans; the limit is 5"):
        load_image(grey, ImageLimits(max_jpeg_scans=5))


def test_scans_are_counted_as_libjpeg_reads_them():
    """Entropy-coded data with stuffed 0xFF00 bytes and RSTn markers is skipped, and so is the content of
    segments: a JPEG inside a comment (as an EXIF thumbnail is inside APP1) has no scans of this image."""
    noisy = Image.fromarray(np.random.default_rng(23).integers(0, 256, (240, 320, 3), dtype=np.uint8))
    data = encode(noisy, "JPEG", quality=95, progressive=True, restart_marker_blocks=4)
    assert b"\xff\x00" in data and b"\xff\xd0" in data and data.count(b"\xff\xda") == 10
    inner = white_progressive((64, 64))
    comment = b"\xff\xfe" + (len(inner) + 2).to_bytes(2, "big") + inner
    data = data[:2] + comment + data[2:]
    assert data.count(b"\xff\xda") == 20
    assert load_image(data, ImageLimits(max_jpeg_scans=10)).size == (320, 240)
    with pytest.raises(ImageRejected, match="more than 9 scans"):
        load_image(data, ImageLimits(max_jpeg_scans=9))
    # Scans after the end-of-image marker are never decoded and do not count.
    trailing = data + with_repeated_scan(inner, 200)
    assert load_image(trailing, ImageLimits(max_jpeg_scans=10)).size == (320, 240)


def test_the_scan_pixel_limit_admits_every_encoders_scans_at_phone_photo_size():
    """24 scans of the largest JPEG admitted (16 MiP): a 12 MP photo may have 33, libjpeg writes 10."""
    assert DEFAULT_LIMITS.max_jpeg_scan_pixels == 24 * DEFAULT_LIMITS.max_jpeg_pixels
    photo = white_progressive((4032, 3024))
    assert load_image(with_repeated_scan(photo, 23)).size == (504, 378)  # 33 scans
    with pytest.raises(ImageRejected, match="at least 34 scans"):
        load_image(with_repeated_scan(photo, 24))


@pytest.mark.parametrize(
    "options",
    [
        {"quality": 90},
        {"quality": 90, "progressive": True},
        {"quality": 85, "progressive": True, "subsampling": 0},
    ],
    ids=["baseline", "progressive", "progressive 4:4:4"],
)
def test_phone_photos_decode_well_within_the_cpu_budget(digit, options):
    photo = np.asarray(on_paper(digit, (4032, 3024)), dtype=np.int16)
    grain = np.random.default_rng(23).integers(-40, 40, photo.shape, dtype=np.int16)  # sensor noise: MBs
    data = encode(Image.fromarray(np.clip(photo + grain, 0, 255).astype(np.uint8)), "JPEG", **options)
    assert 2_000_000 < len(data) <= DEFAULT_LIMITS.max_image_bytes
    start = time.thread_time()
    assert decode_digit(data).shape == (1, 28, 28)
    assert time.thread_time() - start < DEFAULT_LIMITS.max_decode_cpu_ms / 1000 / 2


def test_the_cpu_budget_stops_a_decode_the_limits_let_through():
    """With the scan limits off, the repeated scan is stopped by the CPU budget, checked between the blocks
    of data libjpeg is fed (unlimited, this file takes ~5 s)."""
    hostile = with_repeated_scan(white_progressive((2048, 2048)), 2000)
    start = time.thread_time()
    with pytest.raises(
        ImageRejected,
        match=r"decoding the JPEG image was stopped after \d+ ms of CPU time; the limit is 100 ms",
    ):
        load_image(hostile, dataclasses.replace(NO_SCAN_LIMITS, max_decode_cpu_ms=100))
    assert time.thread_time() - start < 1.0


def test_the_cpu_budget_covers_reading_the_segments():
    """8 MiB of empty comment segments between two scans (2 million segments that only this module's
    Python and libjpeg read) are stopped too, by the same budget."""
    data = white_progressive((64, 64))
    second_scan = data.index(b"\xff\xda", data.index(b"\xff\xda") + 2)
    flood = b"\xff\xfe\x00\x02" * (2 * 1024 * 1024 - 1024)
    start = time.thread_time()
    with pytest.raises(ImageRejected, match=r"stopped after \d+ ms of CPU time; the limit is 100 ms"):
        load_image(data[:second_scan] + flood + data[second_scan:], ImageLimits(max_decode_cpu_ms=100))
    assert time.thread_time() - start < 1.0


def test_limits_come_from_the_model_parameters():
    limits = ImageLimits.from_parameters({"max_image_bytes": "100", "max_jpeg_pixels": "5"})
    assert limits == ImageLimits(max_image_bytes=100, max_jpeg_pixels=5)
    work = {"max_jpeg_scans": "12", "max_jpeg_scan_pixels": "34", "max_decode_cpu_ms": "56"}
    assert ImageLimits.from_parameters(work) == ImageLimits(
        max_jpeg_scans=12, max_jpeg_scan_pixels=34, max_decode_cpu_ms=56
    )
    with pytest.raises(ValueError, match="max_image_pixel"):
        ImageLimits.from_parameters({"max_image_pixel": "10"})  # a typo must not silently keep a default


def test_the_pixel_limit_does_not_leak_into_the_rest_of_the_process():
    default = Image.MAX_IMAGE_PIXELS
    with pytest.raises(ImageRejected):
        load_image(encode(Image.new("L", (200, 200))), ImageLimits(max_image_pixels=1_000))
    assert Image.MAX_IMAGE_PIXELS == default


# ------------------------------------------------------------------------------------- malformed input


@pytest.mark.parametrize("variant", list(MALFORMED_EXIF))
def test_malformed_exif_does_not_stop_the_rotation(digit, variant):
    """Pillow's exif_transpose raised TypeError / struct.error on these (issue 18 item 2); the picture is fine
    and its orientation tag readable, so it is decoded and turned upright."""
    same_pixels_without_exif = load_image(jpeg_with_exif(digit, []))
    upright = mnist.preprocess_image(same_pixels_without_exif.transpose(Image.Transpose.ROTATE_270))
    np.testing.assert_array_equal(decode_digit(jpeg_with_exif(digit, MALFORMED_EXIF[variant])), upright)
    assert not np.array_equal(upright, mnist.preprocess_image(same_pixels_without_exif))


@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow warns about the corrupt EXIF it skips
def test_fuzzed_images_are_decoded_or_rejected_never_anything_else(digit):
    """Bit flips, truncations, header field edits and duplicated runs of PNG/JPEG seeds (fixed seed): each
    decodes to a valid tensor or raises ImageRejected, whatever Pillow raised inside."""
    surprises = []
    for description, data in mutated_images(fuzz_seeds(digit), FUZZ_CASES, FUZZ_SEED):
        try:
            tensor = decode_digit(data)
        except ImageRejected:
            continue
        except Exception as error:  # noqa: BLE001 - collected and reported below
            surprises.append(f"{description}: {type(error).__name__}: {error}")
            continue
        valid = np.isfinite(tensor).all() and 0 <= tensor.min() <= tensor.max() <= 1
        if tensor.shape != (1, 28, 28) or not valid:
            surprises.append(f"{description}: bad tensor {tensor.shape} {tensor.min()}..{tensor.max()}")
    assert not surprises, f"{len(surprises)} of {FUZZ_CASES} cases:\n" + "\n".join(surprises)
