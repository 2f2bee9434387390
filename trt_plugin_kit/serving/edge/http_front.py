"""The edge's HTTP side: the KServe v2 endpoints this kit serves, nothing else.

A request passes only when its method and *raw* path (never a normalised one: ``/./``, ``%2e``, ``//`` and
query strings are refused, not interpreted) match a route below and its model is served. Inference bodies
are parsed here (trt_plugin_kit.serving.edge.wire_json, the binary extension by its declared sizes), checked
against
the model (trt_plugin_kit.serving.edge.tensors) and re-encoded in binary form; tritonserver gets that
re-encoding,
on a canonical path this module writes, with headers this module writes. Client headers other than the
ones read here (Content-Type is not even read) never reach it: no Accept-Encoding (upstream bug #8637), no
Inference-Header-Content-Length as sent (#8925), no admin key as sent.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import zlib
from dataclasses import dataclass

import numpy as np
from aiohttp import web, web_protocol

from trt_plugin_kit.interface import ADMIN_HEADER
from trt_plugin_kit.serving.edge import limits, wire_json
from trt_plugin_kit.serving.edge.budget import Budget, Holding, peer_key, peer_of, reset_on_close
from trt_plugin_kit.serving.edge.policy import MODEL_CONTROL_REFUSAL, UNREACHABLE, refusal
from trt_plugin_kit.serving.edge.tensors import (
    DATATYPE_BYTES,
    NAME,
    VERSION,
    InferRequest,
    ParsedInput,
    ParsedOutput,
    Refused,
    check_request,
    check_shape,
    not_found,
    serialize_bytes_elements,
    too_large,
    unknown_model,
)
from trt_plugin_kit.serving.edge.upstream import Upstream
from trt_plugin_kit.serving.edge.upstream_http import UpstreamError
from trt_plugin_kit.serving.edge.wire_binary import HEADER_LENGTH, encode_binary_request

log = logging.getLogger("trt_plugin_kit.serving.edge")

# The only headers of tritonserver's answers that reach the client.
FORWARDED_BACK = ("Content-Type", HEADER_LENGTH)
ASCII_COUNT = re.compile(r"[0-9]{1,10}")  # str.isdigit() would take "²" and int() then raise
# What the Server header says: no software or version.
SERVER_NAME = "triton-edge"
NUMPY_TYPES = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "INT8": np.int8,
    "UINT16": np.uint16,
    "INT16": np.int16,
    "FP16": np.float16,
    "UINT32": np.uint32,
    "INT32": np.int32,
    "FP32": np.float32,
    "UINT64": np.uint64,
    "INT64": np.int64,
    "FP64": np.float64,
}


# ------------------------------------------------------------------------------------------------ routes


@dataclass(frozen=True)
class Route:
    name: str
    methods: tuple[str, ...]
    pattern: re.Pattern
    admin: bool = False


_MODEL = r"/v2/models/(?P<model>[^/]+)(?:/versions/(?P<version>[^/]+))?"
_REGION = r"(?:/region/(?P<region>[^/]+))?"
ROUTES = [
    Route("live", ("GET",), re.compile(r"/v2/health/live")),
    Route("ready", ("GET",), re.compile(r"/v2/health/ready")),
    Route("server_metadata", ("GET",), re.compile(r"/v2")),
    Route("all_stats", ("GET",), re.compile(r"/v2/models/stats")),
    Route("model_metadata", ("GET",), re.compile(_MODEL)),
    Route("model_ready", ("GET",), re.compile(_MODEL + r"/ready")),
    Route("model_config", ("GET",), re.compile(_MODEL + r"/config")),
    Route("model_stats", ("GET",), re.compile(_MODEL + r"/stats")),
    Route("infer", ("POST",), re.compile(_MODEL + r"/infer")),
    # Restricted to the operator's key (TRITON_ADMIN_KEY); model load/unload is off in every deployment.
    Route("repository_index", ("POST",), re.compile(r"/v2/repository/index"), admin=True),
    Route("repository_control", ("POST",), re.compile(r"/v2/repository/models/[^/]+/(?:load|unload)"), True),
    Route("shm_status", ("GET",), re.compile(r"/v2/(?:system|cuda)sharedmemory" + _REGION + "/status"), True),
    Route(
        "shm_register", ("POST",), re.compile(r"/v2/(?:system|cuda)sharedmemory/region/[^/]+/register"), True
    ),
    Route(
        "shm_unregister",
        ("POST",),
        re.compile(r"/v2/(?:system|cuda)sharedmemory" + _REGION + "/unregister"),
        True,
    ),
    Route("trace", ("GET", "POST"), re.compile(r"/v2(?:/models/(?P<model>[^/]+))?/trace/setting"), True),
    Route("logging", ("GET", "POST"), re.compile(r"/v2/logging"), True),
]
_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def route(method: str, raw_path: str) -> tuple[Route, dict[str, str]]:
    """The route of a raw request target, or Refused(404). Segments are names, never dot segments,
    escapes or empty; no query string."""
    if not raw_path.startswith("/v2") or len(raw_path) > 512:
        raise not_found("not found")
    segments = raw_path[1:].split("/")
    if not all(_SEGMENT.match(segment) and segment not in (".", "..") for segment in segments):
        raise not_found("not found")
    for candidate in ROUTES:
        match = candidate.pattern.fullmatch(raw_path)
        if match:
            if method not in candidate.methods:
                raise Refused(f"method {method} not allowed here", status=405, grpc_code="UNIMPLEMENTED")
            parts = {k: v for k, v in match.groupdict().items() if v is not None}
            if "model" in parts and not NAME.match(parts["model"]):
                raise not_found("not found")
            if "version" in parts and not VERSION.match(parts["version"]):
                raise not_found("not found")
            return candidate, parts
    raise not_found("not found")


# ------------------------------------------------------------------------------------------ inference


def _tensor_fields(entry: object, allowed: set[str], where: str) -> dict:
    if not isinstance(entry, dict):
        raise Refused(f"{where} must be a JSON object")
    unknown = set(entry) - allowed
    if unknown:
        raise Refused(f"{where}: unknown field {sorted(unknown)[0]!r}")
    return entry


def _json_data_to_raw(data: object, datatype: str, shape: list[int], where: str) -> bytes:
    if not isinstance(data, list):
        data = [data]
    if datatype == "BYTES":
        flat = _flatten(data, where)
        if not all(isinstance(item, str) for item in flat):
            raise Refused(f"{where}: BYTES data must be strings")
        return serialize_bytes_elements([item.encode() for item in flat])
    numpy_type = NUMPY_TYPES.get(datatype)
    if numpy_type is None:
        raise Refused(f"{where}: {datatype} cannot be sent as JSON data; use the binary extension")
    try:
        parsed = np.array(data)
    except ValueError:
        raise Refused(f"{where}: 'data' is ragged") from None
    expected_kind = "b" if datatype == "BOOL" else "biuf"
    if parsed.dtype.kind not in expected_kind or parsed.dtype == object:
        raise Refused(f"{where}: 'data' must hold {'booleans' if datatype == 'BOOL' else 'numbers'}")
    if datatype != "BOOL" and parsed.dtype.kind == "b":
        raise Refused(f"{where}: 'data' must hold numbers, not booleans")
    with np.errstate(over="ignore", invalid="ignore"):
        return parsed.astype(numpy_type, copy=False).tobytes()


def _flatten(data: list, where: str) -> list:
    flat, stack = [], [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                if len(stack) > 8:
                    raise Refused(f"{where}: 'data' nests deeper than a shape can")
                stack.append(iter(item))
                break
            flat.append(item)
        else:
            stack.pop()
    return flat


def parse_infer(model: str, version: str, body: bytes, header_length: str | None) -> InferRequest:
    """A KServe v2 HTTP inference body (JSON, or JSON + the binary extension) as an InferRequest."""
    json_part, binary = body, b""
    if header_length is not None:
        if not ASCII_COUNT.fullmatch(header_length):
            raise Refused(f"{HEADER_LENGTH} must be a byte count, got {header_length[:20]!r}")
        length = int(header_length)
        if length > len(body):
            raise Refused(f"{HEADER_LENGTH} is {length} but the body has {len(body)} bytes")
        json_part, binary = body[:length], memoryview(body)[length:]
    if len(json_part) > limits.MAX_JSON_BYTES:
        raise too_large(
            f"the JSON part of the request has {len(json_part)} bytes; this server parses at most "
            f"{limits.MAX_JSON_BYTES} (send large tensors with the binary extension)"
        )
    header = _tensor_fields(
        wire_json.parse(json_part), {"id", "parameters", "inputs", "outputs"}, "the request"
    )
    request = InferRequest(model=model, version=version)
    request.id = header.get("id", "")
    if not isinstance(request.id, str):
        raise Refused("'id' must be a string")
    request.parameters = _parameters(header, "the request")
    inputs = header.get("inputs")
    if not isinstance(inputs, list) or not 1 <= len(inputs) <= limits.MAX_INPUTS:
        raise Refused(f"the request needs a list 'inputs' of 1..{limits.MAX_INPUTS} tensors")
    offset = 0
    for position, entry in enumerate(inputs):
        fields = _tensor_fields(
            entry, {"name", "shape", "datatype", "parameters", "data"}, f"inputs[{position}]"
        )
        name = fields.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise Refused(f"inputs[{position}] needs a valid 'name'")
        where = refusal("where_input", name=repr(name))
        datatype = fields.get("datatype")
        if datatype not in DATATYPE_BYTES:
            raise Refused(f"{where}: unknown datatype {str(datatype)[:16]!r}")
        shape = fields.get("shape")
        parameters = _parameters(fields, where)
        tensor = ParsedInput(name, datatype, shape if isinstance(shape, list) else [], None, parameters)
        if not isinstance(shape, list):
            raise Refused(f"{where}: 'shape' must be a list of non-negative integers")
        size = parameters.pop("binary_data_size", None)
        if size is not None:
            if "data" in fields:
                raise Refused(f"{where}: both 'data' and binary_data_size")
            if type(size) is not int or not 0 <= size <= len(binary) - offset:
                raise Refused(
                    f"{where}: binary_data_size {size!r} is not within the {len(binary)} binary bytes"
                )
            tensor.raw = bytes(binary[offset : offset + size])
            offset += size
        elif "data" in fields:
            check_shape(shape, where)
            tensor.raw = _json_data_to_raw(fields["data"], datatype, shape, where)
        request.inputs.append(tensor)
    if offset != len(binary):
        raise Refused(f"the body has {len(binary) - offset} binary bytes that no input claims")
    outputs = header.get("outputs", [])
    if not isinstance(outputs, list) or len(outputs) > limits.MAX_OUTPUTS:
        raise Refused(f"'outputs' must be a list of at most {limits.MAX_OUTPUTS}")
    for position, entry in enumerate(outputs):
        fields = _tensor_fields(entry, {"name", "parameters"}, f"outputs[{position}]")
        if not isinstance(fields.get("name"), str):
            raise Refused(f"outputs[{position}] needs a 'name'")
        request.outputs.append(
            ParsedOutput(
                fields["name"], _parameters(fields, refusal("where_output", name=repr(fields["name"])))
            )
        )
    return request


def _parameters(fields: dict, where: str) -> dict:
    parameters = fields.get("parameters", {})
    if not isinstance(parameters, dict) or len(parameters) > limits.MAX_PARAMETERS:
        raise Refused(
            f"{where}: 'parameters' must be a JSON object of at most {limits.MAX_PARAMETERS} entries"
        )
    return dict(parameters)


async def decoded_body(request: web.Request, limit: int, holding: Holding) -> bytes:
    """The body, read within limits.BODY_TIMEOUT_S and ``limit`` bytes, decompressed (gzip/deflate) in a
    worker thread within the same limit and limits.DECOMPRESS_TIMEOUT_S; other encodings are refused. Its
    bytes are held in the byte budget (``holding``) as they arrive, before they are kept: the chunk that
    would pass it is refused at once. (Not the declared length: bodies declared and never sent would hold
    the budget against everybody else for the body timeout.)"""
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip", "deflate"):
        raise Refused(f"Content-Encoding {encoding[:20]!r} is not accepted (gzip, deflate)", status=415)
    declared = request.content_length
    if declared is not None and declared > limit:
        raise too_large(f"the request body is too large: this server accepts at most {limit} bytes")
    try:
        async with limits.time_limit(limits.BODY_TIMEOUT_S):
            body = await _read_body(request, limit, holding)
    except asyncio.TimeoutError:
        raise Refused(f"the request body did not arrive within {limits.BODY_TIMEOUT_S:.0f} s", 408) from None
    if encoding == "identity":
        return body
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    holding.take(limit)  # what the inflater may make, held before it runs
    try:
        # The worker thread runs on when the wait gives up, but its output is bounded by `limit`.
        inflated = await asyncio.wait_for(
            asyncio.to_thread(_inflate, body, wbits, limit), limits.DECOMPRESS_TIMEOUT_S
        )
    except asyncio.TimeoutError:
        raise Refused("the request body took too long to decompress", status=413) from None
    holding.resize(len(body) + len(inflated))
    return inflated


async def _read_body(request: web.BaseRequest, limit: int, holding: Holding) -> bytes:
    """The body in chunks, each held in the byte budget as it comes."""
    chunks, size = [], 0
    async for chunk in request.content.iter_chunked(256 * 1024):
        size += len(chunk)
        if size > limit:
            raise too_large(f"the request body is too large: this server accepts at most {limit} bytes")
        holding.take(len(chunk))
        chunks.append(chunk)
    return b"".join(chunks)


def _inflate(body: bytes, wbits: int, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error:
        raise Refused("the request body is not valid compressed data") from None
    if len(data) > limit or inflater.unconsumed_tail:
        raise too_large(f"the request body inflates past {limit} bytes; this server accepts at most that")
    if not inflater.eof:
        raise Refused("the compressed request body is truncated")
    return data


# ------------------------------------------------------------------------------------------------ server


def error_response(refused: Refused) -> web.Response:
    return web.json_response({"error": str(refused)}, status=refused.status)


class HeldAnswer(web.Response):
    """tritonserver's answer on its way to the client, its bytes in the front's byte budget until the
    client has taken them (all but what the transport's write buffer keeps below its high-water mark). A
    client that does not read it within limits.ANSWER_TIMEOUT_S (a zero TCP window, a slow reader; no
    progress renews it) loses the connection, and the budget is given back."""

    _holding: Holding | None = None

    def hold(self, holding: Holding) -> None:
        """Hold this answer's bytes instead of the request's (_forward took them as they were read)."""
        holding.resize(len(self.body or b""))
        self._holding = holding

    def _let_go(self) -> None:
        if self._holding is not None:
            self._holding.release()
            self._holding = None

    async def prepare(self, request: web.BaseRequest):
        try:
            return await super().prepare(request)
        except BaseException:
            self._let_go()
            raise

    async def write_eof(self, data: bytes = b"") -> None:
        transport = self._req.transport if self._req is not None else None
        # The headers on their own: aiohttp would otherwise join them to the body (a copy of the whole
        # answer, held as long as the client does not read it) on the Pythons where writelines is unsafe.
        send_headers = getattr(self._payload_writer, "send_headers", None)  # aiohttp >= 3.12
        if send_headers is not None and not self._eof_sent:
            send_headers()
        try:
            async with limits.time_limit(limits.ANSWER_TIMEOUT_S):
                await super().write_eof(data)
        except asyncio.TimeoutError:
            if transport is not None:
                reset_on_close(transport)
                transport.abort()
            raise ConnectionResetError("the client did not take its answer in time") from None
        finally:
            self._let_go()


class _EdgeRequestHandler(web_protocol.RequestHandler):
    """aiohttp's connection handler, answering what its HTTP parser refuses in Triton's JSON error form,
    without echoing the request or logging a traceback per malformed request (a log flood)."""

    _peer: str | None = None  # counted in the budget's connections

    def connection_made(self, transport) -> None:
        # Counted at accept: past the front's or the peer's connection cap it is reset at once, never left
        # in the backlog or holding a descriptor (aiohttp never sees it: no _manager, no task).
        budget: Budget = self._manager.budget
        peer = peer_of(transport)
        if not budget.admit(peer):
            self._manager = None
            reset_on_close(transport)
            transport.abort()
            return
        self._peer, self._budget = peer, budget
        super().connection_made(transport)

    def connection_lost(self, exc) -> None:
        if self._peer is not None:
            self._budget.leave(self._peer)
            self._peer = None
        super().connection_lost(exc)

    def handle_error(self, request, status=500, exc=None, message=None):
        if request.writer.output_size > 0:
            raise ConnectionError("response already sent")
        words = "malformed HTTP request" if status == 400 else "the edge could not handle the request"
        if status >= 500:
            log.warning("internal error on %s: %s", request.path[:100], type(exc).__name__)
        response = web.json_response({"error": words}, status=status, headers={"Server": SERVER_NAME})
        response.force_close()  # the connection closes once the answer is written
        return response


class _EdgeServer(web.Server):
    def __call__(self) -> web_protocol.RequestHandler:
        return _EdgeRequestHandler(self, loop=self._loop, **self._kwargs)


class HttpFront:
    def __init__(self, upstream: Upstream, admin_key: str | None, ready=None):
        self.upstream = upstream
        self.admin_key = admin_key
        self.ready = ready  # () -> str | None: why the edge is not ready
        self.budget = Budget()

    def server(self) -> web.Server:
        # The keep-alive timer runs from connection start and from each response until the next request's
        # headers are complete: aiohttp closes the connection if they are not, which is the header timeout.
        server = _EdgeServer(
            self.handle,
            keepalive_timeout=limits.HEADER_TIMEOUT_S,
            lingering_time=0,  # a refused upload's rest is not waited for
            max_line_size=2048,
            max_field_size=8190,
            max_headers=64,
            auto_decompress=False,
            access_log=None,
            handler_cancellation=True,
        )
        server.budget = self.budget
        return server

    def admitted(self, request: web.Request) -> bool:
        if self.admin_key is None:
            return False
        sent = request.headers.get(ADMIN_HEADER, "")
        return hmac.compare_digest(sent.encode(), self.admin_key.encode())

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        holding = Holding(self.budget, peer_key(request.remote))
        try:
            response = await self._handle(request, holding)
            if isinstance(response, HeldAnswer):
                # The answer's bytes are held in place of the request's until the client has taken them.
                response.hold(holding)
            else:
                holding.release()
        except Refused as refused:
            holding.release()
            response = error_response(refused)
            if refused.status in (408, 413, 415, 429, 503):
                # The rest of an unread body is not worth reading: answer, then close the connection.
                response.force_close()
            if getattr(refused, "retry_after", None):
                response.headers["Retry-After"] = str(refused.retry_after)
        except BaseException:
            holding.release()
            raise
        response.headers["Server"] = SERVER_NAME
        return response

    async def _handle(self, request: web.BaseRequest, holding: Holding) -> web.StreamResponse:
        target = request.raw_path
        if "?" in target or "#" in target:
            raise not_found("not found")
        chosen, parts = route(request.method, target)
        if chosen.admin and not self.admitted(request):
            # Not there at all for whoever lacks the key (also when no key is configured).
            raise Refused(
                f"{target} is restricted: it needs the '{ADMIN_HEADER}' header with the admin key", 403
            )
        if chosen.name == "repository_control":
            raise Refused(MODEL_CONTROL_REFUSAL, status=403)
        model = parts.get("model")
        if model is not None and model not in self.upstream.models:
            raise unknown_model(model)
        if chosen.name in ("live", "ready", "model_ready"):
            return await self._health(chosen.name, parts)
        if chosen.name == "infer":
            return await self._infer(request, parts, holding)
        body = b""
        if request.method == "POST":
            raw = await decoded_body(request, limits.MAX_CONTROL_BODY_BYTES, holding)
            body = wire_json.encode(wire_json.parse(raw)) if raw else b""
        headers = {"Content-Type": "application/json"} if body else {}
        if chosen.admin:
            headers.update(self.upstream.admin_headers)
        # Routed above: only name segments, so the raw path is already the canonical one.
        return await self._forward(request.method, target, body, headers, model, holding)

    async def _health(self, name: str, parts: dict) -> web.Response:
        if name == "live":
            return await self._forward("GET", "/v2/health/live", b"", {}, None)
        why = self.ready() if self.ready else None
        model = parts.get("model")
        if model is not None and model in self.upstream.unhealthy:
            why = f"model {model!r} stopped answering"
        if why is not None:
            return web.json_response({"error": why}, status=503)
        path = "/v2/health/ready" if name == "ready" else _canonical_model(parts) + "/ready"
        return await self._forward("GET", path, b"", {}, None)

    async def _infer(self, request: web.BaseRequest, parts: dict, holding: Holding) -> web.Response:
        body = await decoded_body(request, limits.MAX_REQUEST_BYTES, holding)
        header_length = request.headers.get(HEADER_LENGTH)
        model, version = parts["model"], parts.get("version", "")
        if len(body) > limits.JSON_INLINE_BYTES:
            parsed = await asyncio.to_thread(self._parse_and_check, model, version, body, header_length)
        else:
            parsed = self._parse_and_check(model, version, body, header_length)
        encoded, encoded_header_length = encode_binary_request(parsed)
        headers = {HEADER_LENGTH: str(encoded_header_length), "Content-Type": "application/octet-stream"}
        path = _canonical_model(parts) + "/infer"
        return await self._forward("POST", path, encoded, headers, model, holding)

    def _parse_and_check(self, model, version, body, header_length) -> InferRequest:
        return check_request(parse_infer(model, version, body, header_length), self.upstream.models)

    async def _forward(
        self, method: str, path: str, body: bytes, headers: dict, model: str | None, holding=None
    ) -> web.Response:
        """tritonserver's answer; with a `holding`, its bytes held in the budget before they are read (past
        it: Refused 429/503, the answer left unread on a connection that is then closed)."""
        hold = holding.take if holding is not None else None
        try:
            answer = await self.upstream.http.request(method, path, body, headers, hold=hold)
        except (UpstreamError, OSError, asyncio.TimeoutError, ValueError) as error:
            if model is not None:
                self.upstream.record(model, False)
            log.warning("upstream %s %s failed: %s", method, path, type(error).__name__)
            return web.json_response({"error": UNREACHABLE}, status=503)
        if model is not None:
            self.upstream.record(model, answer.status < 500)
        forwarded = {
            key: answer.headers[key.lower()] for key in FORWARDED_BACK if key.lower() in answer.headers
        }
        return HeldAnswer(status=answer.status, body=answer.body, headers=forwarded)


def _canonical_model(parts: dict) -> str:
    path = f"/v2/models/{parts['model']}"
    return path + (f"/versions/{parts['version']}" if parts.get("version") else "")


async def metrics_handler(upstream: Upstream, request: web.BaseRequest) -> web.StreamResponse:
    """The metrics port: GET /metrics only."""
    if request.method != "GET" or request.raw_path != "/metrics":
        return web.Response(status=404, text="not found\n")
    try:
        async with upstream.metrics_session.get("http://triton/metrics") as response:
            return web.Response(
                status=response.status,
                body=await response.read(),
                headers={
                    "Content-Type": response.headers.get("Content-Type", "text/plain"),
                    "Server": SERVER_NAME,
                },
            )
    except (OSError, asyncio.TimeoutError, Exception):  # noqa: BLE001
        return web.Response(status=503, text=UNREACHABLE + "\n")
