"""What a client can and cannot make the server do (docs/SECURITY.md), checked against the real tritonserver
of the `triton_server` fixture (the CPU variant of `make serve`, same flags as the TensorRT variant) over
HTTP and gRPC. The claims already covered elsewhere (unload, repository index, shared memory through the
client CLI, the bad-input matrix) are pointed to from docs/SECURITY.md; these tests cover the rest.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from trt_plugin_kit import serve
from trt_plugin_kit.serving import ADMIN_HEADER, GRPC_ADMIN_HEADER, MODEL_NAMES

PROTOCOLS = ("http", "grpc")


@pytest.fixture(params=PROTOCOLS)
def client(request, triton_server):
    module = httpclient if request.param == "http" else grpcclient
    url = triton_server.http_url if request.param == "http" else triton_server.grpc_url
    connection = module.InferenceServerClient(url=url)
    connection.protocol = request.param
    connection.module = module
    connection.admin = {
        (ADMIN_HEADER if request.param == "http" else GRPC_ADMIN_HEADER): triton_server.admin_key
    }
    yield connection
    connection.close()


def bytes_request(client, blob: bytes):
    tensor = client.module.InferInput("image_bytes", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([blob], dtype=np.object_).reshape(1, 1))
    return client.infer("mnist_pipeline", [tensor])


def assert_still_serving(client) -> None:
    tensor = client.module.InferInput("vector", [1, 2], "FP32")
    tensor.set_data_from_numpy(np.array([[3.0, 4.0]], dtype=np.float32))
    np.testing.assert_allclose(client.infer("l2norm", [tensor]).as_numpy("normalized"), [[0.6, 0.8]])


# ------------------------------------------------------------------------------------- model control


def test_no_client_can_load_or_upload_a_model(client, triton_server):
    """model-control-mode none + restricted model-repository API: loading is refused without the key, and
    even with it (nothing is loaded after start); an uploaded model (config + files) never reaches disk."""
    marker = Path("/tmp/trt_plugin_kit_security_marker")
    marker.unlink(missing_ok=True)
    upload = {
        "config": json.dumps({"name": "evil", "backend": "python", "max_batch_size": 0}),
        "files": {"file:1/model.py": f"open({str(marker)!r}, 'w').write('loaded')\n".encode()},
    }
    with pytest.raises(InferenceServerException, match="restricted"):
        client.load_model("mnist")
    with pytest.raises(InferenceServerException, match="restricted"):
        client.load_model("evil", **upload)
    for name, extra in (("mnist", {}), ("evil", upload), ("../../etc", {})):
        with pytest.raises(InferenceServerException) as refused:
            client.load_model(name, headers=client.admin, **extra)
        message = str(refused.value)
        assert "not allowed" in message or "Not Found" in message, message
    index = client.get_model_repository_index(headers=client.admin)
    names = [m["name"] for m in index] if client.protocol == "http" else [m.name for m in index.models]
    assert sorted(names) == sorted(MODEL_NAMES)
    assert not (Path(triton_server.model_repository) / "evil").exists()
    assert not marker.exists()
    assert_still_serving(client)


# ------------------------------------------------------------------------------------- admin APIs


@pytest.mark.parametrize(
    "call",
    [
        "get_trace_settings",
        "update_trace_settings",
        "get_log_settings",
        "update_log_settings",
        "get_system_shared_memory_status",
        "get_cuda_shared_memory_status",
        "register_system_shared_memory",
        "unregister_system_shared_memory",
        "get_model_repository_index",
    ],
)
def test_admin_apis_need_the_admin_key(client, call):
    arguments = {
        "update_trace_settings": {"settings": {"trace_level": ["TIMESTAMPS"]}},
        "update_log_settings": {"settings": {"log_verbose_level": 1}},
        "register_system_shared_memory": {"name": "r", "key": "/trt_plugin_kit_security", "byte_size": 16},
    }.get(call, {})
    with pytest.raises(InferenceServerException, match="restricted"):
        getattr(client, call)(**arguments)


def test_the_admin_key_opens_the_admin_apis(client):
    """The restriction is a header check, not a disabled API: with the key, reading works."""
    settings = client.get_log_settings(headers=client.admin)
    if client.protocol == "http":
        assert settings["log_verbose_level"] == 0
    else:
        assert settings.settings["log_verbose_level"].uint32_param == 0


def test_metadata_config_and_statistics_are_public(client):
    """Open to every client by design: server/model metadata, configurations and statistics (counts and
    timings, no request data)."""
    assert client.get_server_metadata()
    assert client.get_model_config("mnist")
    statistics = client.get_inference_statistics("l2norm")
    assert statistics


# ------------------------------------------------------------------------------------- request content


@pytest.mark.parametrize(
    "blob",
    [
        b"/etc/passwd",
        b"file:///etc/passwd",
        b"../model_repository/mnist/1/model.py",
        b"http://127.0.0.1/x.png",
    ],
)
def test_request_bytes_are_data_never_paths_or_urls(client, blob):
    with pytest.raises(InferenceServerException, match="not a PNG or JPEG"):
        bytes_request(client, blob)
    assert_still_serving(client)


@pytest.mark.timeout(300)
def test_a_40_mib_payload_is_refused_and_the_server_keeps_serving(client):
    """Bigger than the per-image limit (8 MiB) and than --http-max-input-size (32 MiB) where the server
    supports it; Triton 2.51 (the CPU variant) reads the body and the model refuses it before decoding."""
    with pytest.raises(InferenceServerException) as refused:
        bytes_request(client, b"\x89PNG\r\n\x1a\n" + bytes(40 * 1024 * 1024))
    message = str(refused.value)
    assert "limit is 8388608 bytes" in message or "too large" in message.lower(), message
    assert_still_serving(client)


# ------------------------------------------------------------------------------------- exposure


def _listening_addresses(port: int) -> set[str]:
    """Local addresses with a TCP socket listening on `port` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].split(":")
            if fields[3] != "0A" or int(port_hex, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)
            # /proc prints each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            text = socket.inet_ntop(family, raw)
            found.add(text.removeprefix("::ffff:"))  # an IPv4-mapped IPv6 socket (gRPC) is the IPv4 address
    return found


def test_the_server_listens_on_loopback_only_by_default(triton_server, monkeypatch):
    for port in (triton_server.ports.http, triton_server.ports.grpc, triton_server.ports.metrics):
        assert _listening_addresses(port) == {"127.0.0.1"}, port
    # `make serve` binds 127.0.0.1 unless told otherwise (--host / TRITON_HOST).
    monkeypatch.delenv("TRITON_HOST", raising=False)
    assert serve.parse_args([]).host == "127.0.0.1"


def test_the_server_runs_with_the_hardened_flags(triton_server):
    command = triton_server.command
    for flag in (
        "--model-control-mode=none",
        "--allow-sagemaker=false",
        "--allow-vertex-ai=false",
        "--exit-on-error=true",
        "--disable-auto-complete-config",
    ):
        assert flag in command, flag
    restriction = f"model-repository,shared-memory,trace,logging:{ADMIN_HEADER}="
    assert any(arg.startswith(f"--http-restricted-api={restriction}") for arg in command)
    assert any(arg.startswith(f"--grpc-restricted-protocol={restriction}") for arg in command)
    assert (
        len(triton_server.admin_key) >= 32
    )  # the test operator's key; unset keys: test_serving_hardening.py
