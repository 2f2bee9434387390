"""Crafted inputs for the attack tests (issue 18): images that broke the decoder or cost too much, mutated
images for fuzzing, and inference requests only a hand-built HTTP or gRPC message can carry (tritonclient
refuses to build a batch size of 2^32 or more)."""

from __future__ import annotations

import io
import json
import struct
import sys
import urllib.error
import urllib.request

import grpc
import numpy as np
from PIL import Image
from tritonclient.grpc import service_pb2, service_pb2_grpc

from trt_plugin_kit.interface import REPO_ROOT

# Triton keeps the low 32 bits of a declared batch size: 2^32 rows arrive with no batch dimension.
WRAPPING_BATCH = 2**32


def encode(image: Image.Image, image_format: str = "PNG", **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=image_format, **options)
    return buffer.getvalue()


def on_paper(digit: np.ndarray, size: tuple[int, int]) -> Image.Image:
    """An MNIST digit as dark ink on white paper, resized to `size` (width, height), RGB: photo-like."""
    return Image.fromarray(255 - digit).resize(size, Image.Resampling.BICUBIC).convert("RGB")


# ------------------------------------------------------------------------------------------------ EXIF


def exif_segment(entries: list[tuple[int, int, int, bytes]]) -> bytes:
    """An EXIF block (little-endian TIFF, one IFD) from hand-made (tag, type, count, value bytes) entries;
    values longer than 4 bytes go after the IFD, as the TIFF format stores them."""
    ifd_end = 8 + 2 + 12 * len(entries) + 4
    ifd, values = struct.pack("<H", len(entries)), b""
    for tag, kind, count, value in entries:
        if len(value) <= 4:
            ifd += struct.pack("<HHI", tag, kind, count) + value.ljust(4, b"\0")
        else:
            ifd += struct.pack("<HHII", tag, kind, count, ifd_end + len(values))
            values += value
    return b"Exif\0\0" + b"II*\0" + struct.pack("<I", 8) + ifd + struct.pack("<I", 0) + values


ORIENTATION, X_RESOLUTION, SAMPLES_PER_PIXEL = 0x0112, 0x011A, 0x0115
SHORT, ASCII, SSHORT = 3, 2, 8
ROTATED_90 = struct.pack("<H", 6)  # EXIF Orientation 6: the picture must be turned 90 degrees clockwise

# Orientation 6 plus one malformed tag each: ImageOps.exif_transpose rewrote the EXIF block after turning the
# picture and raised on the malformed tag (issue 18 item 2; Pillow 13).
MALFORMED_EXIF = {
    # XResolution (a RATIONAL) stored as text: TypeError in the rewrite.
    "resolution as text": [(ORIENTATION, SHORT, 1, ROTATED_90), (X_RESOLUTION, ASCII, 8, b"72 dpi\0\0")],
    # A SHORT tag stored as a negative SSHORT: struct.error in the rewrite.
    "negative short": [
        (ORIENTATION, SHORT, 1, ROTATED_90),
        (SAMPLES_PER_PIXEL, SSHORT, 1, struct.pack("<h", -3)),
    ],
}


def jpeg_with_exif(digit: np.ndarray, entries) -> bytes:
    """The 28x28 digit (white on black, like MNIST) as a small JPEG carrying the given EXIF entries."""
    return encode(Image.fromarray(digit), "JPEG", quality=90, exif=exif_segment(entries))


# ------------------------------------------------------------------------------------------------ bombs


def jpeg_claiming_more_than_it_holds(digit: np.ndarray, size=(4000, 4000), keep_bytes=3000) -> bytes:
    """A real JPEG of `size` cut to its headers and the first `keep_bytes` of image data, then closed with an
    end-of-image marker: libjpeg fills the missing blocks in silently (Pillow shows none of its warnings)."""
    full = encode(on_paper(digit, size), "JPEG", quality=90)
    scan = full.index(b"\xff\xda")
    data_start = scan + 2 + int.from_bytes(full[scan + 2 : scan + 4], "big")
    return full[: data_start + keep_bytes] + b"\xff\xd9"


# ------------------------------------------------------------------------------------------------ fuzzing

MUTATIONS = ("bit flips", "header bit flips", "truncation", "header field edit", "duplicated run")


def mutate(data: bytes, kind: str, rng: np.random.Generator) -> bytes:
    """One mutation of encoded image bytes (the header is the first 256 bytes: sizes, modes, tables)."""
    buffer = bytearray(data)
    header = min(len(buffer), 256)
    if kind in ("bit flips", "header bit flips"):
        span = header if kind == "header bit flips" else len(buffer)
        for _ in range(int(rng.integers(1, 9))):
            buffer[int(rng.integers(0, span))] ^= 1 << int(rng.integers(0, 8))
    elif kind == "truncation":
        del buffer[int(rng.integers(1, len(buffer))) :]
    elif kind == "header field edit":
        start = int(rng.integers(0, header))
        for offset in range(start, min(start + int(rng.integers(1, 5)), len(buffer))):
            buffer[offset] = int(rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]))
    elif kind == "duplicated run":
        start = int(rng.integers(0, len(buffer)))
        run = bytes(buffer[start : start + int(rng.integers(1, 64))])
        at = int(rng.integers(0, len(buffer)))
        buffer[at:at] = run
    else:
        raise ValueError(f"unknown mutation {kind!r}")
    return bytes(buffer)


def fuzz_seeds(digit: np.ndarray) -> dict[str, bytes]:
    """Valid PNGs and JPEGs of one digit (modes, progressive, EXIF rotation, malformed EXIF) to mutate."""
    paper = Image.fromarray(255 - digit).resize((112, 112), Image.Resampling.BICUBIC)
    return {
        "28x28 PNG": encode(Image.fromarray(digit)),
        "RGBA PNG": encode(paper.convert("RGBA")),
        "palette PNG": encode(paper.convert("P")),
        "JPEG": encode(paper.convert("RGB"), "JPEG", quality=80),
        "progressive JPEG": encode(paper, "JPEG", quality=80, progressive=True),
        "rotated JPEG": jpeg_with_exif(digit, [(ORIENTATION, SHORT, 1, ROTATED_90)]),
        **{f"JPEG with {name}": jpeg_with_exif(digit, entries) for name, entries in MALFORMED_EXIF.items()},
    }


def mutated_images(seeds: dict[str, bytes], count: int, seed: int) -> list[tuple[str, bytes]]:
    """`count` (description, bytes) cases: the seeds themselves first, then mutations cycling over the seeds
    and the mutation kinds, from a fixed random seed."""
    rng = np.random.default_rng(seed)
    cases = list(seeds.items())
    names = list(seeds)
    while len(cases) < count:
        index = len(cases)
        name, kind = names[index % len(names)], MUTATIONS[(index // len(names)) % len(MUTATIONS)]
        cases.append((f"#{index} {kind} of {name}", mutate(seeds[name], kind, rng)))
    return cases[:count]


# -------------------------------------------------------------------------------------------- raw requests


def bytes_tensor(blobs: list[bytes]) -> bytes:
    """Triton's BYTES wire format: each element as a 4-byte little-endian length and its bytes."""
    return b"".join(struct.pack("<I", len(blob)) + blob for blob in blobs)


def http_binary_infer(url: str, model: str, name: str, datatype: str, shape: list[int], raw: bytes):
    """POST one input with Triton's binary-data extension: the JSON header declares `shape` whatever `raw`
    holds. Returns (HTTP status, parsed JSON header of the answer)."""
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": name,
                    "shape": shape,
                    "datatype": datatype,
                    "parameters": {"binary_data_size": len(raw)},
                }
            ]
        }
    ).encode()
    request = urllib.request.Request(
        f"http://{url}/v2/models/{model}/infer",
        data=header + raw,
        method="POST",
        headers={
            "Inference-Header-Content-Length": str(len(header)),
            "Content-Type": "application/octet-stream",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            body, length = response.read(), response.headers.get("Inference-Header-Content-Length")
            return response.status, json.loads(body[: int(length)] if length else body)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def grpc_raw_infer(url: str, model: str, name: str, datatype: str, shape: list[int], raw: bytes):
    """One ModelInferRequest with `raw` as raw_input_contents and the declared `shape`. Returns
    ("OK", {output name: shape}) or (status code name, error details)."""
    with grpc.insecure_channel(url) as channel:
        request = service_pb2.ModelInferRequest(model_name=model)
        tensor = request.inputs.add()
        tensor.name, tensor.datatype = name, datatype
        tensor.shape.extend(shape)
        request.raw_input_contents.append(raw)
        try:
            response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=60)
        except grpc.RpcError as error:
            return error.code().name, error.details()
        return "OK", {output.name: list(output.shape) for output in response.outputs}


def assert_no_server_internals(message: str) -> None:
    """What reaches a client must not show the server's code: no traceback, no source paths."""
    for leak in ("Traceback", "At:\n", ".py(", '.py"', "site-packages", str(REPO_ROOT), sys.prefix):
        assert leak not in message, f"server internals ({leak!r}) in an error message: {message!r}"
