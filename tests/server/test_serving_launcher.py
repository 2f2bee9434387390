"""`make serve`'s launcher (`trt-plugin-kit serve`, trt_plugin_kit/serving/server.py). The image guard of
mnist_preprocess
has its own tests in test_serving_preprocess.py.

The CLI tests start the real script as `make serve` does (the virtual environment's Python running
`trt-plugin-kit serve`), on free loopback ports, and stop it with Ctrl-C (SIGINT) or SIGTERM.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from trt_plugin_kit.interface import MODEL_REPOSITORY, REPO_ROOT, TENSORRT_MODELS
from trt_plugin_kit.serving import cli as serve
from trt_plugin_kit.serving import server as serving
from trt_plugin_kit.serving.host import HostProbe, Ports, ServingError, choose_variant
from trt_plugin_kit.serving.server import TritonServer

SERVE_COMMAND = (sys.executable, "-m", "trt_plugin_kit", "serve")  # what `make serve` runs
READY_LINE = "Triton Inference Server is ready."


class ServeScript:
    """`trt-plugin-kit serve` in a subprocess; a thread collects its output lines (select() cannot see the
    lines already buffered by the pipe's reader)."""

    def __init__(self, tmp_path: Path, ports: Ports, *extra: str):
        command = [
            *SERVE_COMMAND, "--variant", "cpu", "--host", "127.0.0.1",
            "--http-port", str(ports.http), "--grpc-port", str(ports.grpc),
            "--metrics-port", str(ports.metrics), "--log-file", str(tmp_path / "tritonserver.log"), *extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)  # end of output

    def read_until(self, marker: str, timeout_s: float) -> str:
        """Output up to the line containing `marker`, or up to the script's exit or the timeout."""
        seen, deadline = [], time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                break
            seen.append(line)
            if marker in line:
                break
        return "".join(seen)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def port_is_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_serve_script_prints_endpoints_serves_and_stops_cleanly(tmp_path, stop_signal):
    ports = Ports.free()
    script = ServeScript(tmp_path, ports)
    try:
        banner = script.read_until("Stop with Ctrl-C.", timeout_s=180)
        log = (tmp_path / "tritonserver.log").read_text(errors="replace")[-3000:]
        assert READY_LINE in banner, f"no readiness banner:\n{banner}\n{log}"
        assert "variant:  cpu" in banner
        assert f"HTTP:     http://127.0.0.1:{ports.http}" in banner
        assert f"gRPC:     127.0.0.1:{ports.grpc}" in banner
        assert f"metrics:  http://127.0.0.1:{ports.metrics}/metrics" in banner
        # The models tritonserver reported to the edge, not a fixed list.
        assert "models:   l2norm, mnist, mnist_pipeline, mnist_preprocess" in banner

        client = httpclient.InferenceServerClient(url=f"127.0.0.1:{ports.http}")
        tensor = httpclient.InferInput("vector", [1, 2], "FP32")
        tensor.set_data_from_numpy(np.array([[3.0, 4.0]], dtype=np.float32))
        np.testing.assert_allclose(client.infer("l2norm", [tensor]).as_numpy("normalized"), [[0.6, 0.8]])
        client.close()

        script.process.send_signal(stop_signal)
        rest = script.read_until("Triton stopped.", timeout_s=60)
        try:
            assert script.process.wait(timeout=30) == 0, rest
        except subprocess.TimeoutExpired:  # it prints its threads' stacks after EXIT_STACKS_AFTER_S
            pytest.fail(f"no exit 30 s after 'Triton stopped.':\n{rest}{script.read_until('no marker', 1)}")
        assert f"{stop_signal.name} received" in rest and "Triton stopped." in rest
        assert not any(port_is_open(port) for port in (ports.http, ports.grpc, ports.metrics))
    finally:
        script.kill()


def test_serve_script_reports_a_taken_port_and_exits(tmp_path):
    ports = Ports.free()
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", ports.http))
        blocker.listen(1)
        script = ServeScript(tmp_path, ports)
        try:
            output = script.read_until("never printed", timeout_s=120)
            assert script.process.wait(timeout=30) == 1
        finally:
            script.kill()
    # Checked before anything starts: the launcher names the port and its role, and how to choose others.
    refusal = f"trt-plugin-kit serve: error: cannot listen on 127.0.0.1:{ports.http} (HTTP port)"
    assert refusal in output, output
    assert "address already in use" in output.lower()
    assert READY_LINE not in output
    # Issue 40, item 13: the useful line alone, no traceback around it ("Event loop is closed", ...).
    assert "Traceback" not in output and "Unclosed client session" not in output, output


def test_serve_on_the_ports_of_another_kit_server_exits_1_without_reporting_ready(tmp_path, triton_server):
    """Issue 40: the other server answered our readiness wait, serve.py said ready and restarted forever."""
    script = ServeScript(tmp_path, triton_server.ports)
    try:
        output = script.read_until("never printed", timeout_s=120)
        assert script.process.wait(timeout=30) == 1, output
    finally:
        script.kill()
    assert f"cannot listen on 127.0.0.1:{triton_server.ports.http} (HTTP port)" in output, output
    assert READY_LINE not in output and "restarting" not in output
    assert triton_server.is_running()  # the other server is untouched


def test_readiness_counts_only_a_listener_of_our_own_processes():
    """The check after the readiness wait: a listener outside the server's session is another process."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        ports = Ports(port, port, port)
        assert serving.ports_answered_by_others(ports, os.getsid(0)) == []
        other_session = os.getsid(0) + 1 if os.getsid(0) != 1 else 2
        assert serving.ports_answered_by_others(ports, other_session) == [
            f"{role} port {port}" for role in ("HTTP", "gRPC", "metrics")
        ]
        with pytest.raises(serving.PortTaken, match=f"127.0.0.1:{port} \\(HTTP port\\)"):
            serving.check_ports_free("127.0.0.1", Ports(port, port + 1, port + 2))


@pytest.mark.parametrize("log_file", [True, False], ids=["log file", "console"])
def test_a_model_that_fails_to_load_is_named_with_its_reason_last(tmp_path, log_file):
    """Issue 24 item 4: a repository you changed. The cause used to be 40 lines above a tail of unrelated
    lines (or none: "server output went to the console"); now it is the last thing serve.py says."""
    repository = tmp_path / "repo" / "model_repository"
    shutil.copytree(MODEL_REPOSITORY, repository)
    (tmp_path / "repo" / "models").symlink_to(REPO_ROOT / "models")  # the CPU mnist's ONNX file
    config = repository / "l2norm" / "configs" / "cpu.pbtxt"
    config.write_text(config.read_text().replace('backend: "python"', 'backend: "no_such_backend"'))
    ports = Ports.free()
    command = [
        *SERVE_COMMAND, "--variant", "cpu", "--host", "127.0.0.1", "--http-port", str(ports.http),
        "--grpc-port", str(ports.grpc), "--metrics-port", str(ports.metrics),
        "--model-repository", str(repository),
    ]  # fmt: skip
    if log_file:
        command += ["--log-file", str(tmp_path / "tritonserver.log")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("model 'l2norm' failed to load:") and "no_such_backend" in last, result.stderr[
        -3000:
    ]
    assert READY_LINE not in result.stdout


def test_serve_script_reads_ports_and_variant_from_the_environment(monkeypatch):
    monkeypatch.setenv("TRITON_HTTP_PORT", "9100")
    monkeypatch.setenv("TRITON_GRPC_PORT", "9101")
    monkeypatch.setenv("TRITON_METRICS_PORT", "9102")
    monkeypatch.setenv("TRITON_VARIANT", "cpu")
    args = serve.parse_args([])
    assert (args.http_port, args.grpc_port, args.metrics_port, args.variant) == (9100, 9101, 9102, "cpu")
    assert serve.parse_args(["--http-port", "9200"]).http_port == 9200  # flags win over the environment
    args = serve.parse_args(["--", "--log-verbose=1"])
    assert args.tritonserver_args == ["--log-verbose=1"]
    monkeypatch.setenv("TRITON_HTTP_PORT", "eighty")
    with pytest.raises(SystemExit) as usage_error:  # argparse: the message names $TRITON_HTTP_PORT, exit 2
        serve.parse_args([])
    assert usage_error.value.code == 2


# ------------------------------------------------------------------------------------- variants


def test_auto_picks_tensorrt_only_when_gpu_tensorrt_and_tritonserver_are_all_there():
    ready = HostProbe(tritonserver=Path("/opt/tritonserver/bin/tritonserver"), gpus=["GPU 0: H100"])
    ready.tensorrt_version = "10.13.3"
    assert choose_variant("auto", ready)[0] == "tensorrt"
    assert choose_variant("cpu", ready)[0] == "cpu"
    missing = HostProbe(missing=["no NVIDIA GPU: no CUDA driver (libcuda.so.1 not loadable)"])
    variant, reason = choose_variant("auto", missing)
    assert variant == "cpu" and "no NVIDIA GPU" in reason
    with pytest.raises(ServingError, match="cannot run here: no NVIDIA GPU"):
        choose_variant("tensorrt", missing)
    with pytest.raises(ServingError, match="unknown variant"):
        choose_variant("gpu", missing)


def test_tensorrt_variant_fails_clearly_where_tensorrt_is_missing(tmp_path):
    if not choose_variant("auto")[0] == "cpu":
        pytest.skip("this machine can run the TensorRT variant")
    server = TritonServer(variant="tensorrt", ports=Ports.free(), log_file=tmp_path / "log")
    with pytest.raises(ServingError, match="TensorRT variant cannot run here"):
        server.start()
    assert server.process is None


FAKE_TRITONSERVER = """#!/bin/sh
# Stands in for a system tritonserver: answers --help, records its arguments and environment, exits.
if [ "$1" = "--help" ]; then
  echo "--http-restricted-api --grpc-restricted-protocol --http-max-input-size"
  exit 0
fi
printf '%s\\n' "$@" > "$(dirname "$0")/args"
env > "$(dirname "$0")/env"
"""


@pytest.fixture
def gpu_host(tmp_path, monkeypatch):
    """A host that looks TensorRT-ready: a recording fake tritonserver, a plugin library, a repository."""
    binary = tmp_path / "bin" / "tritonserver"
    binary.parent.mkdir()
    binary.write_text(FAKE_TRITONSERVER)
    binary.chmod(0o755)
    library = tmp_path / "libtrt_plugin_kit.so"
    library.write_bytes(b"")
    repository = tmp_path / "model_repository"
    shutil.copytree(MODEL_REPOSITORY, repository, ignore=shutil.ignore_patterns("__pycache__", "*.plan"))
    probe = HostProbe(tritonserver=binary, gpus=["GPU 0: test"], tensorrt_version="10.13.3")
    monkeypatch.setattr(serving, "probe_host", lambda: probe)
    return binary, library, repository


def test_tensorrt_variant_has_the_tensorrt_backend_load_the_plugin_library(tmp_path, gpu_host):
    binary, library, repository = gpu_host
    for model in TENSORRT_MODELS:
        (repository / model / "1" / "model.plan").write_bytes(b"engine")
    server = TritonServer(
        variant="tensorrt", ports=Ports.free(), model_repository=repository, plugin_library=library
    )
    try:
        server.start()
        assert server.process.wait(timeout=30) == 0
    finally:
        server.stop()
    args = (binary.parent / "args").read_text().splitlines()
    env = dict(line.split("=", 1) for line in (binary.parent / "env").read_text().splitlines() if "=" in line)
    # The TensorRT backend loads the library (tensorrt_backend's `plugins` setting); no LD_PRELOAD, which the
    # Python backend's stubs would inherit.
    assert f"--backend-config=tensorrt,plugins={library}" in args
    assert str(library) not in env.get("LD_PRELOAD", "")
    assert str(REPO_ROOT) in env["PYTHONPATH"].split(os.pathsep)  # mnist_preprocess imports trt_plugin_kit
    assert not any(arg.startswith("--model-config-name") for arg in args)  # the TensorRT configs
    assert f"--model-repository={repository}" in args and "--model-control-mode=none" in args
    assert any(arg.startswith("--http-restricted-api=model-repository,") for arg in args)
    assert any(arg.startswith("--http-max-input-size=") for arg in args)
    assert "TensorRT engines" in server.describe_variant()


def test_tensorrt_variant_builds_missing_engines_and_reports_when_it_cannot(gpu_host):
    _, library, repository = gpu_host
    server = TritonServer(
        variant="tensorrt", ports=Ports.free(), model_repository=repository, plugin_library=library
    )
    # The real build_engines.py runs and fails: there is no TensorRT on this machine.
    with pytest.raises(ServingError, match="build_engines.py failed"):
        server.start()
    assert server.process is None


def test_a_plugin_library_that_does_not_link_the_runtime_is_refused_before_tritonserver_starts(monkeypatch):
    """The library `make plugins` built here links no libnvinfer: on a host whose runtime is libnvinfer.so.10
    the TensorRT backend would load it and register nothing. serve.py says so before starting anything."""
    from trt_plugin_kit.engines import artifact_checks
    from trt_plugin_kit.serving import host

    built = sorted((REPO_ROOT / "build").glob("trt-*/libtrt_plugin_kit.so"))
    if not built:
        pytest.skip("no build/trt-*/libtrt_plugin_kit.so (make plugins builds it)")
    monkeypatch.setattr(artifact_checks, "runtime_version", lambda: ("libnvinfer.so.10", "10.13.3.9"))
    with pytest.raises(ServingError, match=r"cannot serve here: .* does not link libnvinfer\.so\.10"):
        host.ensure_plugin_library("10.13.3", built[0])


def test_serving_some_models_leaves_a_broken_model_of_yours_out(tmp_path):
    """Issue 40, item 12: one bad model of one's own stopped every model. `--models` serves a subset (and what
    its ensembles run); the same repository without it fails on the bad model, naming it."""
    from trt_plugin_kit.interface import MODEL_REPOSITORY, MODELS_DIR
    from trt_plugin_kit.scaffold import model as served_model
    from trt_plugin_kit.specs import spec as plugin_spec

    repository = tmp_path / "model_repository"
    shutil.copytree(MODEL_REPOSITORY, repository)
    (tmp_path / "models").symlink_to(MODELS_DIR)  # mnist's onnx_model is ../../models/onnx/...
    served_model.create(plugin_spec.get("LeakyReLU"), False, repository)
    (repository / "leaky_relu" / "model.onnx").unlink()  # a model of yours, half written
    ports = Ports.free()
    script = ServeScript(tmp_path, ports, "--model-repository", str(repository), "--models", "mnist_pipeline")
    try:
        banner = script.read_until("Stop with Ctrl-C.", timeout_s=180)
        assert READY_LINE in banner, (
            banner + (tmp_path / "tritonserver.log").read_text(errors="replace")[-3000:]
        )
        # The pipeline's steps come with it; l2norm and the broken model stay out.
        assert "models:   mnist, mnist_pipeline, mnist_preprocess\n" in banner, banner
        client = httpclient.InferenceServerClient(url=f"127.0.0.1:{ports.http}")
        assert client.is_model_ready("mnist_pipeline") and not client.is_model_ready("leaky_relu")
        client.close()
        script.process.send_signal(signal.SIGTERM)
        assert script.process.wait(timeout=60) == 0
    finally:
        script.kill()
    with pytest.raises(serving.ServingError, match="did you mean 'leaky_relu'"):
        serving.TritonServer(ports=Ports.free(), model_repository=repository, models=["leaky_rel"]).start()
