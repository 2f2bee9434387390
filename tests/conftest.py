"""Shared pytest fixtures, and the markers that say what a test needs.

Tests live by what they need: tests/unit (Python only, seconds), tests/library (the plugin library built by
`make plugins`, TensorRT-RTX), tests/server (a real tritonserver: the fixture below, or one they start). Each
test gets the marker of its folder, so `pytest -m unit`, `-m "not server"` etc. pick a part; `make test`
runs them all. GPU-only checks are not pytest tests: they run on the GPU machine through scripts/gpu_*.sh.

`triton_server` (session scope): a real tritonserver on this repository's models, started the way
`make serve` starts its CPU variant (PyTriton's tritonserver binary, Python backend, --model-config-name=cpu)
on free ports of 127.0.0.1. The object it yields has

    http_url     "127.0.0.1:PORT"                   (tritonclient.http.InferenceServerClient(url=...))
    grpc_url     "127.0.0.1:PORT"                   (tritonclient.grpc.InferenceServerClient(url=...))
    metrics_url  "http://127.0.0.1:PORT/metrics"    (Prometheus text format)
    log_file     path of the server's log (handy in assertion messages)

and is a trt_plugin_kit.serving.TritonServer (`is_running()`, `log_tail()`, `admin_key`: a random key the
tests know, as an operator who set TRITON_ADMIN_KEY would). The server stops at the end of
the session, also when tests fail. Set TRITON_TEST_MODEL_REPOSITORY to serve another model repository.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from trt_plugin_kit.serving import MODEL_REPOSITORY, Ports, ServingError, TritonServer

SERVER_START_ATTEMPTS = 3  # a port picked as free can be taken by someone else before Triton binds it
SERVER_READY_TIMEOUT_S = 180.0


@pytest.fixture(scope="session")
def triton_server(tmp_path_factory):
    model_repository = Path(os.environ.get("TRITON_TEST_MODEL_REPOSITORY", MODEL_REPOSITORY))
    log_dir = tmp_path_factory.mktemp("tritonserver")
    errors = []
    for attempt in range(1, SERVER_START_ATTEMPTS + 1):
        server = TritonServer(
            variant="cpu",
            ports=Ports.free("127.0.0.1"),
            host="127.0.0.1",
            model_repository=model_repository,
            log_file=log_dir / f"tritonserver-{attempt}.log",
            exit_timeout_s=3,  # do not wait long for test clients' idle keep-alive connections
            # The tests play the operator who configured a key (TRITON_ADMIN_KEY); without one the admin
            # APIs are closed to everybody (test_serving_hardening.py checks that on its own server).
            admin_key=os.environ.get("TRITON_ADMIN_KEY") or secrets.token_urlsafe(32),
        )
        try:
            server.start()
            server.wait_until_ready(SERVER_READY_TIMEOUT_S)
        except ServingError as error:
            server.stop()
            errors.append(f"attempt {attempt}: {error}")
            if "address already in use" not in str(error).lower():
                break
            continue
        try:
            yield server
        finally:
            server.stop()
        return
    pytest.fail("could not start tritonserver for the tests:\n" + "\n".join(errors), pytrace=False)


MARKED_FOLDERS = ("unit", "library", "server")


def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        if folder in MARKED_FOLDERS:
            item.add_marker(getattr(pytest.mark, folder))
