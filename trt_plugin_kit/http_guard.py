"""A validating HTTP front for tritonserver versions whose JSON inference path trusts the declared shape.

Why: Triton's HTTP frontend before release 2.68.0 (NGC 26.04, fix "Avoid overflows when reading json
inputs") sizes a buffer from an input's declared ``shape`` before it looks at the ``data``. A ~90-byte
request declaring ``[9223372036854775807,1,28,28]`` aborts the whole server (std::length_error /
std::bad_alloc, signal 6); ``[1000000,1,28,28]`` makes it allocate gigabytes before answering. The CPU
variant runs Triton 2.51 (the newest in the nvidia-pytriton wheel), which has neither that fix nor
``--http-max-input-size``.

What: an asyncio reverse proxy on the public HTTP port, tritonserver's own HTTP port on a private loopback
port behind it. Every request passes through unchanged, except that an inference request is refused with
Triton's own error format (HTTP 400 / 413, ``{"error": "..."}``) before it reaches Triton when

- its body (after gzip/deflate decoding, which aiohttp bounds by the same limit) is larger than
  ``max_input_bytes``;
- its JSON header is not an object with a list of ``inputs``, each with a ``name``, a known ``datatype``
  and a ``shape`` of non-negative integers;
- a dimension is 2^31 or more (Triton keeps 32 bits of batch sizes and would answer for another shape);
- the declared shape needs more than ``max_input_bytes`` bytes;
- JSON ``data`` holds another number of elements than the shape declares.

gRPC and the HTTP binary-data extension size their buffers from the bytes actually received and are not
affected. Run as ``python -m trt_plugin_kit.http_guard --listen HOST:PORT --upstream HOST:PORT``;
:class:`trt_plugin_kit.serving.TritonServer` starts it where the tritonserver version needs it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import re
import sys

import aiohttp
from aiohttp import web

log = logging.getLogger("trt_plugin_kit.http_guard")

# Same limit as the one the TensorRT variant gives newer Triton releases (--http-max-input-size).
DEFAULT_MAX_INPUT_BYTES = 32 * 1024 * 1024
# Triton truncates dimensions to 32 bits on some paths; nothing this kit serves comes near it.
MAX_DIMENSION = 2**31 - 1
DATATYPE_BYTES = {
    "BOOL": 1,
    "UINT8": 1,
    "INT8": 1,
    "UINT16": 2,
    "INT16": 2,
    "FP16": 2,
    "BF16": 2,
    "UINT32": 4,
    "INT32": 4,
    "FP32": 4,
    "UINT64": 8,
    "INT64": 8,
    "FP64": 8,
    "BYTES": None,  # variable length: bounded by the body size
}
INFER_PATH = re.compile(r"^/v2/models/[^/]+(/versions/[^/]+)?/infer$")
HEADER_LENGTH = "Inference-Header-Content-Length"
# Hop-by-hop headers and those aiohttp recomputes for the forwarded message.
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "host",
    "content-length",
}
# aiohttp has already decoded a gzip/deflate request body (within client_max_size): forward it plain.
# Responses keep their Content-Encoding: Triton's compressed body passes through as it is.
_NOT_FORWARDED_UP = _HOP_BY_HOP | {"content-encoding"}


class Refused(Exception):
    """An inference request that must not reach tritonserver; ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def count_elements(data) -> int:
    """Number of scalars in a JSON ``data`` value (nested lists flatten, as Triton reads them)."""
    count, stack = 0, [data]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        else:
            count += 1
    return count


def check_inference_header(header: dict, max_input_bytes: int) -> None:
    """Refuse inputs whose declared shape Triton's JSON path would size a buffer from; see module doc."""
    if not isinstance(header, dict):
        raise Refused("the inference request must be a JSON object")
    inputs = header.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise Refused("the inference request needs a non-empty list 'inputs'")
    total = 0
    for position, tensor in enumerate(inputs):
        if not isinstance(tensor, dict):
            raise Refused(f"inputs[{position}] must be a JSON object")
        name = tensor.get("name")
        label = f"input {name!r}" if isinstance(name, str) else f"inputs[{position}]"
        if not isinstance(name, str):
            raise Refused(f"{label} has no 'name'")
        datatype = tensor.get("datatype")
        if datatype not in DATATYPE_BYTES:
            raise Refused(f"{label} has an unknown datatype {datatype!r}")
        shape = tensor.get("shape")
        if not isinstance(shape, list) or any(type(d) is not int or d < 0 for d in shape):
            raise Refused(f"{label}: 'shape' must be a list of non-negative integers, got {shape!r}")
        too_large = [d for d in shape if d > MAX_DIMENSION]
        if too_large:
            raise Refused(f"{label}: dimension {too_large[0]} in shape {shape} is above {MAX_DIMENSION}")
        elements = math.prod(shape)
        item_bytes = DATATYPE_BYTES[datatype]
        if item_bytes is not None:
            declared_bytes = elements * item_bytes
            if declared_bytes > max_input_bytes:
                raise Refused(
                    f"{label}: shape {shape} of {datatype} needs {declared_bytes} bytes; this server accepts "
                    f"at most {max_input_bytes} bytes per request",
                    status=413,
                )
            total += declared_bytes
        if "data" in tensor:
            received = count_elements(tensor["data"])
            if received != elements:
                raise Refused(
                    f"{label}: shape {shape} declares {elements} elements but 'data' holds {received}"
                )
    if total > max_input_bytes:
        raise Refused(
            f"the inputs declare {total} bytes in all; this server accepts at most {max_input_bytes}", 413
        )


def check_inference_request(body: bytes, header_length: str | None, max_input_bytes: int) -> None:
    """Validate the JSON part of a KServe v2 inference body (all of it, or the binary extension's header)."""
    json_part = body
    if header_length is not None:
        try:
            length = int(header_length)
        except ValueError:
            raise Refused(f"{HEADER_LENGTH} must be an integer, got {header_length!r}") from None
        if not 0 <= length <= len(body):
            raise Refused(f"{HEADER_LENGTH} is {length} but the body has {len(body)} bytes")
        json_part = body[:length]
    try:
        header = json.loads(json_part)
    except (ValueError, RecursionError) as error:
        raise Refused(f"the inference request is not valid JSON: {error}") from None
    check_inference_header(header, max_input_bytes)


def error_response(message: str, status: int) -> web.Response:
    return web.json_response({"error": message}, status=status)


class Guard:
    """The proxy: one aiohttp server, one pooled client session to tritonserver's private HTTP port."""

    def __init__(self, upstream: str, max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES):
        self.upstream = f"http://{upstream}"
        self.max_input_bytes = max_input_bytes
        self.session: aiohttp.ClientSession | None = None

    def application(self) -> web.Application:
        # One byte over the limit is enough to tell "too large"; aiohttp answers 413 past client_max_size.
        app = web.Application(client_max_size=self.max_input_bytes + 1)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, _app) -> None:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=False),
            auto_decompress=False,  # pass Triton's compressed responses through as they are
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
        )

    async def _close(self, _app) -> None:
        if self.session is not None:
            await self.session.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return error_response(
                f"the request body is too large: this server accepts at most {self.max_input_bytes} bytes",
                413,
            )
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED_UP}
        if request.method == "POST" and INFER_PATH.match(request.path):
            try:
                check_inference_request(body, request.headers.get(HEADER_LENGTH), self.max_input_bytes)
            except Refused as refusal:
                log.info("refused %s from %s: %s", request.path, request.remote, refusal)
                return error_response(str(refusal), refusal.status)
        try:
            async with self.session.request(
                request.method,
                self.upstream + request.rel_url.raw_path_qs,
                headers=headers,
                data=body,
                # Forward the client's own Accept-Encoding/User-Agent only, never aiohttp's defaults.
                skip_auto_headers=("Accept-Encoding", "User-Agent"),
            ) as upstream:
                payload = await upstream.read()
                response = web.Response(status=upstream.status, body=payload)
                for key, value in upstream.headers.items():
                    if key.lower() not in _HOP_BY_HOP:
                        response.headers.add(key, value)
                return response
        except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError) as error:
            # tritonserver is restarting or gone: say so, as a load balancer would.
            return error_response(f"the inference server is not reachable right now ({error})", 503)


def parse_endpoint(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, help="HOST:PORT to serve on (the public HTTP port)")
    parser.add_argument("--upstream", required=True, help="HOST:PORT of tritonserver's private HTTP port")
    parser.add_argument("--max-input-bytes", type=int, default=DEFAULT_MAX_INPUT_BYTES)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="http_guard: %(message)s", stream=sys.stderr)
    host, port = parse_endpoint(args.listen)
    guard = Guard(args.upstream, args.max_input_bytes)
    # run_app stops gracefully on SIGINT and SIGTERM.
    web.run_app(guard.application(), host=host, port=port, print=None, access_log=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
