"""The attacks of issue 23's table, each sent to the edge (trt_plugin_kit/edge) of `triton_server`.

Every one of these killed or opened Triton 2.51 when it held the public ports itself. Each test asserts that
(a) the edge refuses the request itself with a clear error (an HTTP status with Triton's {"error": ...} JSON,
or a gRPC status code), (b) tritonserver was never restarted (same pid, still running, its Python backend
stubs alive: ``is_running()`` watches them) and (c) a good neighbour request is answered afterwards over
HTTP and gRPC (:func:`assert_unharmed`). tritonclient sends what it can; what it cannot build goes out by
http.client, a raw socket, or raw HTTP/2 frames (:class:`RawGrpc`, for metadata grpc refuses to send).

The two stall attacks (class 5) take the edge's whole header and body timeouts: they start when this module
does (:func:`stalled_connections`) and run while the other tests do; their tests, at the end, read the result.
The crash loop (class 9) is tested elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import io
import json
import os
import socket
import stat
import struct
import threading
import time
import urllib.parse
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import grpc
import hpack
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from hostile_inputs import bytes_tensor, encode, grpc_raw_infer, http_binary_infer
from PIL import Image
from tritonclient.grpc import service_pb2 as pb

from trt_plugin_kit.interface import ADMIN_HEADER, GRPC_ADMIN_HEADER, REPO_ROOT
from trt_plugin_kit.serving.edge import limits
from trt_plugin_kit.serving.edge.native_front import native_binary
from trt_plugin_kit.serving.server import python_backend_stubs

SERVICE = "inference.GRPCInferenceService"
DIGIT = REPO_ROOT / "samples" / "digits" / "7.png"
DIGIT_LABEL = 7
# What Triton's restriction was given when no TRITON_ADMIN_KEY was set, before the edge: a client that sent
# this value (with its line break) had the admin APIs.
OLD_FIXED_KEY = "closed\n(no TRITON_ADMIN_KEY was set)"
GOOD_JSON = {"inputs": [{"name": "vector", "shape": [1, 2], "datatype": "FP32", "data": [3, 4]}]}


# ------------------------------------------------------------------------------------------- the checks


@dataclass
class Baseline:
    triton_pid: int
    edge_pid: int
    edge_children: list[int]  # the compiled gRPC front, where it is built


def edge_children(server) -> list[int]:
    pid = server.edge_process.pid
    return sorted(int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())


@pytest.fixture(scope="module")
def baseline(triton_server) -> Baseline:
    assert triton_server.is_running(), triton_server.exit_reason()
    return Baseline(triton_server.process.pid, triton_server.edge_process.pid, edge_children(triton_server))


def assert_unharmed(server, baseline: Baseline) -> None:
    """(b) and (c): the same tritonserver and edge still run, and l2norm answers over both protocols."""
    assert server.is_running(), f"{server.exit_reason()}\n{server.log_tail()}"
    assert server.process.pid == baseline.triton_pid, "tritonserver was restarted"
    assert server.edge_process.pid == baseline.edge_pid, "the edge was restarted"
    assert edge_children(server) == baseline.edge_children, "the edge's gRPC front was restarted"
    for module, url in ((httpclient, server.http_url), (grpcclient, server.grpc_url)):
        client = module.InferenceServerClient(url=url)
        try:
            tensor = module.InferInput("vector", [1, 2], "FP32")
            tensor.set_data_from_numpy(np.array([[3.0, 4.0]], dtype=np.float32))
            result = client.infer("l2norm", [tensor]).as_numpy("normalized")
        finally:
            client.close()
        np.testing.assert_allclose(result, [[0.6, 0.8]], rtol=1e-6)


def assert_pipeline_answers_a_digit(server) -> None:
    blob = DIGIT.read_bytes()
    for module, url in ((httpclient, server.http_url), (grpcclient, server.grpc_url)):
        client = module.InferenceServerClient(url=url)
        try:
            tensor = module.InferInput("image_bytes", [1, 1], "BYTES")
            tensor.set_data_from_numpy(np.array([blob], dtype=np.object_).reshape(1, 1))
            probabilities = client.infer("mnist_pipeline", [tensor]).as_numpy("probabilities")
        finally:
            client.close()
        assert int(np.argmax(probabilities)) == DIGIT_LABEL, (module.__name__, probabilities)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float

    def error(self) -> str:
        """The message of a Triton-style JSON error answer (asserting that it is one)."""
        assert self.headers.get("content-type", "").startswith("application/json"), self
        parsed = json.loads(self.body)
        assert isinstance(parsed, dict) and isinstance(parsed.get("error"), str), parsed
        return parsed["error"]


def http_request(server, method: str, path: str, body: bytes = b"", headers=None, timeout=30.0) -> Answer:
    """One request by http.client, with `path` sent exactly as given."""
    host, _, port = server.http_url.rpartition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    started = time.monotonic()
    try:
        connection.request(method, path, body=body or None, headers=headers or {})
        response = connection.getresponse()
        payload = response.read()
    finally:
        connection.close()
    answer_headers = {key.lower(): value for key, value in response.getheaders()}
    return Answer(response.status, answer_headers, payload, time.monotonic() - started)


def assert_refused(answer: Answer, status: int, *words: str) -> str:
    assert answer.status == status, answer
    message = answer.error()
    for word in words:
        assert word in message, (word, message)
    return message


def raw_http(server, data: bytes, timeout: float = 10.0) -> tuple[int, bytes]:
    """`data` as is on a fresh connection; (status, whole answer until the edge closes it)."""
    host, _, port = server.http_url.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as connection:
        connection.sendall(data)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return status, answer


def grpc_call(server, method: str, message: bytes, metadata=None, timeout=30.0) -> tuple[str, str | bytes]:
    """A unary call with `message` as raw bytes: ("OK", response bytes) or (status code name, details)."""
    with grpc.insecure_channel(server.grpc_url) as channel:
        call = channel.unary_unary(f"/{SERVICE}/{method}")  # no serializers: bytes in, bytes out
        try:
            return "OK", call(message, metadata=metadata, timeout=timeout)
        except grpc.RpcError as error:
            return error.code().name, error.details() or ""


def l2norm_infer_message(vector_bytes: int) -> bytes:
    """A well-formed ModelInferRequest of l2norm holding `vector_bytes` of zeros (one FP32 vector)."""
    message = pb.ModelInferRequest(model_name="l2norm")
    message.inputs.add(name="vector", datatype="FP32", shape=[1, vector_bytes // 4])
    header = message.SerializeToString()
    # raw_input_contents (field 7, length-delimited) appended by hand: no second copy of the zeros.
    return header + b"\x3a" + _varint(vector_bytes) + bytes(vector_bytes)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


# --------------------------------------------------------------------------------------- raw HTTP/2 (gRPC)

NATIVE_GRPC = native_binary() is not None  # the edge's compiled gRPC front serves the gRPC port


def _hpack_integer(value: int, prefix_bits: int, first: int = 0) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    return bytes([first | limit]) + _varint(value - limit)


class RawGrpc:
    """One gRPC call in hand-written HTTP/2 frames: headers go out as HPACK literals, byte for byte, so a
    metadata value may hold what grpc's own client refuses to send (a line break). The answer's headers and
    trailers are read with python-hyper's HPACK decoder (the edge's nghttp2 Huffman-codes them)."""

    PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, CONTINUATION = 0, 1, 3, 4, 6, 7, 9
    END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1

    def __init__(self, url: str):
        self.url = url
        self.decoder = hpack.Decoder()

    @staticmethod
    def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
        return (
            struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload
        )

    @classmethod
    def opening(cls, method: str, metadata: list[tuple[bytes, bytes]], settings: bytes = b"") -> bytes:
        """The connection preface, SETTINGS (`settings`: its payload) and stream 1's request headers (no
        message yet)."""
        headers = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", f"/{SERVICE}/{method}".encode()),
            (b":authority", b"edge"),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
            *metadata,
        ]
        block = b"".join(  # literal header field without indexing, new name
            b"\x00" + _hpack_integer(len(name), 7) + name + _hpack_integer(len(value), 7) + value
            for name, value in headers
        )
        # HTTP/2's default largest frame is 16 KiB: a longer block goes on in CONTINUATION frames.
        pieces = [block[at : at + 16384] for at in range(0, len(block), 16384)]
        frames = [
            cls.frame(
                cls.HEADERS if index == 0 else cls.CONTINUATION,
                cls.END_HEADERS if index == len(pieces) - 1 else 0,
                1,
                piece,
            )
            for index, piece in enumerate(pieces)
        ]
        return cls.PREFACE + cls.frame(cls.SETTINGS, 0, 0, settings) + b"".join(frames)

    @classmethod
    def headers_of(cls, answer: bytes) -> dict[str, str]:
        """Stream 1's headers and trailers in the bytes a connection received (whole frames only)."""
        decoder, fragments, decoded = hpack.Decoder(), b"", {}
        while len(answer) >= 9 and len(answer) >= 9 + int.from_bytes(answer[:3], "big"):
            length, kind, flags = int.from_bytes(answer[:3], "big"), answer[3], answer[4]
            stream = int.from_bytes(answer[5:9], "big") & 0x7FFFFFFF
            payload, answer = answer[9 : 9 + length], answer[9 + length :]
            if kind in (cls.HEADERS, cls.CONTINUATION) and stream == 1:
                fragments += payload
                if flags & cls.END_HEADERS:
                    decoded.update(decoder.decode(fragments, raw=False))
                    fragments = b""
        if "grpc-message" in decoded:
            decoded["grpc-message"] = urllib.parse.unquote(decoded["grpc-message"])
        return decoded

    def call(self, method: str, message: bytes, metadata: list[tuple[bytes, bytes]], timeout=10.0) -> dict:
        """{'grpc-status': ..., 'grpc-message': ...} of the answer, or {'closed': how} without trailers."""
        body = b"\x00" + struct.pack(">I", len(message)) + message
        host, _, port = self.url.rpartition(":")
        answer: dict = {}
        with socket.create_connection((host, int(port)), timeout=timeout) as connection:
            request = self.opening(method, metadata) + self.frame(self.DATA, self.END_STREAM, 1, body)
            connection.sendall(request)
            buffer, fragments = b"", b""
            while "closed" not in answer:
                chunk = connection.recv(65536)
                if not chunk:
                    answer.setdefault("closed", "connection closed")
                    break
                buffer += chunk
                while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
                    length = int.from_bytes(buffer[:3], "big")
                    kind, flags = buffer[3], buffer[4]
                    stream = int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
                    payload, buffer = buffer[9 : 9 + length], buffer[9 + length :]
                    if kind == self.SETTINGS and not flags & self.ACK:
                        connection.sendall(self.frame(self.SETTINGS, self.ACK, 0, b""))
                    elif kind == self.PING and not flags & self.ACK:
                        connection.sendall(self.frame(self.PING, self.ACK, 0, payload))
                    elif kind == self.GOAWAY:
                        answer["closed"] = f"GOAWAY error {int.from_bytes(payload[4:8], 'big')}"
                    elif kind == self.RST_STREAM and stream == 1:
                        answer["closed"] = f"RST_STREAM error {int.from_bytes(payload[:4], 'big')}"
                    elif kind in (self.HEADERS, self.CONTINUATION) and stream == 1:
                        fragments += payload
                        if flags & self.END_HEADERS:
                            answer.update(self.decode(fragments))
                            fragments = b""
                        if flags & self.END_STREAM:
                            answer["closed"] = "end of stream"
        if "grpc-message" in answer:
            answer["grpc-message"] = urllib.parse.unquote(answer["grpc-message"])
        return answer

    def decode(self, block: bytes) -> dict[str, str]:
        return {name: value for name, value in self.decoder.decode(block, raw=False)}


# ---------------------------------------------------------------------------- class 1: admin APIs, no key

HTTP_ADMIN_CALLS = [
    ("POST", "/v2/repository/index", {}),
    ("GET", "/v2/logging", None),
    ("POST", "/v2/logging", {"log_error": False}),  # switch error logging off
    ("GET", "/v2/trace/setting", None),
    ("POST", "/v2/trace/setting", {"trace_level": ["TIMESTAMPS"]}),
    ("POST", "/v2/systemsharedmemory/region/x/register", {"key": "/x", "offset": 0, "byte_size": 16}),
]
GRPC_ADMIN_CALLS = {
    "RepositoryIndex": pb.RepositoryIndexRequest(),
    "LogSettings": pb.LogSettingsRequest(
        settings={"log_error": pb.LogSettingsRequest.SettingValue(bool_param=False)}
    ),
    "TraceSetting": pb.TraceSettingRequest(),
    "SystemSharedMemoryRegister": pb.SystemSharedMemoryRegisterRequest(name="x", key="/x", byte_size=16),
}


@pytest.mark.parametrize("key", [None, "wrong"], ids=["no key", "wrong key"])
def test_http_admin_apis_are_refused_without_the_key(triton_server, baseline, key):
    headers = {} if key is None else {ADMIN_HEADER: key}
    for method, path, body in HTTP_ADMIN_CALLS:
        data = b"" if body is None else json.dumps(body).encode()
        answer = http_request(triton_server, method, path, data, headers)
        assert_refused(answer, 403, "restricted", ADMIN_HEADER)
    assert_unharmed(triton_server, baseline)


LINE_BREAK_HEADERS = {
    "the old fixed key": f"{ADMIN_HEADER}: {OLD_FIXED_KEY}\r\n".encode(),
    "the old key folded": f"{ADMIN_HEADER}: closed\r\n (no TRITON_ADMIN_KEY was set)\r\n".encode(),
    "the right key + LF": None,  # filled in with the server's key
}


def _line_break_header(name: str, server) -> bytes:
    return LINE_BREAK_HEADERS[name] or f"{ADMIN_HEADER}: {server.admin_key}\n\r\n".encode()


@pytest.mark.parametrize("case", list(LINE_BREAK_HEADERS))
def test_http_admin_key_with_a_line_break_is_refused(triton_server, baseline, case):
    """http.client refuses such a header value; a raw socket sends it. aiohttp's parser refuses the message
    (400) before the edge's handler sees it: never an answer of the admin API."""
    request = (
        b"POST /v2/logging HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\n"
        b"Content-Length: 19\r\n" + _line_break_header(case, triton_server) + b"\r\n" + b'{"log_error":false}'
    )
    status, answer = raw_http(triton_server, request)
    assert status == 400, answer
    assert b'"log_error":' not in answer, answer  # no answer of the logging API
    assert_unharmed(triton_server, baseline)


def test_http_messages_the_parser_refuses_are_answered_in_json(triton_server):
    request = (
        b"GET /v2/logging HTTP/1.1\r\nHost: edge\r\n" + LINE_BREAK_HEADERS["the old fixed key"] + b"\r\n"
    )
    status, answer = raw_http(triton_server, request)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert status == 400, answer
    assert b"content-type: application/json" in head.lower(), answer
    assert "error" in json.loads(body), answer


@pytest.mark.parametrize("key", [None, "wrong"], ids=["no metadata", "wrong key"])
def test_grpc_admin_apis_are_refused_without_the_key(triton_server, baseline, key):
    metadata = None if key is None else ((GRPC_ADMIN_HEADER, key),)
    for method, message in GRPC_ADMIN_CALLS.items():
        code, details = grpc_call(triton_server, method, message.SerializeToString(), metadata)
        assert (code, "restricted" in details) == ("UNAVAILABLE", True), (method, code, details)
    assert_unharmed(triton_server, baseline)


def test_grpc_admin_key_with_a_line_break_is_refused(triton_server, baseline):
    """grpc's Python client will not send a metadata value with a line break (it fails the call itself,
    INTERNAL "Invalid metadata"); raw HTTP/2 frames carry it to the edge, which refuses it like any wrong key.
    The same raw client with the right key is answered OK: the refusals are the edge's, not the client's."""
    code, details = grpc_call(
        triton_server, "LogSettings", b"", ((GRPC_ADMIN_HEADER, OLD_FIXED_KEY),), timeout=10
    )
    assert (code, "metadata" in details.lower()) == ("INTERNAL", True), (code, details)

    name = GRPC_ADMIN_HEADER.encode()
    values = [OLD_FIXED_KEY.encode(), f"{triton_server.admin_key}\n".encode()]
    for method, message in GRPC_ADMIN_CALLS.items():
        for value in values:
            answer = RawGrpc(triton_server.grpc_url).call(
                method, message.SerializeToString(), [(name, value)]
            )
            assert answer.get("grpc-status") == str(grpc.StatusCode.UNAVAILABLE.value[0]), (
                method,
                value,
                answer,
            )
            assert "restricted" in answer["grpc-message"], answer
    answer = RawGrpc(triton_server.grpc_url).call(
        "LogSettings", b"", [(name, triton_server.admin_key.encode())]
    )
    assert answer.get("grpc-status") == "0", answer
    assert_unharmed(triton_server, baseline)


@pytest.mark.skipif(not NATIVE_GRPC, reason="the compiled gRPC front is not built (make edge-native)")
def test_grpc_metadata_over_the_limit_is_refused(triton_server, baseline):
    padding = [(b"x-padding", b"a" * limits.MAX_GRPC_METADATA_BYTES)]
    answer = RawGrpc(triton_server.grpc_url).call("ModelInfer", l2norm_infer_message(8), padding)
    assert answer.get("grpc-status") == str(grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]), answer
    assert "metadata is larger than" in answer["grpc-message"], answer
    assert_unharmed(triton_server, baseline)


def test_the_admin_key_opens_the_admin_apis_over_both_protocols(triton_server, baseline):
    """Read-only calls with the operator's key; error logging is still on (no refused call turned it off)."""
    key = {ADMIN_HEADER: triton_server.admin_key}
    answer = http_request(triton_server, "GET", "/v2/logging", headers=key)
    assert answer.status == 200 and json.loads(answer.body)["log_error"] is True, answer
    answer = http_request(triton_server, "POST", "/v2/repository/index", b"{}", key)
    assert answer.status == 200 and "l2norm" in {m["name"] for m in json.loads(answer.body)}, answer

    metadata = ((GRPC_ADMIN_HEADER, triton_server.admin_key),)
    code, raw = grpc_call(triton_server, "LogSettings", b"", metadata)
    assert code == "OK", raw
    assert pb.LogSettingsResponse.FromString(raw).settings["log_error"].bool_param is True
    code, raw = grpc_call(triton_server, "RepositoryIndex", b"", metadata)
    assert code == "OK", raw
    assert "l2norm" in {m.name for m in pb.RepositoryIndexResponse.FromString(raw).models}
    assert_unharmed(triton_server, baseline)


# ------------------------------------------------------------------------- class 2: parser differentials

HUGE = 2**40
DIFFERENTIALS = {
    # Python's json keeps the last of two equal keys, Triton's RapidJSON the first.
    "shape small then huge": (
        f'{{"inputs":[{{"name":"vector","shape":[1,4],"shape":[1,{HUGE}],"datatype":"FP32",'
        '"data":[1,2,3,4]}]}',
        "repeats the key 'shape'",
    ),
    "shape huge then small": (
        f'{{"inputs":[{{"name":"vector","shape":[1,{HUGE}],"shape":[1,4],"datatype":"FP32",'
        '"data":[1,2,3,4]}]}',
        "repeats the key 'shape'",
    ),
    "shape repeated as an escape": (
        f'{{"inputs":[{{"name":"vector","shape":[1,4],"\\u0073hape":[1,{HUGE}],"datatype":"FP32",'
        '"data":[1,2,3,4]}]}',
        "repeats the key 'shape'",
    ),
    "NaN literal": ('{"inputs":[{"name":"vector","shape":[1,2],"datatype":"FP32","data":[NaN,4]}]}', "NaN"),
    "Infinity literal": (
        '{"inputs":[{"name":"vector","shape":[1,2],"datatype":"FP32","data":[Infinity,4]}]}',
        "Infinity",
    ),
    "integer of 40 digits": (
        '{"inputs":[{"name":"vector","shape":[1,' + "1" * 40 + '],"datatype":"FP32","data":[3,4]}]}',
        "integer of 40 digits",
    ),
    "100000-deep nesting": ("[" * 100_000 + "]" * 100_000, "nests JSON too deeply"),
    "100000-deep nesting in data": (
        '{"inputs":[{"name":"vector","shape":[1,2],"datatype":"FP32","data":'
        + "[" * 100_000
        + "]" * 100_000
        + "}]}",
        "nests JSON too deeply",
    ),
}


@pytest.mark.parametrize("case", list(DIFFERENTIALS))
def test_json_the_two_parsers_would_read_differently_is_refused(triton_server, baseline, case):
    body, words = DIFFERENTIALS[case]
    answer = http_request(
        triton_server, "POST", "/v2/models/l2norm/infer", body.encode(), {"Content-Type": "application/json"}
    )
    assert_refused(answer, 400, words)
    assert answer.seconds < 1.0, answer.seconds
    assert_unharmed(triton_server, baseline)


def test_a_json_number_beyond_a_double_is_refused_at_the_edge(triton_server):
    body = b'{"inputs":[{"name":"vector","shape":[1,2],"datatype":"FP32","data":[1e999,4]}]}'
    answer = http_request(triton_server, "POST", "/v2/models/l2norm/infer", body)
    assert answer.status == 400, answer
    message = json.loads(answer.body)["error"]
    assert not message.startswith("l2norm:"), f"refused by the model, not the edge: {message}"
    assert_refused(answer, 400, "JSON")


# ----------------------------------------------------------------------------------------- class 3: paths

GOOD_BODY = json.dumps(GOOD_JSON).encode()


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v2/models/l2norm/./infer", 404),
        ("/v2/models/l2norm/%2e/infer", 404),
        ("/v2/models/%6c2norm/infer", 404),
        ("//v2/models/l2norm/infer", 404),
        ("/v2/models/l2norm/infer?x=1", 404),
        ("/v2/models/l2norm/infer/", 404),
        ("/v2/models/l2norm/../l2norm/infer", 404),
        ("/v2/models/l2norm/generate", 404),
        ("/v2/models/l2norm/generate_stream", 404),
        ("/v2/repository/models/mnist/load", 403),
    ],
)
def test_paths_are_matched_raw_and_never_normalised(triton_server, baseline, path, status):
    answer = http_request(triton_server, "POST", path, GOOD_BODY, {"Content-Type": "application/json"})
    assert_refused(answer, status)
    assert_unharmed(triton_server, baseline)


def test_model_load_is_refused_even_with_the_key_over_both_protocols(triton_server, baseline):
    answer = http_request(
        triton_server,
        "POST",
        "/v2/repository/models/mnist/load",
        b"{}",
        {ADMIN_HEADER: triton_server.admin_key},
    )
    assert_refused(answer, 403, "not allowed")
    for metadata in (None, ((GRPC_ADMIN_HEADER, triton_server.admin_key),)):
        message = pb.RepositoryModelLoadRequest(model_name="mnist").SerializeToString()
        code, details = grpc_call(triton_server, "RepositoryModelLoad", message, metadata)
        assert code == "UNAVAILABLE" and ("restricted" in details or "not allowed" in details), details
    assert_unharmed(triton_server, baseline)


@pytest.mark.parametrize("path", ["/metrics?x=1", "//metrics", "/metrics/", "/v2/health/live", "/%6detrics"])
def test_the_metrics_port_serves_metrics_only(triton_server, path):
    where = urllib.parse.urlsplit(triton_server.metrics_url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        assert response.status == 404, (path, response.status, response.read())
    finally:
        connection.close()


# --------------------------------------------------------------------------------------- class 4: headers


def test_a_hostile_accept_encoding_is_not_forwarded(triton_server, baseline):
    """Triton crashed on `Accept-Encoding: gzip;q=1e999` (upstream #8637); the edge never forwards the
    header, so the request is answered as any other (and not compressed)."""
    answer = http_request(
        triton_server,
        "POST",
        "/v2/models/l2norm/infer",
        GOOD_BODY,
        {"Content-Type": "application/json", "Accept-Encoding": "gzip;q=1e999"},
    )
    assert answer.status == 200, answer
    assert "content-encoding" not in answer.headers, answer.headers
    np.testing.assert_allclose(json.loads(answer.body)["outputs"][0]["data"], [0.6, 0.8], rtol=1e-6)
    assert_unharmed(triton_server, baseline)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("99999999999999999999", "must be a byte count"),
        ("-1", "must be a byte count"),
        (str(len(GOOD_BODY) + 1), f"but the body has {len(GOOD_BODY)} bytes"),
        ("1e3", "must be a byte count"),
        # Unicode digits: str.isdigit() takes them, int() raised ("²") or read another number ("١").
        (b"\xc2\xb2", "must be a byte count"),
        ("١".encode(), "must be a byte count"),
    ],
)
def test_a_bad_inference_header_content_length_is_refused(triton_server, baseline, value, words):
    """Triton mis-read such values (upstream #8925); the edge refuses them and writes its own."""
    answer = http_request(
        triton_server,
        "POST",
        "/v2/models/l2norm/infer",
        GOOD_BODY,
        {"Inference-Header-Content-Length": value},
    )
    assert_refused(answer, 400, "Inference-Header-Content-Length", words)
    assert_unharmed(triton_server, baseline)


def test_answers_do_not_name_the_edge_software_versions(triton_server):
    answer = http_request(triton_server, "GET", "/v2/health/live")
    assert answer.status == 200
    assert "aiohttp" not in answer.headers.get("server", "") and "Python" not in answer.headers.get(
        "server", ""
    )


# ------------------------------------------------------------------------------ class 5: the edge's own loop


def test_a_shape_of_150000_dimensions_does_not_stall_the_edge(triton_server, baseline):
    """1.5 MB of JSON: parsed in a worker thread, refused in well under a second, while health requests
    sent at the same time are answered in under a second each."""
    body = json.dumps(
        {"inputs": [{"name": "vector", "shape": [16777216] * 150_000, "datatype": "FP32", "data": [3, 4]}]}
    ).encode()
    assert len(body) > 1_400_000
    done, latencies = threading.Event(), []

    def health():
        while not done.is_set():
            answer = http_request(triton_server, "GET", "/v2/health/ready", timeout=5)
            latencies.append((answer.status, answer.seconds))

    with ThreadPoolExecutor(5) as pool:
        checkers = [pool.submit(health) for _ in range(2)]
        time.sleep(0.05)
        attacks = [
            pool.submit(http_request, triton_server, "POST", "/v2/models/l2norm/infer", body)
            for _ in range(3)
        ]
        answers = [attack.result() for attack in attacks]
        done.set()
        for checker in checkers:
            checker.result()
    for answer in answers:
        assert_refused(answer, 400, "at most 8 dimensions")
        assert answer.seconds < 1.0, answer.seconds
    assert latencies and all(status == 200 for status, _ in latencies), latencies
    assert max(seconds for _, seconds in latencies) < 1.0, latencies
    assert_unharmed(triton_server, baseline)


def gzip_bomb(inflated: int = 1 << 30, block: int = 1 << 20) -> bytes:
    """A valid gzip member of `inflated` zero bytes (about 1 KB per MiB: deflate's limit is ~1032:1).
    After a full flush the compressor's state is reset, so every 1 MiB block compresses to the same bytes:
    compress one, repeat it, and close the member with the CRC and size of the whole."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(block)
    first = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    repeated = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    end = compressor.flush()[:-8]  # the final empty block, without the trailer of two blocks
    assert first.endswith(repeated)
    crc = 0
    for _ in range(inflated // block):
        crc = zlib.crc32(zeros, crc)
    trailer = struct.pack("<II", crc, inflated & 0xFFFFFFFF)
    return first + repeated * (inflated // block - 1) + end + trailer


def test_a_gzip_bomb_is_refused_quickly(triton_server, baseline):
    bomb = gzip_bomb()
    assert len(bomb) < 1_100_000  # 1 GiB inflated
    assert zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(bomb, 4096) == bytes(4096)
    answer = http_request(
        triton_server, "POST", "/v2/models/l2norm/infer", bomb, {"Content-Encoding": "gzip"}, timeout=10
    )
    assert_refused(answer, 413, "inflates past")
    assert answer.seconds < 3.0, answer.seconds
    assert_unharmed(triton_server, baseline)


def test_an_unaccepted_content_encoding_is_refused(triton_server, baseline):
    answer = http_request(
        triton_server, "POST", "/v2/models/l2norm/infer", GOOD_BODY, {"Content-Encoding": "br"}
    )
    assert_refused(answer, 415, "Content-Encoding 'br' is not accepted")
    # a compressed request the edge accepts is answered
    answer = http_request(
        triton_server,
        "POST",
        "/v2/models/l2norm/infer",
        zlib.compress(GOOD_BODY),
        {"Content-Encoding": "deflate"},
    )
    assert answer.status == 200, answer
    assert_unharmed(triton_server, baseline)


@dataclass
class Stall:
    """A connection that sends `first`, then `trickle` every half second (if any), and waits."""

    first: bytes
    trickle: bytes = b""
    protocol: str = "http"  # or "grpc": the edge's gRPC port
    started: float = 0.0
    answer: bytes = b""
    answered_s: float | None = None  # when the first answer bytes came
    closed_s: float | None = None  # when the edge closed the connection
    error: str = ""
    thread: threading.Thread | None = field(default=None, repr=False)
    chunks: list[tuple[float, bytes]] = field(default_factory=list, repr=False)  # (when, what) received


# A thread gives up waiting after this long.
STALL_LIMIT_S = max(limits.BODY_TIMEOUT_S, limits.ANSWER_TIMEOUT_S + limits.IDLE_TIMEOUT_S) + 20


def _stall(server, stall: Stall, stop: threading.Event) -> None:
    host, _, port = (server.grpc_url if stall.protocol == "grpc" else server.http_url).rpartition(":")
    started = stall.started = time.monotonic()
    try:
        with socket.create_connection((host, int(port)), timeout=5) as connection:
            connection.settimeout(0.5)
            connection.sendall(stall.first)
            while time.monotonic() - started < STALL_LIMIT_S and not stop.is_set():
                try:
                    chunk = connection.recv(65536)
                except TimeoutError:
                    if stall.trickle:
                        connection.sendall(stall.trickle)
                    continue
                if not chunk:
                    stall.closed_s = time.monotonic() - started
                    return
                if stall.answered_s is None:
                    stall.answered_s = time.monotonic() - started
                stall.answer += chunk
                stall.chunks.append((time.monotonic() - started, chunk))
    except OSError as error:  # a reset is a close too
        stall.error = repr(error)
        stall.closed_s = time.monotonic() - started


@pytest.fixture(scope="module", autouse=True)
def stalled_connections(triton_server):
    """The slow-client attacks, started with this module: they take the edge's whole timeouts (15 s for
    headers, 30 s for a body) and run while the other tests do (which shows they hold nothing up)."""
    stalls = {
        "partial header line": Stall(b"POST /v2/models/l2norm/infer HTTP/1.1\r\nHost: edge\r\nX-Pa"),
        "headers trickling": Stall(b"POST /v2/models/l2norm/infer HTTP/1.1\r\n", trickle=b"X-A: b\r\n"),
        "body stalled": Stall(
            b"POST /v2/models/l2norm/infer HTTP/1.1\r\nHost: edge\r\nContent-Length: 1048576\r\n\r\n"
            b"0123456789"
        ),
    }
    if NATIVE_GRPC:  # the compiled front's timeouts (grpcio's server has its own, minutes long)
        stalls["grpc: silent connection"] = Stall(b"", protocol="grpc")
        # A ModelInfer whose message declares 1 MiB and sends 10 bytes of it.
        stalls["grpc: body stalled"] = Stall(
            RawGrpc.opening("ModelInfer", [])
            + RawGrpc.frame(RawGrpc.DATA, 0, 1, b"\x00" + struct.pack(">I", 1 << 20) + bytes(10)),
            protocol="grpc",
        )
        # A ModelInfer sent whole by a client that opens no flow-control window (SETTINGS_INITIAL_WINDOW_SIZE
        # 0) and never reads its answer.
        message = l2norm_infer_message(2048)
        stalls["grpc: answer never read"] = Stall(
            RawGrpc.opening("ModelInfer", [], settings=struct.pack(">HI", 4, 0))
            + RawGrpc.frame(
                RawGrpc.DATA, RawGrpc.END_STREAM, 1, b"\x00" + struct.pack(">I", len(message)) + message
            ),
            protocol="grpc",
        )
    stop = threading.Event()
    for stall in stalls.values():
        stall.thread = threading.Thread(target=_stall, args=(triton_server, stall, stop), daemon=True)
        stall.thread.start()
    yield stalls
    stop.set()
    for stall in stalls.values():
        stall.thread.join(5)


def test_a_stalled_or_trickling_header_is_disconnected(triton_server, baseline, stalled_connections):
    for name in ("partial header line", "headers trickling"):
        stall = stalled_connections[name]
        stall.thread.join(limits.HEADER_TIMEOUT_S + 10)
        assert stall.closed_s is not None, (name, stall)
        assert limits.HEADER_TIMEOUT_S - 1 <= stall.closed_s <= limits.HEADER_TIMEOUT_S + 5, (name, stall)
        assert stall.answer == b"", (name, stall)
    assert_unharmed(triton_server, baseline)


def test_a_stalled_body_is_answered_408(triton_server, baseline, stalled_connections):
    stall = stalled_connections["body stalled"]
    deadline = time.monotonic() + limits.BODY_TIMEOUT_S + 10
    while stall.answered_s is None and stall.closed_s is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert stall.answered_s is not None, stall
    assert limits.BODY_TIMEOUT_S - 1 <= stall.answered_s <= limits.BODY_TIMEOUT_S + 5, stall
    head, _, body = stall.answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), stall
    assert "did not arrive within" in json.loads(body)["error"], stall
    assert_unharmed(triton_server, baseline)


@pytest.mark.skipif(not NATIVE_GRPC, reason="the compiled gRPC front is not built (make edge-native)")
def test_a_silent_grpc_connection_is_closed_after_the_handshake_timeout(stalled_connections):
    stall = stalled_connections["grpc: silent connection"]
    stall.thread.join(limits.HANDSHAKE_TIMEOUT_S + 10)
    assert stall.closed_s is not None, stall
    assert limits.HANDSHAKE_TIMEOUT_S - 1 <= stall.closed_s <= limits.HANDSHAKE_TIMEOUT_S + 3, stall


@pytest.mark.skipif(not NATIVE_GRPC, reason="the compiled gRPC front is not built (make edge-native)")
def test_a_stalled_grpc_message_is_answered_deadline_exceeded(triton_server, baseline, stalled_connections):
    stall = stalled_connections["grpc: body stalled"]
    deadline = stall.started + limits.BODY_TIMEOUT_S + 10
    trailers: dict = {}
    while "grpc-status" not in trailers and time.monotonic() < deadline:
        time.sleep(0.2)
        trailers = RawGrpc.headers_of(stall.answer)
    answered_s = time.monotonic() - stall.started
    assert trailers.get("grpc-status") == str(grpc.StatusCode.DEADLINE_EXCEEDED.value[0]), (trailers, stall)
    assert "did not arrive within" in trailers["grpc-message"], trailers
    assert limits.BODY_TIMEOUT_S - 1 <= answered_s <= limits.BODY_TIMEOUT_S + 5, stall
    assert_unharmed(triton_server, baseline)


def _first_reset_s(stall: Stall) -> float | None:
    """When stream 1's RST_STREAM arrived, from the stall's chunks (frames may span chunks)."""
    buffer = b""
    for when, chunk in stall.chunks:
        buffer += chunk
        while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
            length, kind = int.from_bytes(buffer[:3], "big"), buffer[3]
            if kind == RawGrpc.RST_STREAM and int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF == 1:
                return when
            buffer = buffer[9 + length :]
    return None


@pytest.mark.skipif(not NATIVE_GRPC, reason="the compiled gRPC front is not built (make edge-native)")
def test_a_grpc_answer_not_read_ends_its_stream_then_the_idle_connection(
    triton_server, baseline, stalled_connections
):
    """Its call would otherwise count against the calls in flight for as long as the client likes: its
    stream is reset after the answer timeout (whatever the client sends), then the connection, idle, is told
    GOAWAY and closed after the idle timeout."""
    stall = stalled_connections["grpc: answer never read"]
    stall.thread.join(STALL_LIMIT_S + 5)
    reset_s = _first_reset_s(stall)
    assert reset_s is not None, stall
    assert limits.ANSWER_TIMEOUT_S - 1 <= reset_s <= limits.ANSWER_TIMEOUT_S + 3, stall
    assert stall.closed_s is not None, stall
    assert stall.closed_s <= limits.ANSWER_TIMEOUT_S + limits.IDLE_TIMEOUT_S + 5, stall
    assert_unharmed(triton_server, baseline)


def test_a_stalled_body_connection_is_closed_after_the_body_timeout(stalled_connections):
    stall = stalled_connections["body stalled"]
    stall.thread.join(STALL_LIMIT_S + 5)
    assert stall.closed_s is not None, stall
    assert stall.closed_s <= limits.BODY_TIMEOUT_S + 5, stall


def test_an_http_body_declared_too_large_is_refused_before_it_is_read(triton_server, baseline):
    request = (
        b"POST /v2/models/l2norm/infer HTTP/1.1\r\nHost: edge\r\nContent-Length: %d\r\n\r\n" % (300 << 20)
    ) + bytes(65536)
    host, _, port = triton_server.http_url.rpartition(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(request)
        answer = connection.recv(65536)
    assert time.monotonic() - started < 2.0
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 "), answer
    assert "too large" in json.loads(body)["error"], answer
    assert_unharmed(triton_server, baseline)


# ------------------------------------------------------------------------------- class 6: the private ports


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for link in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(link)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _tcp_listeners(net: Path) -> dict[int, str]:
    """inode -> local address of every listening TCP socket in a /proc/.../net folder."""
    found = {}
    for table in ("tcp", "tcp6"):
        path = net / table
        if path.exists():
            for line in path.read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":  # LISTEN
                    found[int(fields[9])] = f"{table} {fields[1]}"
    return found


def _unix_listeners(net: Path) -> dict[int, str]:
    """inode -> path of every listening Unix socket ('@...': abstract; '': unnamed)."""
    found = {}
    for line in (net / "unix").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[3], 16) & 0x10000:  # __SO_ACCEPTCON: listening
            found[int(fields[6])] = fields[7] if len(fields) > 7 else ""
    return found


def test_tritonserver_has_no_tcp_port_and_its_sockets_are_private(triton_server, baseline):
    pid = triton_server.process.pid
    inodes = _socket_inodes(pid)
    for stub in python_backend_stubs(pid):
        inodes |= _socket_inodes(stub)
    tables = [Path("/proc/self/net"), Path(f"/proc/{pid}/net")]
    for net in tables:
        listening = {inode: where for inode, where in _tcp_listeners(net).items() if inode in inodes}
        assert not listening, f"tritonserver listens on TCP: {listening}"
    own_namespace = os.stat(f"/proc/{pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
    if "network namespace of its own" in triton_server.isolation:
        assert own_namespace, triton_server.isolation
        assert _tcp_listeners(Path(f"/proc/{pid}/net")) == {}, "a TCP listener in tritonserver's namespace"

    socket_dir = Path(triton_server.socket_dir)
    unix = {path for inode, path in _unix_listeners(Path(f"/proc/{pid}/net")).items() if inode in inodes}
    assert unix == {str(socket_dir / name) for name in ("http", "grpc:0", "metrics")}, unix
    info = socket_dir.stat()
    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid(), oct(info.st_mode)
    assert_unharmed(triton_server, baseline)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user (setuid)")
def test_another_local_user_cannot_connect_to_the_private_sockets(triton_server, baseline):
    socket_dir = Path(triton_server.socket_dir)
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # the child: become nobody, try each socket, report, exit without Python's cleanup
        code = 1
        try:
            os.close(reader)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            outcomes = {}
            for name in ("http", "grpc:0", "metrics"):
                with socket.socket(socket.AF_UNIX) as probe:
                    try:
                        probe.connect(str(socket_dir / name))
                        outcomes[name] = "connected"
                    except OSError as error:
                        outcomes[name] = type(error).__name__
            os.write(writer, json.dumps(outcomes).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        report = pipe.read()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, report
    assert json.loads(report) == dict.fromkeys(("http", "grpc:0", "metrics"), "PermissionError"), report
    assert_unharmed(triton_server, baseline)


# ------------------------------------------------------------------------------ class 7: shape without data


def test_a_grpc_shape_without_data_is_refused(triton_server, baseline):
    """36 bytes that declare a [1, 2^62] FP32 input and carry nothing: refused at the edge, and the Python
    stub of l2norm (which such a request killed) still answers."""
    message = pb.ModelInferRequest(model_name="l2norm")
    message.inputs.add(name="vector", datatype="FP32", shape=[1, 2**62])
    raw = message.SerializeToString()
    assert len(raw) <= 38, len(raw)
    code, details = grpc_call(triton_server, "ModelInfer", raw)
    assert code == "INVALID_ARGUMENT" and f"dimension {2**62}" in details, (code, details)
    body = json.dumps({"inputs": [{"name": "vector", "shape": [1, 2**62], "datatype": "FP32"}]}).encode()
    assert_refused(
        http_request(triton_server, "POST", "/v2/models/l2norm/infer", body), 400, f"dimension {2**62}"
    )
    assert_unharmed(triton_server, baseline)


# -------------------------------------------------------------------------------- class 8: gRPC resources


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_grpc_messages_over_the_limit_are_refused_before_buffering(triton_server, baseline):
    edge = [triton_server.edge_process.pid, *edge_children(triton_server)]  # with the compiled front
    message = l2norm_infer_message(40 << 20)
    assert len(message) > limits.MAX_GRPC_MESSAGE_BYTES
    before = sum(map(_rss, edge))
    for _ in range(5):
        code, details = grpc_call(triton_server, "ModelInfer", message)
        assert code == "RESOURCE_EXHAUSTED" and "larger than max" in details, (code, details)
    grown = sum(map(_rss, edge)) - before
    assert grown < 100 * 1024 * 1024, f"the edge grew by {grown >> 20} MiB over five refused 40 MiB messages"
    assert_unharmed(triton_server, baseline)


CROWD_DEADLINES_S = (0.0005, 0.002, 0.005, 1.0)  # most pass while the call is being worked on


def abandoned_call_crowd(open_client) -> dict[str, int]:
    """16 clients for 8 s, each call given a deadline from CROWD_DEADLINES_S; the answers counted by kind.
    `open_client()`: an async context manager yielding `once(deadline_s) -> kind` (one call)."""
    counts: dict[str, int] = {}

    async def client(stop: float) -> None:
        rng = np.random.default_rng()
        async with open_client() as once:
            while time.monotonic() < stop:
                kind = await once(float(rng.choice(CROWD_DEADLINES_S)))
                counts[kind] = counts.get(kind, 0) + 1

    async def crowd() -> None:
        stop = time.monotonic() + 8
        await asyncio.gather(*(client(stop) for _ in range(16)))

    asyncio.run(crowd())
    return counts


def test_grpc_calls_whose_deadlines_pass_in_flight_leave_tritonserver_running(triton_server, baseline):
    """The crowd over gRPC. When the edge cancelled tritonserver's calls as their clients' deadlines passed
    (the gRPC C++ front and the first nghttp2 one), Triton 2.51 died of SIGSEGV within seconds (3 runs of 3);
    clients straight at tritonserver did not kill it. The edge answers DEADLINE_EXCEEDED and lets the call
    finish."""
    message = l2norm_infer_message(2048)

    @contextlib.asynccontextmanager
    async def open_client():
        async with grpc.aio.insecure_channel(triton_server.grpc_url) as channel:
            call = channel.unary_unary(f"/{SERVICE}/ModelInfer")

            async def once(deadline_s: float) -> str:
                try:
                    await call(message, timeout=deadline_s)
                    return "OK"
                except grpc.aio.AioRpcError as error:
                    return error.code().name

            yield once

    counts = abandoned_call_crowd(open_client)
    # UNAVAILABLE: a connection that resets streams faster than nghttp2's rapid-reset guard allows (a burst of
    # 1,000, then 33 a second) is told GOAWAY; tritonserver and the edge must still be the same processes.
    assert counts.get("OK") and counts.get("DEADLINE_EXCEEDED"), counts
    assert set(counts) <= {"OK", "DEADLINE_EXCEEDED", "UNAVAILABLE"}, counts
    assert_unharmed(triton_server, baseline)


def test_http_requests_given_up_in_flight_leave_tritonserver_running(triton_server, baseline):
    """The crowd over HTTP: each request given up at its deadline (its connection closed while the edge or
    tritonserver works on it). Tried when the gRPC crash was found: tritonserver was unharmed; this keeps it
    so."""
    url = f"http://{triton_server.http_url}/v2/models/l2norm/infer"
    body = json.dumps(
        {"inputs": [{"name": "vector", "shape": [1, 512], "datatype": "FP32", "data": [1.0] * 512}]}
    ).encode()

    @contextlib.asynccontextmanager
    async def open_client():
        async with aiohttp.ClientSession() as session:

            async def once(deadline_s: float) -> str:
                try:
                    timeout = aiohttp.ClientTimeout(total=deadline_s)
                    async with session.post(url, data=body, timeout=timeout) as answer:
                        await answer.read()
                        return str(answer.status)
                except asyncio.TimeoutError:
                    return "given up"
                except aiohttp.ClientError as error:
                    return type(error).__name__

            yield once

    counts = abandoned_call_crowd(open_client)
    assert counts.get("200") and counts.get("given up"), counts
    assert set(counts) == {"200", "given up"}, counts
    assert_unharmed(triton_server, baseline)


H2_FLOODS = {
    # name: (the first frames after the preface and SETTINGS, the frames sent again and again)
    "PING, answers never read": (b"", RawGrpc.frame(RawGrpc.PING, 0, 0, b"12345678") * 1000),
    "CONTINUATION without end": (
        RawGrpc.frame(RawGrpc.HEADERS, 0, 1, b"\x00\x01a\x01b"),
        RawGrpc.frame(RawGrpc.CONTINUATION, 0, 1, b"\x00\x01a\x01b" * 2000) * 10,
    ),
    "SETTINGS": (b"", RawGrpc.frame(RawGrpc.SETTINGS, 0, 0, struct.pack(">HI", 3, 100) * 10) * 1000),
    "RST_STREAM on idle streams": (
        b"",
        b"".join(RawGrpc.frame(RawGrpc.RST_STREAM, 0, 2 * i + 1, struct.pack(">I", 8)) for i in range(1000)),
    ),
}


@pytest.mark.skipif(not NATIVE_GRPC, reason="the compiled gRPC front is not built (make edge-native)")
@pytest.mark.parametrize("flood", list(H2_FLOODS))
def test_http2_floods_end_the_connection_and_cost_the_edge_nothing(triton_server, baseline, flood):
    """HTTP/2's own floods at the gRPC port (CVE-2019-9512/9515, CVE-2023-44487, CVE-2024-28182 classes):
    nghttp2 ends the connection within the first frames, the compiled front's memory does not grow."""
    first, again = H2_FLOODS[flood]
    front = edge_children(triton_server)
    before = sum(map(_rss, front))
    host, _, port = triton_server.grpc_url.rpartition(":")
    ended = None
    with socket.create_connection((host, int(port)), timeout=5) as connection:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the edge's answers pile up
        started = time.monotonic()
        try:
            connection.sendall(RawGrpc.PREFACE + RawGrpc.frame(RawGrpc.SETTINGS, 0, 0, b"") + first)
            while time.monotonic() - started < 10:
                connection.sendall(again)
        except OSError as error:  # reset or broken pipe: the edge closed it
            ended = time.monotonic() - started
            assert isinstance(error, (ConnectionResetError, BrokenPipeError)), error
    assert ended is not None and ended < 5, f"{flood}: the connection was still open after 10 s"
    grown = sum(map(_rss, front)) - before
    assert grown < 16 * 1024 * 1024, f"{flood}: the compiled front grew by {grown >> 20} MiB"
    assert_unharmed(triton_server, baseline)


def test_two_300_mib_messages_then_the_pipeline_answers(triton_server, baseline):
    message = l2norm_infer_message(300 << 20)
    for _ in range(2):
        code, details = grpc_call(triton_server, "ModelInfer", message, timeout=60)
        assert code == "RESOURCE_EXHAUSTED", (code, details)
    del message
    assert_pipeline_answers_a_digit(triton_server)
    assert_unharmed(triton_server, baseline)


# ------------------------------------------------------------------------- class 10: the pipeline's decoder


def scan_bomb(repeats: int = 3000) -> bytes:
    """A progressive JPEG of the sample digit at 1000x1000 whose last scan is repeated `repeats` times
    before the end-of-image marker: libjpeg decodes every scan over every block (~5 MB, minutes of CPU)."""
    image = Image.open(DIGIT).convert("L").resize((1000, 1000), Image.Resampling.BICUBIC)
    data = encode(image, "JPEG", quality=30, progressive=True)
    end = data.rindex(b"\xff\xd9")
    last_scan = data.rindex(b"\xff\xda", 0, end)
    return data[:last_scan] + data[last_scan:end] * repeats + data[end:]


@pytest.fixture(scope="module")
def jpeg_scan_bomb() -> bytes:
    bomb = scan_bomb()
    assert Image.open(io.BytesIO(bomb)).size == (1000, 1000)
    assert bomb.count(b"\xff\xda") > 3000 and len(bomb) < 8 * 1024 * 1024
    return bomb


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_jpeg_repeating_one_scan_is_refused_quickly(triton_server, baseline, jpeg_scan_bomb, protocol):
    started = time.monotonic()
    if protocol == "http":
        status, body = http_binary_infer(
            triton_server.http_url,
            "mnist_pipeline",
            "image_bytes",
            "BYTES",
            [1, 1],
            bytes_tensor([jpeg_scan_bomb]),
        )
        code, message = status, body.get("error", body)
        assert code == 400, body
    else:
        code, message = grpc_raw_infer(
            triton_server.grpc_url,
            "mnist_pipeline",
            "image_bytes",
            "BYTES",
            [1, 1],
            bytes_tensor([jpeg_scan_bomb]),
        )
        assert code == "INVALID_ARGUMENT", message
    assert time.monotonic() - started < 2.0
    assert "more than 100 scans" in str(message), message
    assert_pipeline_answers_a_digit(triton_server)
    png = encode(Image.open(DIGIT))  # and the digit sent the hand-built way, too
    status, body = http_binary_infer(
        triton_server.http_url, "mnist_pipeline", "image_bytes", "BYTES", [1, 1], bytes_tensor([png])
    )
    assert status == 200 and int(np.argmax(body["outputs"][0]["data"])) == DIGIT_LABEL, body
    assert_unharmed(triton_server, baseline)
