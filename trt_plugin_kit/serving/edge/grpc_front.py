"""The edge's gRPC side: inference.GRPCInferenceService, method by method, under the HTTP side's rules.

gRPC core (C, grpcio's server) does the HTTP/2 framing and refuses a message longer than
limits.MAX_GRPC_MESSAGE_BYTES from its length prefix, before buffering it (the compiled front does the same
on nghttp2). Every request is parsed into its protobuf message here; an
inference request becomes a trt_plugin_kit.serving.edge.tensors.InferRequest, is checked against the model,
and is
re-encoded into a fresh message (typed ``contents`` become ``raw_input_contents``; unknown fields and client
metadata are dropped). Responses come back from tritonserver as bytes and are passed on unparsed.

Where the compiled front is built (edge/native, started by native_front.py), it holds the public port and
answers ModelInfer itself under these rules; this front then listens on a private Unix socket and answers the
other methods, which the binary relays with only the admin-key metadata.

Where it holds the public port itself (the compiled front not built: the GPU image), its budgets are those
grpc core lets it keep: calls in flight per front (grpcio's maximum_concurrent_rpcs), per connection (HTTP/2
streams) and per peer (counted here); bytes held for a peer and for the front, a request's from its handler
until its answer is sent (edge/budget.py's books); the handshake and idle deadlines; no compressed message
at all (grpc core would inflate any method's). What grpc core gives no hook for (connections per peer at
accept, an answer deadline, messages still being received) only the compiled front bounds.
"""

from __future__ import annotations

import hmac
import logging
import urllib.parse

import grpc
import numpy as np
from tritonclient.grpc import service_pb2 as pb

from trt_plugin_kit.interface import ADMIN_HEADER, GRPC_ADMIN_HEADER
from trt_plugin_kit.serving.edge import limits
from trt_plugin_kit.serving.edge.budget import Budget, Holding, peer_key
from trt_plugin_kit.serving.edge.policy import (
    CONTENTS,
    MODEL_CONTROL_REFUSAL,
    PEER_CALLS_REFUSAL,
    SERVICE,
    UNREACHABLE,
    refusal,
)
from trt_plugin_kit.serving.edge.tensors import (
    DATATYPE_BYTES,
    NAME,
    VERSION,
    InferRequest,
    ParsedInput,
    ParsedOutput,
    Refused,
    check_request,
    serialize_bytes_elements,
    unknown_model,
)
from trt_plugin_kit.serving.edge.upstream import Upstream

log = logging.getLogger("trt_plugin_kit.serving.edge")
_PUBLIC = {
    "ServerLive": (pb.ServerLiveRequest, None),
    "ServerReady": (pb.ServerReadyRequest, None),
    "ModelReady": (pb.ModelReadyRequest, "name"),
    "ServerMetadata": (pb.ServerMetadataRequest, None),
    "ModelMetadata": (pb.ModelMetadataRequest, "name"),
    "ModelConfig": (pb.ModelConfigRequest, "name"),
    "ModelStatistics": (pb.ModelStatisticsRequest, "name"),
}
_ADMIN = {
    "RepositoryIndex": pb.RepositoryIndexRequest,
    "SystemSharedMemoryStatus": pb.SystemSharedMemoryStatusRequest,
    "SystemSharedMemoryRegister": pb.SystemSharedMemoryRegisterRequest,
    "SystemSharedMemoryUnregister": pb.SystemSharedMemoryUnregisterRequest,
    "CudaSharedMemoryStatus": pb.CudaSharedMemoryStatusRequest,
    "CudaSharedMemoryRegister": pb.CudaSharedMemoryRegisterRequest,
    "CudaSharedMemoryUnregister": pb.CudaSharedMemoryUnregisterRequest,
    "TraceSetting": pb.TraceSettingRequest,
    "LogSettings": pb.LogSettingsRequest,
}


def _parameter_value(parameter: pb.InferParameter):
    kind = parameter.WhichOneof("parameter_choice")
    value = getattr(parameter, kind) if kind else None
    return int(value) if kind in ("int64_param", "uint64_param") else value


def _parameters(mapping, where: str) -> dict:
    """A protobuf map, in its keys' order: a map has none of its own, and the first parameter refused must
    be the same for every rule that judges it (the compiled front's too)."""
    if len(mapping) > limits.MAX_PARAMETERS:
        raise Refused(refusal("parameter_count", where=where, most=limits.MAX_PARAMETERS))
    return {key: _parameter_value(mapping[key]) for key in sorted(mapping)}


def parse_model_infer(message: pb.ModelInferRequest) -> InferRequest:
    request = InferRequest(model=message.model_name, version=message.model_version, id=message.id)
    if not NAME.match(request.model):
        raise Refused(refusal("unknown_model_name"), grpc_code="NOT_FOUND")
    if request.version and not VERSION.match(request.version):
        raise Refused(refusal("unknown_version_name"), grpc_code="NOT_FOUND")
    request.parameters = _parameters(message.parameters, refusal("where_request"))
    if not 1 <= len(message.inputs) <= limits.MAX_INPUTS:
        raise Refused(refusal("input_count", most=limits.MAX_INPUTS))
    raw = message.raw_input_contents
    if raw and len(raw) != len(message.inputs):
        raise Refused(refusal("raw_count", raw=len(raw), inputs=len(message.inputs)))
    for position, tensor in enumerate(message.inputs):
        name = tensor.name
        if not NAME.match(name):
            raise Refused(refusal("input_name", position=position))
        where = refusal("where_input", name=repr(name))
        if tensor.datatype not in DATATYPE_BYTES:
            raise Refused(refusal("unknown_datatype", where=where, datatype=repr(tensor.datatype[:16])))
        shape = list(tensor.shape)
        parsed = ParsedInput(name, tensor.datatype, shape, None, _parameters(tensor.parameters, where))
        has_contents = tensor.HasField("contents")
        if raw:
            if has_contents:
                raise Refused(refusal("contents_and_raw", where=where))
            parsed.raw = raw[position]
        elif has_contents:
            parsed.raw = _contents_to_raw(tensor.contents, tensor.datatype, where)
        request.inputs.append(parsed)
    for output in message.outputs:
        where = refusal("where_output", name=repr(output.name))
        request.outputs.append(ParsedOutput(output.name, _parameters(output.parameters, where)))
    return request


def _contents_to_raw(contents: pb.InferTensorContents, datatype: str, where: str) -> bytes:
    if datatype == "BYTES":
        return serialize_bytes_elements(list(contents.bytes_contents))
    if datatype not in CONTENTS:
        raise Refused(refusal("raw_only", where=where, datatype=datatype))
    field, numpy_type = CONTENTS[datatype]
    others = [f.name for f, _ in contents.ListFields() if f.name != field]
    if others:
        raise Refused(refusal("contents_field", where=where, field=others[0], datatype=datatype))
    values = getattr(contents, field)
    if np.issubdtype(numpy_type, np.integer) and values:  # int_contents carries INT8 too: refuse, never wrap
        bounds = np.iinfo(numpy_type)
        if min(values) < bounds.min or max(values) > bounds.max:
            raise Refused(refusal("contents_range", where=where, field=field, datatype=datatype))
    return np.asarray(values, dtype=numpy_type).tobytes()


def encode_model_infer(request: InferRequest) -> bytes:
    message = pb.ModelInferRequest(model_name=request.model, model_version=request.version, id=request.id)
    _set_parameters(message.parameters, request.parameters)
    with_data = [tensor.raw is not None for tensor in request.inputs]
    if any(with_data) and not all(with_data):
        raise Refused(refusal("mixed_data"))
    for tensor in request.inputs:
        entry = message.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        _set_parameters(entry.parameters, tensor.parameters)
        if tensor.raw is not None:
            message.raw_input_contents.append(tensor.raw)
    for output in request.outputs:
        _set_parameters(message.outputs.add(name=output.name).parameters, output.parameters)
    return message.SerializeToString()


def _set_parameters(target, parameters: dict) -> None:
    for key, value in parameters.items():
        if isinstance(value, bool):
            target[key].bool_param = value
        elif isinstance(value, int):
            target[key].int64_param = value
        else:
            target[key].string_param = value


def peer_of_call(peer: str) -> str | None:
    """The budget key of a call's peer as grpc core names it ("ipv4:1.2.3.4:5", "ipv6:%5B::1%5D:5"), None
    for a Unix socket's (the compiled front relaying: its clients were budgeted there)."""
    kind, _, address = urllib.parse.unquote(peer or "").partition(":")
    if kind not in ("ipv4", "ipv6"):
        return None
    return peer_key(address.rpartition(":")[0].strip("[]"))


class GrpcFront:
    def __init__(self, upstream: Upstream, admin_key: str | None, ready=None):
        self.upstream = upstream
        self.admin_key = admin_key
        self.ready = ready
        self.channel: grpc.aio.Channel | None = None
        self.budget = Budget()
        self.peer_calls: dict[str, int] = {}

    def server(self, public: bool = True) -> grpc.aio.Server:
        """The server; ``public``: on the public port (else the compiled front's private relay, whose
        connection stays open between calls and which never relays a compressed message)."""
        options = [
            ("grpc.max_receive_message_length", limits.MAX_GRPC_MESSAGE_BYTES),
            ("grpc.max_send_message_length", -1),
            ("grpc.max_concurrent_streams", limits.MAX_GRPC_STREAMS_PER_CONNECTION),
            ("grpc.max_metadata_size", limits.MAX_GRPC_METADATA_BYTES),
            ("grpc.so_reuseport", 0),
        ]
        if public:
            options += [
                # Nothing but the preface within the handshake time: closed; no call for the idle time
                # (the client's SETTINGS end grpc core's handshake): GOAWAY. PINGs renew neither.
                ("grpc.server_handshake_timeout_ms", int(limits.HANDSHAKE_TIMEOUT_S * 1000)),
                ("grpc.max_connection_idle_ms", int(limits.IDLE_TIMEOUT_S * 1000)),
                # Identity only: grpc core would inflate a message to any method, before a handler could
                # refuse it (UNIMPLEMENTED "Compression algorithm 'gzip' is disabled.").
                ("grpc.compression_enabled_algorithms_bitset", 1),
            ]
        server = grpc.aio.server(options=options, maximum_concurrent_rpcs=limits.MAX_GRPC_CONCURRENT_RPCS)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, self.handlers()),))
        return server

    def handlers(self) -> dict:
        """Every method a client may call, by name (the native front takes this list as its allowlist)."""
        chosen = {"ModelInfer": self.model_infer}
        for name, (message_type, _) in _PUBLIC.items():
            chosen[name] = self._public(name, message_type)
        for name, message_type in _ADMIN.items():
            chosen[name] = self._admin(name, message_type)
        for name in ("RepositoryModelLoad", "RepositoryModelUnload"):
            chosen[name] = self._model_control()
        chosen["ModelStreamInfer"] = self._not_served("ModelStreamInfer")
        return {
            name: grpc.unary_unary_rpc_method_handler(self._budgeted(handler))
            for name, handler in chosen.items()
        }

    def _budgeted(self, handler):
        """The handler within its peer's budgets: calls in flight, and the bytes of its request, then of its
        answer, held until the call is over (its answer sent or the call ended); past one: RESOURCE_EXHAUSTED
        at once."""

        async def budgeted(raw_request: bytes, context) -> bytes:
            peer = peer_of_call(context.peer())
            if peer is None:
                return await handler(raw_request, context)
            if self.peer_calls.get(peer, 0) >= limits.MAX_GRPC_CONCURRENT_RPCS_PER_PEER:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, PEER_CALLS_REFUSAL)
            holding = Holding(self.budget, peer)
            try:
                holding.take(len(raw_request))
            except Refused as refused:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(refused))
            self.peer_calls[peer] = self.peer_calls.get(peer, 0) + 1
            context.add_done_callback(lambda _context: self._call_over(peer, holding))
            answer = await handler(raw_request, context)
            try:
                holding.resize(len(answer))
            except Refused as refused:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(refused))
            return answer

        return budgeted

    def _call_over(self, peer: str, holding: Holding) -> None:
        holding.release()
        calls = self.peer_calls.pop(peer) - 1
        if calls:
            self.peer_calls[peer] = calls

    async def open(self) -> None:
        self.channel = grpc.aio.insecure_channel(
            self.upstream.paths["grpc"],
            options=[
                ("grpc.max_receive_message_length", -1),
                ("grpc.max_send_message_length", limits.MAX_GRPC_MESSAGE_BYTES),
            ],
        )

    async def close(self) -> None:
        if self.channel is not None:
            await self.channel.close()

    async def _call(self, method: str, payload: bytes, context, model: str | None, metadata=()):
        call = self.channel.unary_unary(f"/{SERVICE}/{method}")
        remaining = context.time_remaining()
        timeout = min(limits.UPSTREAM_TIMEOUT_S, remaining) if remaining else limits.UPSTREAM_TIMEOUT_S
        try:
            response = await call(payload, timeout=timeout, metadata=metadata or None)
        except grpc.aio.AioRpcError as error:
            if model is not None:
                self.upstream.record(
                    model,
                    error.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED),
                )
            code = error.code()
            details = error.details() or ""
            if code == grpc.StatusCode.UNAVAILABLE and "restricted" not in details.lower():
                details = UNREACHABLE
            await context.abort(code, details)
        if model is not None:
            self.upstream.record(model, True)
        return response

    async def model_infer(self, raw_request: bytes, context) -> bytes:
        try:
            request = check_request(
                parse_model_infer(pb.ModelInferRequest.FromString(raw_request)), self.upstream.models
            )
            payload = encode_model_infer(request)
        except Refused as refused:
            await context.abort(getattr(grpc.StatusCode, refused.grpc_code), str(refused))
        except Exception as error:  # noqa: BLE001 - a message protobuf cannot parse
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, refusal("malformed_why", why=type(error).__name__)
            )
        return await self._call("ModelInfer", payload, context, request.model)

    def _public(self, method: str, message_type):
        name_field = _PUBLIC[method][1]

        async def handler(raw_request: bytes, context) -> bytes:
            try:
                message = message_type.FromString(raw_request)
            except Exception:  # noqa: BLE001
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "malformed request")
            message.DiscardUnknownFields()
            model = getattr(message, name_field) if name_field else None
            if model and model not in self.upstream.models:
                if method == "ModelReady":  # as Triton answers it: not ready, no error
                    return pb.ModelReadyResponse(ready=False).SerializeToString()
                refused = unknown_model(model)
                await context.abort(grpc.StatusCode.NOT_FOUND, str(refused))
            version = getattr(message, "version", "")
            if version and not VERSION.match(version):
                await context.abort(grpc.StatusCode.NOT_FOUND, "unknown model version")
            if method in ("ServerReady", "ModelReady"):
                why = self.ready() if self.ready else None
                if why is None and model in self.upstream.unhealthy:
                    why = f"model {model!r} stopped answering"
                if why is not None:
                    reply = pb.ServerReadyResponse if method == "ServerReady" else pb.ModelReadyResponse
                    return reply(ready=False).SerializeToString()
            return await self._call(method, message.SerializeToString(), context, None)

        return handler

    def _admin(self, method: str, message_type):
        async def handler(raw_request: bytes, context) -> bytes:
            await self._check_admin(context)
            try:
                message = message_type.FromString(raw_request)
            except Exception:  # noqa: BLE001
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "malformed request")
            message.DiscardUnknownFields()
            return await self._call(
                method, message.SerializeToString(), context, None, self.upstream.grpc_admin_metadata
            )

        return handler

    def _model_control(self):
        async def handler(_raw: bytes, context) -> bytes:
            await self._check_admin(context)
            await context.abort(grpc.StatusCode.UNAVAILABLE, MODEL_CONTROL_REFUSAL)

        return handler

    async def _check_admin(self, context) -> None:
        sent = dict(context.invocation_metadata() or ()).get(GRPC_ADMIN_HEADER, "")
        if self.admin_key is None or not hmac.compare_digest(str(sent).encode(), self.admin_key.encode()):
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                f"This API is restricted, expecting header '{ADMIN_HEADER}' with the admin key",
            )

    def _not_served(self, method: str):
        async def handler(_raw: bytes, context) -> bytes:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not served here")

        return handler
