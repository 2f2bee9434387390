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
