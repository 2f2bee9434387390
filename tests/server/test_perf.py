"""`make perf` for real: NVIDIA's perf_analyzer (natively, or from its Debian 13 root) against the CPU
tritonserver of the `triton_server` fixture, a tiny sweep over every model and both protocols, then system
shared memory with the fixture's admin key. The first run on a machine makes the Debian 13 root (mmdebstrap,
a few minutes; build/perf-analyzer/ keeps it), later runs take about a minute.

Skips only where perf_analyzer cannot run at all: glibc older than 2.38 and neither root (mmdebstrap
or debootstrap, unshare) nor a Docker daemon. CI is root with mmdebstrap.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tritonclient.http as httpclient

from loadtests.perf import tool
from loadtests.perf.data import PERF_MODELS
from trt_plugin_kit.interface import ADMIN_HEADER, PROTOCOLS, REPO_ROOT
from trt_plugin_kit.serving.host import free_port

TIMEOUT_S = 1200  # the first run makes the Debian 13 root
# Windows of half a second, any spread accepted (perf_analyzer's stability check): on a shared 2-core machine
# the tests check that every run measures without an error, not that the numbers hold still.
TINY = "--measurement-ms 500 --stability-percent 1000"


pytestmark = pytest.mark.skipif(tool.why_cannot_run() is not None, reason=str(tool.why_cannot_run()))


def make_perf(host: str, http_port: str, grpc_port: str, perf_args: str) -> subprocess.CompletedProcess:
    """`make perf` with this interpreter's environment as the venv (its stamp is there: no reinstall)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "PERF_", "MAKE"))}
    env |= {"TRITON_HOST": host, "TRITON_HTTP_PORT": http_port, "TRITON_GRPC_PORT": grpc_port}
    venv = Path(sys.prefix)
    if (venv / ".installed").is_file():
        command = ["make", "--no-print-directory", "perf", f"VENV={venv}", f"PERF_ARGS={perf_args}"]
    else:  # a venv that make did not make: the command make perf runs
        command = [sys.executable, "-m", "loadtests.perf", *perf_args.split()]
    return subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )


def explain(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\nstdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-3000:]}"


def test_make_perf_measures_every_model_over_both_protocols_without_an_error(triton_server, tmp_path):
    host, http_port = triton_server.http_url.rsplit(":", 1)
    grpc_port = triton_server.grpc_url.rsplit(":", 1)[1]
    reports = tmp_path / "perf"
    result = make_perf(host, http_port, grpc_port, f"--concurrency 1,2 {TINY} --reports-dir {reports}")
    assert result.returncode == 0, explain(result)
    rows = json.loads((reports / "report.json").read_text())["rows"]
    measured = {(row["model"], row["protocol"], row["concurrency"]) for row in rows if not row["error"]}
    expected = {(model, protocol, c) for model in PERF_MODELS for protocol in PROTOCOLS for c in (1, 2)}
    assert measured == expected, [row["error"] for row in rows if row["error"]]
    assert all(row["values"]["infer_per_s"] > 0 and row["values"]["p99_us"] > 0 for row in rows)
    # The ensemble's split per composing model (perf_analyzer's console output) reached the report.
    pipeline = [row for row in rows if row["model"] == "mnist_pipeline"]
    assert all(set(row["composing"]) == {"mnist", "mnist_preprocess"} for row in pipeline)
    report = (reports / "report.md").read_text()
    throughput = report.split("## Throughput")[1].split("## Server-side")[0]
    server_side = report.split("## Server-side")[1]
    for model in PERF_MODELS:
        for protocol in PROTOCOLS:
            lines = [
                line for line in throughput.splitlines() if line.startswith(f"| {model} | {protocol} | ")
            ]
            assert len(lines) == 2 and all(line.endswith("| 0 |") for line in lines), lines  # 0 errors
            assert f"| {model} | {protocol} | 2 | " in server_side
    try:
        import matplotlib  # noqa: F401

        assert (reports / "perf.png").stat().st_size > 10_000
    except ImportError:
        assert "No plot: matplotlib is not installed" in report


def test_make_perf_with_system_shared_memory_and_the_admin_key(triton_server, tmp_path):
    host, http_port = triton_server.http_url.rsplit(":", 1)
    grpc_port = triton_server.grpc_url.rsplit(":", 1)[1]
    reports = tmp_path / "perf-shm"
    args = (
        f"--models l2norm --concurrency 1 {TINY} --shared-memory system "
        f"--admin-key {triton_server.admin_key} --reports-dir {reports}"
    )
    result = make_perf(host, http_port, grpc_port, args)
    assert result.returncode == 0, explain(result)
    rows = json.loads((reports / "report.json").read_text())["rows"]
    assert {(row["protocol"], row["error"]) for row in rows} == {("http", ""), ("grpc", "")}
    # perf_analyzer's regions do not outlive the run, even where Triton refused them at its end (in use)
    client = httpclient.InferenceServerClient(triton_server.http_url)
    try:
        assert client.get_system_shared_memory_status(headers={ADMIN_HEADER: triton_server.admin_key}) == []
    finally:
        client.close()


def test_make_perf_without_a_server_says_so(tmp_path):
    port = str(free_port())
    result = make_perf("127.0.0.1", port, port, f"--reports-dir {tmp_path}")
    assert result.returncode != 0, explain(result)
    assert f"no ready Triton server at HTTP 127.0.0.1:{port}" in result.stderr, explain(result)
    assert "start one with `make serve`" in result.stderr


@pytest.fixture(scope="module")
def server_with_a_model_of_yours(tmp_path_factory):
    """The kit's repository plus a model of yours: new-plugin's served model of LeakyReLU (plugin_onnx)."""
    from trt_plugin_kit.interface import MODEL_REPOSITORY, MODELS_DIR
    from trt_plugin_kit.scaffold import model as served_model
    from trt_plugin_kit.serving.host import Ports
    from trt_plugin_kit.serving.server import TritonServer
    from trt_plugin_kit.specs import spec as plugin_spec

    root = tmp_path_factory.mktemp("perf_yours")
    repository = root / "model_repository"
    shutil.copytree(MODEL_REPOSITORY, repository)
    (root / "models").symlink_to(MODELS_DIR)  # mnist's onnx_model is ../../models/onnx/...
    served_model.create(plugin_spec.get("LeakyReLU"), False, repository)
    with TritonServer(
        variant="cpu", ports=Ports.free(), model_repository=repository, log_file=root / "triton.log"
    ) as server:
        yield server


def test_make_perf_measures_a_model_of_yours_from_its_metadata_or_your_file(
    server_with_a_model_of_yours, tmp_path
):
    """Issue 40, item 4: `make perf` took only the kit's models ("unknown model")."""
    server = server_with_a_model_of_yours
    host, http_port = server.http_url.rsplit(":", 1)
    grpc_port = server.grpc_url.rsplit(":", 1)[1]
    reports = tmp_path / "generated"
    result = make_perf(
        host, http_port, grpc_port, f"--models leaky_relu --concurrency 1 {TINY} --reports-dir {reports}"
    )
    assert result.returncode == 0, explain(result)
    rows = json.loads((reports / "report.json").read_text())["rows"]
    assert {(row["model"], row["protocol"], row["batch"], row["error"]) for row in rows} == {
        ("leaky_relu", "http", 4, ""),
        ("leaky_relu", "grpc", 4, ""),
    }
    assert "leaky_relu: from the server's metadata or --model-data" in (reports / "report.md").read_text()
    # Your own data: an .npy of 3 items, sent 2 per request.
    import numpy as np

    np.save(tmp_path / "x.npy", np.linspace(-1, 1, 3 * 16, dtype=np.float32).reshape(3, 16))
    reports = tmp_path / "file"
    args = f"--models leaky_relu --protocol http --concurrency 1 {TINY} --model-batch 2 "
    args += f"--model-data leaky_relu={tmp_path / 'x.npy'} --reports-dir {reports}"
    result = make_perf(host, http_port, grpc_port, args)
    assert result.returncode == 0, explain(result)
    (row,) = json.loads((reports / "report.json").read_text())["rows"]
    assert (row["batch"], row["error"]) == (2, "")
    data = json.loads((reports / "input-data" / "leaky_relu.json").read_text())["data"]
    assert len(data) == 3 and data[0][next(iter(data[0]))]["shape"] == [16]


def test_make_perf_on_a_misspelt_model_names_the_closest(server_with_a_model_of_yours, tmp_path):
    server = server_with_a_model_of_yours
    host, http_port = server.http_url.rsplit(":", 1)
    grpc_port = server.grpc_url.rsplit(":", 1)[1]
    result = make_perf(host, http_port, grpc_port, f"--models leaky_relu,l2nrm --reports-dir {tmp_path}")
    assert result.returncode != 0, explain(result)  # make's 2 for the tool's 3
    assert "is ready but does not serve 'l2nrm'; did you mean 'l2norm'?" in result.stderr, explain(result)
    assert "start one with `make serve`" not in result.stderr
