"""The serving edge: the only way into tritonserver, for HTTP, gRPC and metrics.

An allowlist: the KServe v2 endpoints this kit serves, each request parsed once, held against the served
model's configuration and re-encoded before tritonserver sees it (docs/SECURITY.md). tritonserver itself
listens on private Unix sockets only. Start it through trt_plugin_kit.serving.server.TritonServer (make
serve).
"""
