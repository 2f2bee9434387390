"""End-to-end tests against the real tritonserver started by the `triton_server` fixture (CPU variant)."""

from __future__ import annotations

import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from trt_plugin_kit.serving import MODEL_NAMES


def test_server_is_live_and_serves_every_model(triton_server):
    http = httpclient.InferenceServerClient(url=triton_server.http_url)
    grpc = grpcclient.InferenceServerClient(url=triton_server.grpc_url)
    try:
        assert http.is_server_ready() and grpc.is_server_ready()
        for name in MODEL_NAMES:
            assert http.is_model_ready(name), f"{name} not ready; log:\n{triton_server.log_tail()}"
            assert grpc.is_model_ready(name)
    finally:
        http.close()
        grpc.close()
