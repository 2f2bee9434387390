"""What an inference request may be, for both protocols: the served models' interfaces and the one check.

The HTTP and gRPC fronts each parse their wire format into :class:`InferRequest` (tensors as raw little-endian
bytes, the layout Triton's binary extension and gRPC's ``raw_input_contents`` share) and hand it to
:func:`check_request`, which holds it against the model's configuration as tritonserver reported it at start:
input names, datatypes, the batch dimension within ``max_batch_size``, fixed dimensions equal, variable ones
bounded, and the bytes received equal to what the shape needs. Only then is the request re-encoded and sent
on; tritonserver never sees bytes this module did not account for.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass, field

from trt_plugin_kit.serving.edge import limits
from trt_plugin_kit.serving.edge.policy import refusal
from trt_plugin_kit.tritonserver.protocol import TensorSpec

# Triton datatype -> bytes per element (BYTES: length-prefixed, variable).
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
    "BYTES": None,
}
# model_config.proto's TYPE_* names -> the protocol's datatype names.
CONFIG_DATATYPES = {f"TYPE_{name}": name for name in DATATYPE_BYTES if name != "BYTES"} | {
    "TYPE_STRING": "BYTES"
}
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
VERSION = re.compile(r"^[0-9]{1,9}$")


class Refused(Exception):
    """A request the edge answers itself. ``status``: HTTP status; ``grpc_code``: grpc.StatusCode name."""

    def __init__(self, message: str, status: int = 400, grpc_code: str = "INVALID_ARGUMENT"):
        super().__init__(message)
        self.status = status
        self.grpc_code = grpc_code


def not_found(what: str) -> Refused:
    return Refused(what, status=404, grpc_code="NOT_FOUND")


def unknown_model(model: str) -> Refused:
    """Triton's own words for it (clients match on them)."""
    return not_found(refusal("unknown_model", model=f"'{model[:128]}'"))


def too_large(what: str) -> Refused:
    return Refused(what, status=413, grpc_code="RESOURCE_EXHAUSTED")


# ----------------------------------------------------------------------------------------------- models


@dataclass(frozen=True)
class ModelInterface:
    """One served model as its configuration says (read from tritonserver, never from a request)."""

    name: str
    max_batch_size: int
    inputs: dict[str, TensorSpec]
    outputs: frozenset[str]
    versions: frozenset[str] = frozenset({"1"})

    @classmethod
    def from_config(cls, config: dict) -> ModelInterface:
        """From the JSON of ``GET /v2/models/<name>/config`` (numbers may come as strings)."""

        def spec(entry: dict) -> TensorSpec:
            datatype = CONFIG_DATATYPES[entry["data_type"]]
            return TensorSpec(entry["name"], datatype, tuple(int(d) for d in entry.get("dims", [])))

        return cls(
            name=config["name"],
            max_batch_size=int(config.get("max_batch_size", 0)),
            inputs={entry["name"]: spec(entry) for entry in config.get("input", [])},
            outputs=frozenset(entry["name"] for entry in config.get("output", [])),
        )


# ---------------------------------------------------------------------------------------------- requests


@dataclass
class ParsedInput:
    """One input as the edge parsed it from the wire: its bytes, checked and re-encoded for tritonserver (the
    clients' request input, NumPy data, is trt_plugin_kit.tritonserver.protocol.InputTensor)."""

    name: str
    datatype: str
    shape: list[int]
    raw: bytes | None = None  # None: in a registered shared-memory region (parameters say where)
    parameters: dict = field(default_factory=dict)


@dataclass
class ParsedOutput:
    """One requested output as the edge parsed it (the clients' is trt_plugin_kit.tritonserver.protocol's)."""

    name: str
    parameters: dict = field(default_factory=dict)


@dataclass
class InferRequest:
    model: str
    version: str = ""
    id: str = ""
    inputs: list[ParsedInput] = field(default_factory=list)
    outputs: list[ParsedOutput] = field(default_factory=list)
    parameters: dict = field(default_factory=dict)


# Parameters a request may carry, and their types; anything else is refused by name.
SHM_PARAMETERS = {"shared_memory_region": str, "shared_memory_byte_size": int, "shared_memory_offset": int}
OUTPUT_PARAMETERS = {"binary_data": bool, "classification": int} | SHM_PARAMETERS
# triton_enable_empty_final_response: NVIDIA's perf_analyzer sets it on every gRPC request. It only shapes a
# decoupled model's stream; the edge forwards single requests to models that are not decoupled, so it is
# accepted (checked as a bool) and dropped, never forwarded.
DROPPED_REQUEST_PARAMETERS = {"triton_enable_empty_final_response": bool}
REQUEST_PARAMETERS = {"binary_data_output": bool} | DROPPED_REQUEST_PARAMETERS


def check_parameters(parameters: dict, allowed: dict[str, type], where: str) -> dict:
    """A copy of ``parameters`` holding only allowed names with values of the allowed type, else Refused."""
    checked = {}
    for key, value in parameters.items():
        kind = allowed.get(key)
        if kind is None:
            raise Refused(refusal("parameter_unknown", where=where, key=repr(key)))
        if type(value) is not kind or (kind is int and not 0 <= value <= limits.MAX_REQUEST_BYTES):
            raise Refused(
                refusal("parameter_value", where=where, key=repr(key), kind=kind.__name__, value=repr(value))
            )
        if kind is str and not NAME.match(value):
            raise Refused(refusal("parameter_name", where=where, key=repr(key)))
        checked[key] = value
    return checked


def check_shape(shape: list, where: str) -> list[int]:
    """Non-negative integers, few of them, each bounded: checked before any arithmetic on them."""
    if not isinstance(shape, list) or len(shape) > limits.MAX_SHAPE_DIMS:
        raise Refused(refusal("shape_length", where=where, most=limits.MAX_SHAPE_DIMS))
    for dim in shape:
        if type(dim) is not int or not 0 <= dim <= limits.MAX_DIMENSION:
            raise Refused(refusal("dimension", where=where, dim=repr(dim), most=limits.MAX_DIMENSION))
    return shape


def check_request(request: InferRequest, models: dict[str, ModelInterface]) -> InferRequest:
    """Hold a parsed request against its model; returns it, or raises Refused naming the problem."""
    model = models.get(request.model)
    if model is None:
        raise unknown_model(request.model)
    if request.version and request.version not in model.versions:
        raise not_found(refusal("no_version", model=repr(request.model), version=repr(request.version)))
    if len(request.id) > limits.MAX_ID_LENGTH:
        raise Refused(refusal("id_length", most=limits.MAX_ID_LENGTH))
    request.parameters = {
        key: value
        for key, value in check_parameters(
            request.parameters, REQUEST_PARAMETERS, refusal("where_request_parameters")
        ).items()
        if key not in DROPPED_REQUEST_PARAMETERS
    }
    names = [tensor.name for tensor in request.inputs]
    if sorted(names) != sorted(model.inputs):
        raise Refused(
            refusal("input_names", model=repr(model.name), expected=sorted(model.inputs), names=sorted(names))
        )
    total = 0
    batch = None
    for tensor in request.inputs:
        spec = model.inputs[tensor.name]
        where = refusal("where_input", name=repr(tensor.name))
        if tensor.datatype != spec.datatype:
            raise Refused(
                refusal("datatype", where=where, datatype=repr(tensor.datatype), expected=spec.datatype)
            )
        shape = check_shape(tensor.shape, where)
        dims = shape
        if model.max_batch_size > 0:
            if len(shape) != len(spec.dims) + 1:
                raise Refused(
                    refusal("batch_missing", where=where, shape=shape, dims=", ".join(map(str, spec.dims)))
                )
            if not 1 <= shape[0] <= model.max_batch_size:
                raise Refused(
                    refusal("batch_size", where=where, batch=shape[0], shape=shape, most=model.max_batch_size)
                )
            if batch is not None and shape[0] != batch:
                raise Refused(refusal("batch_differs", where=where, batch=shape[0], other=batch))
            batch, dims = shape[0], shape[1:]
        if len(dims) != len(spec.dims) or any(s not in (-1, d) for s, d in zip(spec.dims, dims, strict=True)):
            raise Refused(refusal("dims", where=where, shape=shape, dims=list(spec.dims)))
        elements = math.prod(shape)  # at most 8 factors of <= 2^24 each: exact, and compared right away
        item = DATATYPE_BYTES[tensor.datatype]
        if item is not None and elements * item > limits.MAX_REQUEST_BYTES:
            raise too_large(
                refusal(
                    "shape_bytes",
                    where=where,
                    shape=shape,
                    size=elements * item,
                    most=limits.MAX_REQUEST_BYTES,
                )
            )
        tensor.parameters = check_parameters(tensor.parameters, SHM_PARAMETERS, where)
        if tensor.raw is None:
            if "shared_memory_region" not in tensor.parameters:
                raise Refused(refusal("no_data", where=where))
            continue
        if tensor.parameters:
            raise Refused(refusal("data_and_region", where=where))
        if item is not None:
            if len(tensor.raw) != elements * item:
                raise Refused(
                    refusal(
                        "data_size",
                        where=where,
                        shape=shape,
                        datatype=tensor.datatype,
                        size=elements * item,
                        got=len(tensor.raw),
                    )
                )
        else:
            count = count_bytes_elements(tensor.raw, where, stop_after=elements)
            if count != elements:
                raise Refused(
                    refusal("bytes_count", where=where, shape=shape, elements=elements, count=count)
                )
        total += len(tensor.raw)
    if total > limits.MAX_REQUEST_BYTES:
        raise too_large(refusal("inputs_bytes", total=total, most=limits.MAX_REQUEST_BYTES))
    if len(request.outputs) > limits.MAX_OUTPUTS:
        raise Refused(refusal("output_count", most=limits.MAX_OUTPUTS))
    for output in request.outputs:
        if output.name not in model.outputs:
            raise Refused(refusal("no_output", model=repr(model.name), output=repr(output.name)))
        where = refusal("where_output", name=repr(output.name))
        output.parameters = check_parameters(output.parameters, OUTPUT_PARAMETERS, where)
    return request


def count_bytes_elements(raw: bytes, where: str, stop_after: int) -> int:
    """Elements of a serialized BYTES tensor (4-byte little-endian length, then the bytes), which must
    account for every byte; stops counting past ``stop_after`` (a body of empty elements is no work)."""
    count, offset, end = 0, 0, len(raw)
    while offset < end and count <= stop_after:
        if end - offset < 4:
            raise Refused(refusal("bytes_length", where=where))
        (length,) = struct.unpack_from("<I", raw, offset)
        offset += 4 + length
        if offset > end:
            raise Refused(refusal("bytes_element", where=where, length=length))
        count += 1
    return count


def serialize_bytes_elements(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(item)) + item for item in items)


def probe_request(model: ModelInterface) -> InferRequest:
    """The smallest well-formed request of ``model``: batch 1, variable dimensions 1, zeros (BYTES: one empty
    element, which an image model refuses: a refusal is an answer, and that is all a health probe needs)."""
    inputs = []
    for spec in model.inputs.values():
        shape = ([1] if model.max_batch_size > 0 else []) + [1 if d < 0 else d for d in spec.dims]
        elements = math.prod(shape)
        item = DATATYPE_BYTES[spec.datatype]
        raw = serialize_bytes_elements([b""] * elements) if item is None else bytes(elements * item)
        inputs.append(ParsedInput(spec.name, spec.datatype, shape, raw))
    return InferRequest(model=model.name, inputs=inputs)
