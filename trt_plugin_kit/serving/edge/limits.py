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

# Time budgets no keepalive or PING renews (the compiled gRPC front; the answer time is HTTP's too): a
# connection that sends no request within the handshake time is closed; one without a call for the idle
# time is told GOAWAY and closed; an answer the client has not read within the answer time ends its stream
# (RST_STREAM CANCEL; HTTP: the connection) and frees its slot, and a connection whose socket takes nothing
# we send for that long is closed.
HANDSHAKE_TIMEOUT_S = 5.0
IDLE_TIMEOUT_S = 30.0
ANSWER_TIMEOUT_S = 10.0

# Connections, per front and per peer address (IPv6: its /64), counted at accept: past either cap a
# connection is accepted and closed at once (never left in the backlog, never near the descriptor limit).
MAX_HTTP_CONNECTIONS = 1024
MAX_GRPC_CONNECTIONS = 1024
MAX_CONNECTIONS_PER_PEER = 128
# Calls in flight: beyond these a gRPC call is answered RESOURCE_EXHAUSTED at once (policy.CONCURRENT_REFUSAL,
# policy.PEER_CALLS_REFUSAL) instead of waiting or growing memory.
MAX_GRPC_CONCURRENT_RPCS = 512
MAX_GRPC_CONCURRENT_RPCS_PER_PEER = 128
MAX_GRPC_STREAMS_PER_CONNECTION = 64
MAX_GRPC_METADATA_BYTES = 16 * 1024

# Memory: the bytes each front holds for its clients (requests being received or inflated, answers not yet
# sent), in all and per peer; the compiled gRPC front also per connection (an HTTP/1.1 connection carries
# one request at a time). Past a budget a request is refused at once: HTTP 503 (the front's) or 429 (the
# peer's) with Retry-After, gRPC RESOURCE_EXHAUSTED (policy.BUSY_REFUSAL). Sized for a 2-core / 4 GiB
# container: both fronts at their budgets leave tritonserver about 3 GiB.
BUFFER_BYTES = 512 * 1024 * 1024
BUFFER_BYTES_PER_PEER = 160 * 1024 * 1024
GRPC_BUFFER_BYTES_PER_CONNECTION = 96 * 1024 * 1024
RETRY_AFTER_S = 1
# Compressed gRPC messages waiting for or in the inflater's thread (never the front's loop); more: refused.
GRPC_INFLATE_PENDING = 2

# Model health: every model is probed this often through the private socket; a model that fails this many
# probes in a row (a dead Python stub, a model that stopped answering) makes the edge report not ready and
# exit, so that the supervisor restarts tritonserver.
HEALTH_PERIOD_S = 1.0
HEALTH_PROBE_TIMEOUT_S = 5.0
HEALTH_FAILURES = 3
# Reading a model's completed-request count (tritonserver's statistics, which wait behind no inference) when a
# probe timed out: its own deadline, so that a short probe deadline never makes progress unreadable.
HEALTH_STATS_TIMEOUT_S = 5.0
# The JSON part of an HTTP inference request (the whole body without the binary extension): JSON numbers
# cost far more to parse than their bytes, so large tensors must come in binary form (the clients of this
# kit and tritonclient send binary by default). 64 l2norm vectors of 4096 values as JSON are about 3 MB.
MAX_JSON_BYTES = 8 * 1024 * 1024
# A JSON part larger than this is parsed in a worker thread, so that the event loop keeps answering.
JSON_INLINE_BYTES = 64 * 1024
