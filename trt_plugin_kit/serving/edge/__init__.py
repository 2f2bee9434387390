"""The serving edge: the only way into tritonserver, for HTTP, gRPC and metrics.

An allowlist: the KServe v2 endpoints this kit serves, each request parsed once, held against the served
model's configuration and re-encoded before tritonserver sees it (docs/SECURITY.md). tritonserver itself
listens on private Unix sockets only. Start it through trt_plugin_kit.serving.server.TritonServer (make
serve).
"""

from trt_plugin_kit.serving.edge import limits
from trt_plugin_kit.serving.edge.contract import socket_paths
from trt_plugin_kit.serving.edge.tensors import ModelInterface, Refused, check_request

__all__ = ["ModelInterface", "Refused", "check_request", "limits", "socket_paths"]
