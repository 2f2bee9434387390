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
    return not_found(f"Request for unknown model: '{model[:128]}' is not found")


def too_large(what: str) -> Refused:
    return Refused(what, status=413, grpc_code="RESOURCE_EXHAUSTED")


# ----------------------------------------------------------------------------------------------- models


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str
    dims: tuple[int, ...]  # without the batch dimension; -1 = variable


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
            raise Refused(f"{where}: parameter {key!r} is not accepted by this server")
        if type(value) is not kind or (kind is int and not 0 <= value <= limits.MAX_REQUEST_BYTES):
            raise Refused(f"{where}: parameter {key!r} must be a {kind.__name__} in range, got {value!r}")
        if kind is str and not NAME.match(value):
            raise Refused(f"{where}: parameter {key!r} is not a valid name")
        checked[key] = value
    return checked


def check_shape(shape: list, where: str) -> list[int]:
    """Non-negative integers, few of them, each bounded: checked before any arithmetic on them."""
    if not isinstance(shape, list) or len(shape) > limits.MAX_SHAPE_DIMS:
        raise Refused(f"{where}: 'shape' must be a list of at most {limits.MAX_SHAPE_DIMS} dimensions")
    for dim in shape:
        if type(dim) is not int or not 0 <= dim <= limits.MAX_DIMENSION:
            raise Refused(
                f"{where}: dimension {dim!r} of shape is not an integer in 0..{limits.MAX_DIMENSION}"
            )
    return shape


def check_request(request: InferRequest, models: dict[str, ModelInterface]) -> InferRequest:
    """Hold a parsed request against its model; returns it, or raises Refused naming the problem."""
    model = models.get(request.model)
    if model is None:
        raise unknown_model(request.model)
    if request.version and request.version not in model.versions:
        raise not_found(f"model {request.model!r} has no version {request.version!r}")
    if len(request.id) > limits.MAX_ID_LENGTH:
        raise Refused(f"request id longer than {limits.MAX_ID_LENGTH} characters")
    request.parameters = {
        key: value
        for key, value in check_parameters(request.parameters, REQUEST_PARAMETERS, "request").items()
        if key not in DROPPED_REQUEST_PARAMETERS
    }
    names = [tensor.name for tensor in request.inputs]
    if sorted(names) != sorted(model.inputs):
        raise Refused(
            f"model {model.name!r} takes inputs {sorted(model.inputs)}, the request has {sorted(names)}"
        )
    total = 0
    batch = None
    for tensor in request.inputs:
        spec = model.inputs[tensor.name]
        where = f"input {tensor.name!r}"
        if tensor.datatype != spec.datatype:
            raise Refused(f"{where}: datatype {tensor.datatype!r}, the model expects {spec.datatype}")
        shape = check_shape(tensor.shape, where)
        dims = shape
        if model.max_batch_size > 0:
            if len(shape) != len(spec.dims) + 1:
                raise Refused(
                    f"{where}: shape {shape} needs [batch, {', '.join(map(str, spec.dims))}] "
                    "(no batch dimension?)"
                )
            if not 1 <= shape[0] <= model.max_batch_size:
                raise Refused(
                    f"{where}: batch size {shape[0]} of shape {shape} is not in 1..{model.max_batch_size}"
                )
            if batch is not None and shape[0] != batch:
                raise Refused(f"{where}: batch size {shape[0]} differs from the other inputs' {batch}")
            batch, dims = shape[0], shape[1:]
        if len(dims) != len(spec.dims) or any(s not in (-1, d) for s, d in zip(spec.dims, dims, strict=True)):
            raise Refused(f"{where}: shape {shape} does not match the model's dims {list(spec.dims)}")
        elements = math.prod(shape)  # at most 8 factors of <= 2^24 each: exact, and compared right away
        item = DATATYPE_BYTES[tensor.datatype]
        if item is not None and elements * item > limits.MAX_REQUEST_BYTES:
            raise too_large(
                f"{where}: shape {shape} needs {elements * item} bytes; this server accepts at most "
                f"{limits.MAX_REQUEST_BYTES} bytes per request"
            )
        tensor.parameters = check_parameters(tensor.parameters, SHM_PARAMETERS, where)
        if tensor.raw is None:
            if "shared_memory_region" not in tensor.parameters:
                raise Refused(f"{where} has no data")
            continue
        if tensor.parameters:
            raise Refused(f"{where}: data and a shared-memory region at once")
        if item is not None:
            if len(tensor.raw) != elements * item:
                raise Refused(
                    f"{where}: shape {shape} of {tensor.datatype} needs {elements * item} bytes, "
                    f"got {len(tensor.raw)}"
                )
        else:
            count = count_bytes_elements(tensor.raw, where, stop_after=elements)
            if count != elements:
                raise Refused(
                    f"{where}: shape {shape} declares {elements} elements but the data holds {count}"
                )
        total += len(tensor.raw)
    if total > limits.MAX_REQUEST_BYTES:
        raise too_large(
            f"the inputs hold {total} bytes; this server accepts at most {limits.MAX_REQUEST_BYTES}"
        )
    if len(request.outputs) > limits.MAX_OUTPUTS:
        raise Refused(f"at most {limits.MAX_OUTPUTS} outputs per request")
    for output in request.outputs:
        if output.name not in model.outputs:
            raise Refused(f"model {model.name!r} has no output {output.name!r}")
        output.parameters = check_parameters(output.parameters, OUTPUT_PARAMETERS, f"output {output.name!r}")
    return request


def count_bytes_elements(raw: bytes, where: str, stop_after: int) -> int:
    """Elements of a serialized BYTES tensor (4-byte little-endian length, then the bytes), which must
    account for every byte; stops counting past ``stop_after`` (a body of empty elements is no work)."""
    count, offset, end = 0, 0, len(raw)
    while offset < end and count <= stop_after:
        if end - offset < 4:
            raise Refused(f"{where}: BYTES data ends inside an element's length")
        (length,) = struct.unpack_from("<I", raw, offset)
        offset += 4 + length
        if offset > end:
            raise Refused(f"{where}: a BYTES element claims {length} bytes past the end of the data")
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
