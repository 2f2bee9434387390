"""Every number the edge enforces, in one place (docs/SECURITY.md quotes them; tests import them)."""

from __future__ import annotations

try:  # a deadline on the current task; asyncio.wait_for would start a task per request to time
    from asyncio import timeout as time_limit  # Python >= 3.11
except ImportError:  # pragma: no cover - Python 3.10, where aiohttp installs async-timeout
    from async_timeout import timeout as time_limit  # noqa: F401

# Largest inference request, HTTP body after decompression or gRPC message: what the biggest legitimate
# request of this kit needs (64 images of mnist_preprocess's 8 MiB limit would not fit; 64 digits of any
# phone-photo size do) and what the Python backend's shared memory is sized for
# (trt_plugin_kit.serving.shm_budget).
MAX_REQUEST_BYTES = 32 * 1024 * 1024
# Any other body (admin JSON, shared-memory registration): small.
MAX_CONTROL_BODY_BYTES = 64 * 1024
# A gRPC message may carry a few bytes of framing around the tensors.
MAX_GRPC_MESSAGE_BYTES = MAX_REQUEST_BYTES + 64 * 1024

# Tensors: checked against the served model's own configuration first; these bound what no configuration
# says (a variable dimension, a BYTES element) and every count before any arithmetic on it.
MAX_DIMENSION = 2**24  # per variable dimension (l2norm's vectors: 4096; the model refuses more itself)
MAX_INPUTS = 16
MAX_OUTPUTS = 16
MAX_ID_LENGTH = 256
MAX_PARAMETERS = 8  # per request, input or output
MAX_SHAPE_DIMS = 8
MAX_JSON_NUMBER_DIGITS = 32  # an integer literal longer than this is refused (edge/wire_json.py: how)

# Time: a client gets this long for its request line and headers, then for its body; a request upstream
# gets this long to be answered.
# (the header limit is also the keep-alive limit: an idle connection is closed after that long).
HEADER_TIMEOUT_S = 15.0
BODY_TIMEOUT_S = 30.0
UPSTREAM_TIMEOUT_S = 60.0
# Decompressing a request body: bounded in output (MAX_REQUEST_BYTES) and in time, in a worker thread.
DECOMPRESS_TIMEOUT_S = 2.0

# Connections and requests in flight: beyond these, new connections wait in the kernel's backlog and new
# gRPC calls are answered RESOURCE_EXHAUSTED instead of growing memory without bound.
MAX_HTTP_CONNECTIONS = 1024
MAX_GRPC_CONCURRENT_RPCS = 512
MAX_GRPC_STREAMS_PER_CONNECTION = 64
MAX_GRPC_METADATA_BYTES = 16 * 1024

# Model health: every model is probed this often through the private socket; a model that fails this many
# probes in a row (a dead Python stub, a model that stopped answering) makes the edge report not ready and
# exit, so that the supervisor restarts tritonserver.
HEALTH_PERIOD_S = 1.0
HEALTH_PROBE_TIMEOUT_S = 5.0
HEALTH_FAILURES = 3
# The JSON part of an HTTP inference request (the whole body without the binary extension): JSON numbers
# cost far more to parse than their bytes, so large tensors must come in binary form (the clients of this
# kit and tritonclient send binary by default). 64 l2norm vectors of 4096 values as JSON are about 3 MB.
MAX_JSON_BYTES = 8 * 1024 * 1024
# A JSON part larger than this is parsed in a worker thread, so that the event loop keeps answering.
JSON_INLINE_BYTES = 64 * 1024
