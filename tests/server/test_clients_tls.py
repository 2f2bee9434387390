"""TLS flags of `python -m clients` against a real tritonserver whose gRPC endpoint requires mutual TLS.

A throw-away CA, server certificate (for 127.0.0.1) and client certificate are made with the `openssl`
command; the server is this repository's CPU variant started with Triton's --grpc-use-ssl-mutual. Triton's
HTTP endpoint has no TLS of its own (it is put behind a proxy for that), so HTTPS is only checked for its
error against a plain HTTP endpoint.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from clients.errors import EXIT_UNREACHABLE
from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.models import mnist
from trt_plugin_kit.serving.host import Ports, ServingError, free_port
from trt_plugin_kit.serving.server import TritonServer

TLS_HINT = "TLS: check --ssl, --root-certificates"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_ca(folder: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
             "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=folder)  # fmt: skip


def _make_signed(folder: Path, name: str, ca: str, extensions: str | None = None) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", cwd=folder)  # fmt: skip
    extra = []
    if extensions:
        (folder / f"{name}.ext").write_text(extensions + "\n")
        extra = ["-extfile", f"{name}.ext"]
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", *extra, cwd=folder)  # fmt: skip


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    folder = tmp_path_factory.mktemp("tls")
    _make_ca(folder, "ca")
    _make_ca(folder, "other_ca")  # a CA that did not sign the server's certificate
    _make_signed(folder, "server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost")
    _make_signed(folder, "client", "ca")
    return folder


@pytest.fixture(scope="module")
def tls_server(certificates, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("tls_tritonserver")
    server = TritonServer(
        variant="cpu",
        ports=Ports.free("127.0.0.1"),
        log_file=log_dir / "tritonserver.log",
        extra_args=[
            "--grpc-use-ssl-mutual=true",
            f"--grpc-server-cert={certificates / 'server.crt'}",
            f"--grpc-server-key={certificates / 'server.key'}",
            f"--grpc-root-cert={certificates / 'ca.crt'}",
        ],
    )
    try:
        server.start()
        # Readiness is polled over plain HTTP, which stays without TLS.
        server.wait_until_ready(180.0)
    except ServingError as error:
        server.stop()
        pytest.fail(f"could not start tritonserver with gRPC TLS: {error}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


def clients(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_ADMIN_KEY"}
    return subprocess.run(
        [sys.executable, "-m", "clients", *args, "--retries", "0"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_mutual_tls_with_every_certificate_flag(tls_server, certificates, tmp_path):
    digit = tmp_path / "digit.png"
    images, labels = mnist.load_dev_set()
    Image.fromarray(images[0]).save(digit)
    tls = ["--url", tls_server.grpc_url, "--ssl", "--root-certificates", str(certificates / "ca.crt")]
    tls += [
        "--private-key",
        str(certificates / "client.key"),
        "--certificate-chain",
        str(certificates / "client.crt"),
    ]
    health = clients("health", "--model", "mnist_pipeline", *tls)
    assert health.returncode == 0, health.stderr
    assert "over gRPC (TLS): live, ready" in health.stdout and health.stdout.splitlines()[-1] == "health: OK"
    infer = clients("infer", str(digit), "--top-k", "1", *tls)
    assert infer.returncode == 0, infer.stderr
    assert infer.stdout.startswith(f"{digit}: {labels[0]} (")


@pytest.mark.parametrize(
    "case, flags, detail",
    [
        ("no TLS", [], None),
        ("no client certificate", ["--ssl", "--root-certificates", "ca.crt"], None),
        ("unknown server CA", ["--ssl", "--root-certificates", "other_ca.crt", "--private-key", "client.key",
                               "--certificate-chain", "client.crt"], "CERTIFICATE_VERIFY_FAILED"),
    ],
)  # fmt: skip
def test_tls_mistakes_are_reported(tls_server, certificates, case, flags, detail):
    resolved = [str(certificates / f) if f.endswith((".crt", ".key")) else f for f in flags]
    result = clients("health", "--url", tls_server.grpc_url, *resolved)
    assert result.returncode == EXIT_UNREACHABLE, case
    assert f"cannot reach Triton at {tls_server.grpc_url} over gRPC" in result.stderr
    if flags:
        assert TLS_HINT in result.stderr, case
    if detail:
        assert detail in result.stderr
    assert "Handshake failed with error" not in result.stderr  # gRPC's own log lines are kept quiet


def test_https_against_a_plain_http_endpoint(tls_server, certificates):
    flags = ["--protocol", "http", "--url", tls_server.http_url, "--ssl"]
    result = clients("health", *flags, "--root-certificates", str(certificates / "ca.crt"))
    assert result.returncode == EXIT_UNREACHABLE
    assert f"cannot reach Triton at {tls_server.http_url} over HTTP (TLS)" in result.stderr
    assert TLS_HINT in result.stderr


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("ssl", [False, True], ids=["plain", "--ssl"])
def test_a_refused_connection_gets_no_tls_hint(protocol, ssl):
    """Issue 40, item 9: nothing listening is not a TLS problem (aiohttp's refusal names "ssl:default")."""
    port = str(free_port())
    flags = [
        "--protocol",
        protocol,
        f"--{protocol}-port",
        port,
        "--retries",
        "0",
        *(["--ssl"] if ssl else []),
    ]
    result = clients("health", *flags)
    assert result.returncode == EXIT_UNREACHABLE
    assert "is the server running? (make serve)" in result.stderr
    assert TLS_HINT not in result.stderr and "TLS:" not in result.stderr, result.stderr
