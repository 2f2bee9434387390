"""The edge's policy in words and tables, one home for both protocols: what a client is told past a rule or a
budget, the gRPC service, and which gRPC contents field carries which datatype. The HTTP front, the Python
gRPC front and the compiled one take them from here (the compiled front on its stdin:
native_front.configuration), so that a rule cannot read differently between protocols. The numbers live in
edge/limits.py; names, datatypes and parameters in edge/tensors.py.
"""

from __future__ import annotations

import numpy as np

SERVICE = "inference.GRPCInferenceService"

# tritonserver cannot be reached (its own words would name a private socket).
UNREACHABLE = "the inference server is not reachable right now"
# Every deployment runs --model-control-mode=none: what the repository held at start is all it serves.
MODEL_CONTROL_REFUSAL = (
    "explicit model load / unload is not allowed: this server's model control mode is none"
)
# Past limits.MAX_GRPC_CONCURRENT_RPCS (grpcio's own words for it).
CONCURRENT_REFUSAL = "Concurrent RPC limit exceeded!"
# Past limits.MAX_GRPC_CONCURRENT_RPCS_PER_PEER.
PEER_CALLS_REFUSAL = "this client has too many calls in flight; wait for their answers"
# Past a byte budget (limits.BUFFER_BYTES*), or the inflater's queue: HTTP 503/429, gRPC RESOURCE_EXHAUSTED.
BUSY_REFUSAL = "the server holds all it can for its clients right now; try again shortly"
# A compressed gRPC message to another method than ModelInfer (none needs it; none is inflated).
COMPRESSION_REFUSAL = "compressed messages are accepted for ModelInfer only"

# InferTensorContents field -> (datatypes it may carry, numpy type of the raw encoding)
CONTENTS = {
    "BOOL": ("bool_contents", np.bool_),
    "INT8": ("int_contents", np.int8),
    "INT16": ("int_contents", np.int16),
    "INT32": ("int_contents", np.int32),
    "INT64": ("int64_contents", np.int64),
    "UINT8": ("uint_contents", np.uint8),
    "UINT16": ("uint_contents", np.uint16),
    "UINT32": ("uint_contents", np.uint32),
    "UINT64": ("uint64_contents", np.uint64),
    "FP32": ("fp32_contents", np.float32),
    "FP64": ("fp64_contents", np.float64),
}

# What an inference request is told, rule by rule: one template per refusal, each {field} filled by the rule
# (already rendered: a name as repr() shows it, a shape as a list). The HTTP front and the Python gRPC front
# take them from here (edge/tensors.py, grpc_front.py), the compiled front on its stdin ("refusal KEY TEXT",
# native_front.configuration), so that a refusal reads the same whichever front gives it.
REFUSALS = {
    # where: the request, one of its inputs or outputs
    "where_request": "the request",
    "where_request_parameters": "request",
    "where_input": "input {name}",
    "where_output": "output {name}",
    # the message on its own
    "unknown_model_name": "unknown model",
    "unknown_version_name": "unknown model version",
    "parameter_count": "{where}: at most {most} parameters",
    "input_count": "the request needs 1..{most} inputs",
    "raw_count": "{raw} raw_input_contents for {inputs} inputs",
    "input_name": "inputs[{position}] needs a valid name",
    "unknown_datatype": "{where}: unknown datatype {datatype}",
    "contents_and_raw": "{where}: both contents and raw_input_contents",
    "raw_only": "{where}: {datatype} must be sent in raw_input_contents",
    "contents_field": "{where}: {field} does not carry {datatype}",
    "contents_range": "{where}: a value of {field} is out of range for {datatype}",
    "contents_size": "{where}: its contents need more than {most} bytes; this server accepts at most {most} "
    "bytes per request",
    # against the model
    "unknown_model": "Request for unknown model: {model} is not found",
    "no_version": "model {model} has no version {version}",
    "id_length": "request id longer than {most} characters",
    "parameter_unknown": "{where}: parameter {key} is not accepted by this server",
    "parameter_value": "{where}: parameter {key} must be a {kind} in range, got {value}",
    "parameter_name": "{where}: parameter {key} is not a valid name",
    "input_names": "model {model} takes inputs {expected}, the request has {names}",
    "datatype": "{where}: datatype {datatype}, the model expects {expected}",
    "shape_length": "{where}: 'shape' must be a list of at most {most} dimensions",
    "dimension": "{where}: dimension {dim} of shape is not an integer in 0..{most}",
    "batch_missing": "{where}: shape {shape} needs [batch, {dims}] (no batch dimension?)",
    "batch_size": "{where}: batch size {batch} of shape {shape} is not in 1..{most}",
    "batch_differs": "{where}: batch size {batch} differs from the other inputs' {other}",
    "dims": "{where}: shape {shape} does not match the model's dims {dims}",
    "shape_bytes": "{where}: shape {shape} needs {size} bytes; this server accepts at most {most} bytes per "
    "request",
    "no_data": "{where} has no data",
    "data_and_region": "{where}: data and a shared-memory region at once",
    "data_size": "{where}: shape {shape} of {datatype} needs {size} bytes, got {got}",
    "bytes_length": "{where}: BYTES data ends inside an element's length",
    "bytes_element": "{where}: a BYTES element claims {length} bytes past the end of the data",
    "bytes_count": "{where}: shape {shape} declares {elements} elements but the data holds {count}",
    "inputs_bytes": "the inputs hold {total} bytes; this server accepts at most {most}",
    "output_count": "at most {most} outputs per request",
    "no_output": "model {model} has no output {output}",
    "mixed_data": "inputs in shared memory and inputs with data cannot be mixed in one request",
    "malformed": "malformed request",
    "malformed_why": "malformed request ({why})",
}


def refusal(which: str, /, **fields) -> str:
    """The words of refusal `which` (a key of REFUSALS) with its fields filled."""
    return REFUSALS[which].format(**fields)
