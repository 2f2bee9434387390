"""`python -m clients` against the real tritonserver of `make serve` (its CPU variant: the `triton_server`
fixture), run as a user runs it: a subprocess per command, over gRPC and HTTP, through the ensemble and
the raw model, with and without system shared memory, and the error cases (unknown model, wrong model,
bad files, images the server rejects, restricted APIs). Output lines and exit codes are the interface.

Expected answers come from running the same ONNX model locally with ONNX Runtime on the same preprocessing,
so a test fails when any number the client prints is wrong, not only when the command crashes.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient
from PIL import Image
from tritonclient.utils import shared_memory as system_shm

from clients.errors import (
    EXIT_ACCESS_DENIED,
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_MODEL_UNAVAILABLE,
    EXIT_TIMEOUT,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    EXIT_WRONG_MODEL,
)
from clients.inputs import read_image
from loadtests.perf.sweep import SweepSettings, release_regions
from trt_plugin_kit.interface import ADMIN_HEADER, MODEL_REPOSITORY, REPO_ROOT
from trt_plugin_kit.models import mnist
from trt_plugin_kit.serving import preprocess as serving_preprocess
from trt_plugin_kit.serving.host import Ports
from trt_plugin_kit.serving.server import TritonServer
from trt_plugin_kit.specs.reference import l2_normalize
from trt_plugin_kit.tritonserver.protocol import ModelsNotServed, wait_until_ready

NATIVE_ONNX = REPO_ROOT / "models" / "onnx" / "mnist_native.onnx"
PROTOCOLS = ("grpc", "http")
ACCURACY_LINE = re.compile(r"^accuracy: (\d\.\d{4})$")
MIN_ACCURACY = 0.97


def user_environment(**variables: str) -> dict[str, str]:
    """This process's environment without the variables the tools read (TRITON_*, MNIST_DIR), plus these."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_") and k != "MNIST_DIR"}
    return kept | variables


def run_clients(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m clients ARGS` with exactly the given tool variables (see user_environment)."""
    return subprocess.run(
        [sys.executable, "-m", "clients", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def clients(server, protocol: str, *args: str, stdin: bytes | None = None, timeout: float = 300):
    """Runs `python -m clients COMMAND --protocol P --url U ARGS` and returns the CompletedProcess."""
    command, *rest = args
    url = server.grpc_url if protocol == "grpc" else server.http_url
    env = user_environment()
    result = subprocess.run(
        [sys.executable, "-m", "clients", command, "--protocol", protocol, "--url", url, *rest],
        cwd=REPO_ROOT,
        input=stdin if stdin is not None else b"",
        capture_output=True,
        timeout=timeout,
        env=env,
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


def admin(server) -> list[str]:
    return ["--admin-key", server.admin_key]


@pytest.fixture(scope="module")
def onnx_session():
    return ort.InferenceSession(str(NATIVE_ONNX), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def digit_files(tmp_path_factory):
    """Validation digits in the forms users have: MNIST PNGs, a big dark-on-light RGBA PNG, a JPEG, a BMP."""
    folder = tmp_path_factory.mktemp("digits")
    split = mnist.load_split()
    images, labels = split.validation_images, split.validation_labels
    files = []
    for i in range(8):
        path = folder / f"{i:02d}_digit{labels[i]}.png"
        Image.fromarray(images[i]).save(path)
        files.append(path)
    big = Image.fromarray(255 - np.kron(images[8], np.ones((4, 4), np.uint8))).convert("RGBA")
    big.save(folder / f"08_digit{labels[8]}_paper.png")
    Image.fromarray(images[9]).resize((56, 56)).convert("RGB").save(
        folder / f"09_digit{labels[9]}.jpg", quality=95
    )
    Image.fromarray(images[10]).save(folder / f"10_digit{labels[10]}.bmp")
    files += [folder / f"08_digit{labels[8]}_paper.png", folder / f"09_digit{labels[9]}.jpg"]
    files.append(folder / f"10_digit{labels[10]}.bmp")
    return folder, files


def expected_top_k(session, files: list[Path], k: int) -> dict[str, list[tuple[int, float]]]:
    """Top-k (index, probability) per file: the server's own preprocessing + the same ONNX model, locally."""
    tensors = np.stack([serving_preprocess.decode_digit(read_image(path).data) for path in files])
    probabilities = session.run(None, {session.get_inputs()[0].name: tensors})[0]
    expected = {}
    for path, row in zip(files, probabilities, strict=True):
        order = np.argsort(-row, kind="stable")[:k]
        expected[str(path)] = [(int(i), float(row[i])) for i in order]
    return expected


# ------------------------------------------------------------------------------------------- health


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_health_reports_every_model_as_expected(triton_server, protocol):
    result = clients(triton_server, protocol, "health")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "health: OK"
    assert "live, ready" in lines[0]
    for model in ("mnist", "mnist_pipeline", "mnist_preprocess", "l2norm"):
        assert f"model {model}: READY" in result.stdout
        assert f"expected interface '{model}': OK" in result.stdout
    assert "probabilities FP32 [-1, 10] (labels)" in result.stdout

    as_json = json.loads(clients(triton_server, protocol, "health", "--json", "--model", "mnist").stdout)
    assert as_json["ok"] is True and as_json["server"]["ready"] is True
    (model,) = as_json["models"]
    assert model["status"] == "ok" and model["config"]["max_batch_size"] > 0
    assert model["metadata"]["inputs"] == [{"name": "image", "datatype": "FP32", "shape": [-1, 1, 28, 28]}]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_health_unknown_model(triton_server, protocol):
    result = clients(triton_server, protocol, "health", "--model", "no_such_model")
    assert result.returncode == EXIT_MODEL_UNAVAILABLE
    assert "model no_such_model: NOT READY" in result.stdout
    # The repository index is closed without the key; model metadata needs none and says "not found".
    assert "model 'no_such_model' is not found on Triton at" in result.stdout
    # Ready models of the kit and of this checkout's model_repository/ (a model of yours is listed too).
    assert "models ready there (of the kit's and this checkout's model_repository/): mnist, l2norm" in (
        result.stdout
    )
    assert "--admin-key" not in result.stdout
    with_key = clients(triton_server, protocol, "health", "--model", "no_such_model", *admin(triton_server))
    assert with_key.returncode == EXIT_MODEL_UNAVAILABLE
    assert "model 'no_such_model' is not served by Triton" in with_key.stdout
    assert "mnist_pipeline (READY)" in with_key.stdout
    assert with_key.stdout.splitlines()[-1] == "health: FAILED (1 of 1 models with problems)"


def _ports(server) -> dict[str, str]:
    return {"http": server.http_url.rsplit(":", 1)[1], "grpc": server.grpc_url.rsplit(":", 1)[1]}


def test_the_environment_alone_says_where_the_server_is(triton_server):
    """TRITON_HOST / TRITON_GRPC_PORT / TRITON_HTTP_PORT / TRITON_PROTOCOL, as serve.py and the load tests."""
    ports = _ports(triton_server)
    env = user_environment(
        TRITON_HOST="127.0.0.1", TRITON_GRPC_PORT=ports["grpc"], TRITON_HTTP_PORT=ports["http"]
    )
    grpc = run_clients("health", "--model", "mnist", env=env)
    assert grpc.returncode == 0, grpc.stderr
    assert f"at 127.0.0.1:{ports['grpc']} over gRPC: live, ready" in grpc.stdout
    http = run_clients("health", "--model", "mnist", env=env | {"TRITON_PROTOCOL": "http"})
    assert http.returncode == 0 and f"at 127.0.0.1:{ports['http']} over HTTP: live, ready" in http.stdout
    flag = run_clients("health", "--model", "mnist", "--protocol", "http", env=env)
    assert flag.returncode == 0 and "over HTTP" in flag.stdout


def test_url_scheme_picks_the_protocol(triton_server):
    for scheme, address, name in (
        ("http", triton_server.http_url, "HTTP"),
        ("grpc", triton_server.grpc_url, "gRPC"),
    ):
        result = run_clients(
            "health", "--model", "l2norm", "--url", f"{scheme}://{address}", env=user_environment()
        )
        assert result.returncode == 0, result.stderr
        assert f"at {address} over {name}: live, ready" in result.stdout


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_port_of_the_other_protocol_is_named_and_not_retried(triton_server, protocol):
    """HTTP sent to the gRPC port ("Bad status line ... \\x00\\x00\\x18\\x04") and gRPC sent to the HTTP port
    ("cannot reach Triton ... is the server running?") both say which protocol the port speaks."""
    other = triton_server.grpc_url if protocol == "http" else triton_server.http_url
    result = run_clients("health", "--protocol", protocol, "--url", other, env=user_environment())
    spoken, used = ("gRPC", "HTTP") if protocol == "http" else ("HTTP", "gRPC")
    assert result.returncode == EXIT_UNREACHABLE, result.stderr
    assert f"error: checking server liveness: {other} speaks {spoken}, not {used}" in result.stderr
    flag = "--http-port" if protocol == "http" else "--grpc-port"
    assert f"Talk {spoken} to it (--protocol {'grpc' if protocol == 'http' else 'http'}" in result.stderr
    assert f"or give Triton's {used} port: {flag} PORT" in result.stderr
    assert "retry" not in result.stderr and "Bad status line" not in result.stderr


def test_health_compares_a_model_with_another_interface(triton_server):
    result = clients(triton_server, "grpc", "health", "--model", "l2norm", "--expect", "mnist")
    assert result.returncode == EXIT_WRONG_MODEL
    assert "expected interface 'mnist': 3 problem(s)" in result.stdout
    assert "input 'image' is missing (the model's inputs: vector)" in result.stdout


# -------------------------------------------------------------------------------------------- infer


@pytest.mark.parametrize("raw", [False, True], ids=["pipeline", "raw"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_infer_top_k_matches_the_model(triton_server, protocol, raw, digit_files, onnx_session):
    folder, files = digit_files
    args = ["infer", str(folder), "--top-k", "3", "--batch-size", "3", "--concurrency", "3", "--json"]
    result = clients(triton_server, protocol, *args, *(["--raw"] if raw else []))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["model"] == ("mnist" if raw else "mnist_pipeline") and document["errors"] == []
    expected = expected_top_k(onnx_session, files, 3)
    assert [r["input"] for r in document["results"]] == sorted(expected)  # every file, in directory order
    # The server's ONNX Runtime runs other batches on one thread: other sums, so scores agree within the
    # suite's bound for two float32 runs of the model (1e-5, tests/unit/test_onnx_eval.py), and the order
    # exactly: the top four probabilities of these files are 1.29 times apart at least (their logits 0.26).
    for result_item in document["results"]:
        got = [(c["index"], c["score"]) for c in result_item["top_k"]]
        want = expected[result_item["input"]]
        assert [i for i, _ in got] == [i for i, _ in want], result_item["input"]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-5)
        assert all(c["label"] == str(c["index"]) for c in result_item["top_k"])  # labels.txt is 0..9
    # The file names carry the true digit: the model gets these validation digits right.
    for result_item in document["results"]:
        true_digit = re.search(r"digit(\d)", result_item["input"]).group(1)
        assert result_item["top_k"][0]["label"] == true_digit, result_item


def test_infer_text_output_and_globs(triton_server, digit_files):
    folder, _ = digit_files
    result = clients(triton_server, "http", "infer", str(folder / "0[0-2]_*.png"), "--top-k", "2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    for line in lines:
        match = re.fullmatch(r"(.+_digit(\d)\.png): (\d) \((\d\.\d{4})\), (\d) \((\d\.\d{4})\)", line)
        assert match, line
        assert match.group(3) == match.group(2) and float(match.group(4)) >= float(match.group(6))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_infer_image_without_digit_fails_alone(triton_server, protocol, digit_files, tmp_path):
    _, files = digit_files
    blank = tmp_path / "blank.png"
    Image.new("L", (40, 40), 180).save(blank)
    inputs = [str(files[0]), str(blank), str(files[1]), str(files[2])]
    result = clients(triton_server, protocol, "infer", *inputs, "--batch-size", "4")
    assert result.returncode == EXIT_BAD_INPUT
    printed = [line.split(":")[0] for line in result.stdout.splitlines()]
    assert printed == [str(files[0]), str(files[1]), str(files[2])]  # the good images still get answers
    assert "1 of 4 images failed" in result.stderr
    assert (
        f"{blank}: running inference on model 'mnist_pipeline': the server rejected the input"
        in result.stderr
    )
    assert "no digit found" in result.stderr


def _pipeline_request_count(server) -> int:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        stats = client.get_inference_statistics("mnist_pipeline")["model_stats"][0]["inference_stats"]
        return stats["success"]["count"] + stats["fail"]["count"]
    finally:
        client.close()


def test_infer_bad_file_stops_before_anything_is_sent(triton_server, digit_files, tmp_path):
    _, files = digit_files
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    before = _pipeline_request_count(triton_server)
    result = clients(
        triton_server, "grpc", "infer", str(files[0]), str(tmp_path / "broken.png"), "missing.png"
    )
    assert result.returncode == EXIT_BAD_INPUT
    assert "error: 2 bad input(s), nothing was sent:" in result.stderr
    assert "broken.png: corrupt image" in result.stderr or "broken.png: not an image" in result.stderr
    assert "missing.png: no such file or directory" in result.stderr
    assert result.stdout == ""
    assert _pipeline_request_count(triton_server) == before


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_infer_wrong_and_unknown_model(triton_server, protocol, digit_files):
    _, files = digit_files
    wrong = clients(triton_server, protocol, "infer", str(files[0]), "--model", "l2norm")
    assert wrong.returncode == EXIT_WRONG_MODEL
    assert (
        "model 'l2norm' on Triton at" in wrong.stderr and "is not what this command expects" in wrong.stderr
    )
    assert "input 'image_bytes' is missing (the model's inputs: vector)" in wrong.stderr
    unknown = clients(triton_server, protocol, "infer", str(files[0]), "--model", "mnist_v2")
    assert unknown.returncode == EXIT_MODEL_UNAVAILABLE
    assert "model 'mnist_v2' is not found on Triton" in unknown.stderr


def test_infer_batch_larger_than_the_model_takes(triton_server, digit_files):
    _, files = digit_files
    result = clients(triton_server, "grpc", "infer", str(files[0]), "--batch-size", "65")
    assert result.returncode == EXIT_USAGE
    assert (
        "--batch-size 65 is larger than model 'mnist_pipeline' accepts (max_batch_size 64)" in result.stderr
    )


def _leftover_client_regions() -> list[str]:
    return sorted(p.name for p in Path("/dev/shm").glob("clients_*")) if Path("/dev/shm").is_dir() else []


def _registered_regions(server) -> list:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        return client.get_system_shared_memory_status(headers={ADMIN_HEADER: server.admin_key})
    finally:
        client.close()


# Both protocols and both paths (BYTES input of the ensemble, FP32 tensors of the raw model) in two runs.
@pytest.mark.parametrize(
    "protocol, raw", [("grpc", False), ("http", True)], ids=["grpc-pipeline", "http-raw"]
)
def test_infer_through_system_shared_memory(triton_server, protocol, raw, digit_files):
    folder, _ = digit_files
    args = [
        "infer",
        str(folder),
        "--json",
        "--batch-size",
        "4",
        "--concurrency",
        "2",
        *(["--raw"] if raw else []),
    ]
    plain = clients(triton_server, protocol, *args)
    shared = clients(triton_server, protocol, *args, "--shared-memory", "system", *admin(triton_server))
    assert plain.returncode == 0 and shared.returncode == 0, shared.stderr
    assert json.loads(shared.stdout)["results"] == json.loads(plain.stdout)["results"]
    assert _registered_regions(triton_server) == []  # unregistered on the server ...
    assert _leftover_client_regions() == []  # ... and unlinked here


def test_shared_memory_needs_the_admin_key(triton_server, digit_files):
    _, files = digit_files
    for protocol in PROTOCOLS:
        result = clients(triton_server, protocol, "infer", str(files[0]), "--shared-memory", "system")
        assert result.returncode == EXIT_ACCESS_DENIED, result.stderr
        assert "keeps this API for clients with its admin key" in result.stderr
        assert (
            "Give the key the server was started with: --admin-key KEY or $TRITON_ADMIN_KEY" in result.stderr
        )
        assert "restart it as `TRITON_ADMIN_KEY=<secret> make serve`" in result.stderr
        # Triton refuses restricted gRPC calls with UNAVAILABLE: a refusal, never retried as "unreachable".
        assert "retry" not in result.stderr and "cannot reach" not in result.stderr
        wrong = clients(
            triton_server,
            protocol,
            "infer",
            str(files[0]),
            "--shared-memory",
            "system",
            "--admin-key",
            "not-the-key",
        )
        assert wrong.returncode == EXIT_ACCESS_DENIED and "refused the admin key this client sent" in (
            wrong.stderr
        )
    assert _leftover_client_regions() == []


# ------------------------------------------------------------------------------------------- l2norm


@pytest.mark.parametrize("shared_memory", ["none", "system"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_l2norm_file_to_file(triton_server, protocol, shared_memory, tmp_path):
    vectors = np.random.default_rng(7).normal(size=(100, 33)).astype(np.float32)
    vectors[5] = 0.0  # the all-zero vector stays zero (eps in the denominator)
    np.save(tmp_path / "in.npy", vectors)
    args = ["l2norm", str(tmp_path / "in.npy"), "--output", str(tmp_path / "out.npy"), "--batch-size", "16"]
    result = clients(triton_server, protocol, *args, "--shared-memory", shared_memory, *admin(triton_server))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"wrote 100 normalized vectors of length 33 to {tmp_path / 'out.npy'}"
    normalized = np.load(tmp_path / "out.npy")
    assert normalized.shape == (100, 33) and normalized.dtype == np.float32
    # The server runs this same float64 reference (no BLAS): equal but for float64's last bits, far below.
    np.testing.assert_allclose(normalized, l2_normalize(vectors), rtol=1e-6, atol=1e-7)
    assert not normalized[5].any()


def test_shared_memory_held_by_a_request_given_up_on_is_still_unregistered(tmp_path):
    """Triton refuses to unregister a region that a request still holds ("... it is currently in use."): a
    client that gave up on a request must ask again once the request is done, not leave its regions
    registered. Here l2norm's batcher holds every request 2.5 s (it waits for a batch of 64) and the client
    gives up after 1 s. (A stopped stub would hold it too, but tritonserver 2.51 aborts on one.)"""
    repository = tmp_path / "repo" / "model_repository"
    shutil.copytree(MODEL_REPOSITORY, repository, ignore=shutil.ignore_patterns("__pycache__", "*.plan"))
    (tmp_path / "repo" / "models").symlink_to(REPO_ROOT / "models")  # the CPU mnist's ONNX file
    config = repository / "l2norm" / "configs" / "cpu.pbtxt"
    text = config.read_text()
    held = {
        "preferred_batch_size: [ 16, 32, 64 ]": "preferred_batch_size: [ 64 ]",
        "max_queue_delay_microseconds: 500": "max_queue_delay_microseconds: 2500000",
    }
    for old, new in held.items():
        assert old in text
        text = text.replace(old, new)
    config.write_text(text)
    np.save(tmp_path / "in.npy", np.ones((1, 8), np.float32))
    server = TritonServer(
        variant="cpu", ports=Ports.free("127.0.0.1"), host="127.0.0.1", model_repository=repository,
        log_file=tmp_path / "tritonserver.log", exit_timeout_s=3, admin_key=secrets.token_hex(32),
    )  # fmt: skip
    with server:
        for protocol in PROTOCOLS:
            args = ["l2norm", str(tmp_path / "in.npy"), "--shared-memory", "system", "--timeout", "1"]
            result = clients(server, protocol, *args, *admin(server))
            assert result.returncode == EXIT_TIMEOUT, result.stderr
            assert "still in use" not in result.stderr  # released within the client's wait: no warning
            assert _registered_regions(server) == [] and _leftover_client_regions() == []
        # make perf's clean-up after perf_analyzer: its regions (named after the model's tensors) that a
        # request still holds are unregistered once the request is done; another client's region stays.
        _perf_regions_are_released_once_their_request_is_done(server)


def _perf_regions_are_released_once_their_request_is_done(server) -> None:
    vector = np.array([[3, 4, 0, 0, 0, 0, 0, 0]], np.float32)
    headers = {ADMIN_HEADER: server.admin_key}
    control = httpclient.InferenceServerClient(server.http_url)
    handles = {}
    try:
        for name in ("vector_0_0", "normalized", "someone_else"):
            key = f"/test_perf_{os.getpid()}_{name}"
            handles[name] = system_shm.create_shared_memory_region(name, key, vector.nbytes)
            control.register_system_shared_memory(name, key, vector.nbytes, headers=headers)
        system_shm.set_shared_memory_region(handles["vector_0_0"], [vector])
        answered = []

        def held_request() -> None:  # its own client: tritonclient's HTTP client stays in one thread
            client = httpclient.InferenceServerClient(server.http_url, network_timeout=30)
            tensor = httpclient.InferInput("vector", list(vector.shape), "FP32")
            tensor.set_shared_memory("vector_0_0", vector.nbytes)
            output = httpclient.InferRequestedOutput("normalized")
            output.set_shared_memory("normalized", vector.nbytes)
            answered.append(client.infer("l2norm", [tensor], outputs=[output]))
            client.close()

        thread = threading.Thread(target=held_request)
        thread.start()
        time.sleep(0.5)  # the request is in the batcher, which holds it 2.5 s
        started = time.monotonic()
        settings = SweepSettings(shared_memory="system", admin_key=server.admin_key)
        released = release_regions("l2norm", server.location, settings)
        waited = time.monotonic() - started
        thread.join(timeout=30)
        assert sorted(released) == ["normalized", "vector_0_0"] and answered
        assert waited > 1.0  # Triton refused them while the request held them: release_regions asked again
        assert [region["name"] for region in _registered_regions(server)] == ["someone_else"]
        normalized = system_shm.get_contents_as_numpy(handles["normalized"], np.float32, list(vector.shape))
        np.testing.assert_allclose(normalized, [[0.6, 0.8, 0, 0, 0, 0, 0, 0]], rtol=1e-6)
    finally:
        control.unregister_system_shared_memory(headers=headers)
        control.close()
        for handle in handles.values():
            system_shm.destroy_shared_memory_region(handle)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_l2norm_stdin_csv_and_json(triton_server, protocol):
    result = clients(triton_server, protocol, "l2norm", stdin=b"3,4\n0,0\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["0.600000024,0.800000012", "0,0"]  # 3/5, 4/5: exact everywhere
    buffer = io.BytesIO()
    np.save(buffer, np.array([[1.0, 2.0, 2.0]], np.float32))
    as_json = clients(triton_server, protocol, "l2norm", "-", "--json", stdin=buffer.getvalue())
    assert as_json.returncode == 0, as_json.stderr
    np.testing.assert_allclose(json.loads(as_json.stdout)["normalized"], [[1 / 3, 2 / 3, 2 / 3]], rtol=1e-6)


def test_l2norm_bad_input_and_wrong_model(triton_server, tmp_path):
    (tmp_path / "bad.csv").write_text("1,2\n3,inf\n")
    result = clients(triton_server, "grpc", "l2norm", str(tmp_path / "bad.csv"))
    assert result.returncode == EXIT_BAD_INPUT and "is not a finite number" in result.stderr
    (tmp_path / "ok.csv").write_text("1,2\n")
    wrong = clients(triton_server, "http", "l2norm", str(tmp_path / "ok.csv"), "--model", "mnist")
    assert wrong.returncode == EXIT_WRONG_MODEL and "input 'vector' is missing" in wrong.stderr


# --------------------------------------------------------------------------------------------- eval


def _accuracy(stdout: str) -> float:
    match = ACCURACY_LINE.match(stdout.splitlines()[-1])
    assert match, f"last line is not `accuracy: <fraction>`: {stdout.splitlines()[-1]!r}"
    return float(match.group(1))


@pytest.mark.parametrize("raw", [False, True], ids=["pipeline", "raw"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_eval_validation_split(triton_server, protocol, raw, tmp_path):
    report_path = tmp_path / "report.json"
    args = ["eval", "--split", "validation", "--batch-size", "32", "--report", str(report_path)]
    result = clients(triton_server, protocol, *args, *(["--raw"] if raw else []))
    assert result.returncode == 0, result.stderr
    value = _accuracy(result.stdout)
    assert value >= MIN_ACCURACY
    assert "eval: 100%" in result.stderr  # the progress bar ran to the end
    assert "confusion matrix (rows: true digit, columns: predicted digit):" in result.stdout
    assert re.search(r"^latency per request \(ms\): p50 [\d.]+  p90 [\d.]+  p99 [\d.]+", result.stdout, re.M)
    report = json.loads(report_path.read_text())
    assert report["digits"] == 1000 and report["model"] == ("mnist" if raw else "mnist_pipeline")
    assert f"{report['accuracy']:.4f}" == f"{value:.4f}"
    matrix = np.array(report["confusion_matrix"])
    validation_labels = mnist.load_split().validation_labels
    np.testing.assert_array_equal(matrix.sum(axis=1), np.bincount(validation_labels, minlength=10))
    assert np.trace(matrix) / matrix.sum() == pytest.approx(report["accuracy"])
    latency = report["latency"]
    assert latency["count"] == 32  # ceil(1000 / 32) requests
    assert 0 < latency["p50_ms"] <= latency["p90_ms"] <= latency["p99_ms"] <= latency["max_ms"]


def test_eval_all_dev_digits_through_the_pipeline(triton_server):
    """The whole 8,000 dev digits, PNG-encoded, through mnist_pipeline: the issue's acceptance check."""
    args = ["eval", "--split", "all", "--batch-size", "32", "--min-accuracy", str(MIN_ACCURACY)]
    result = clients(triton_server, "grpc", *args)
    assert result.returncode == 0, result.stderr
    source = mnist.DEFAULT_DATA_DIR / mnist.DEV_IMAGES_FILE
    assert f"eval: 8000 digits (all split) of {source}, PNG-encoded" in result.stdout
    assert result.stdout.splitlines()[-2].startswith("split: all (7 in 8 of them trained the model")
    assert _accuracy(result.stdout) >= MIN_ACCURACY


def test_eval_defaults_to_the_held_out_digits_and_says_so(triton_server):
    """README's quick start: `eval` with no flags reports the validation split, the honest figure."""
    result = clients(triton_server, "http", "eval", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert "eval: 1000 digits (validation split) of" in result.stdout
    # Exact on every CPU: no validation digit is near a tie (tests/unit/test_models.py, MIN_TOP2_GAP).
    assert result.stdout.splitlines()[-2:] == [
        "split: validation (held out from training: the figure to expect on new digits)",
        "accuracy: 0.9890",
    ]


def test_eval_through_shared_memory(triton_server):
    args = [
        "eval",
        "--raw",
        "--limit",
        "500",
        "--shared-memory",
        "system",
        "--no-progress",
        *admin(triton_server),
    ]
    result = clients(triton_server, "http", *args)
    assert result.returncode == 0, result.stderr
    assert "shared memory system" in result.stdout and _accuracy(result.stdout) >= MIN_ACCURACY
    assert result.stderr == ""  # --no-progress
    assert _registered_regions(triton_server) == [] and _leftover_client_regions() == []


def _write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(gzip.compress(header + array.astype(np.uint8).tobytes()))


def test_eval_below_min_accuracy_exits_1_and_still_ends_with_accuracy(triton_server, tmp_path, onnx_session):
    images, labels = mnist.load_dev_set()
    images, wrong_labels = images[:40], (labels[:40] + 1) % 10  # IDX files whose labels are all off by one
    _write_idx(tmp_path / mnist.DEV_IMAGES_FILE, images)
    _write_idx(tmp_path / mnist.DEV_LABELS_FILE, wrong_labels)
    args = ["eval", "--mnist-dir", str(tmp_path), "--split", "all"]
    result = clients(triton_server, "grpc", *args, "--min-accuracy", "0.5", "--no-progress")
    assert result.returncode == EXIT_FAILED
    predicted = onnx_session.run(None, {"image": mnist.to_tensor(images)})[0].argmax(axis=1)
    # Exact: the server's predictions are these (no dev digit is near a tie, tests/unit/test_models.py).
    assert result.stdout.splitlines()[-1] == f"accuracy: {np.mean(predicted == wrong_labels):.4f}"
    assert "error: accuracy" in result.stderr and "below --min-accuracy 0.5000" in result.stderr


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_eval_wrong_model(triton_server, protocol):
    result = clients(triton_server, protocol, "eval", "--raw", "--model", "mnist_preprocess", "--limit", "5")
    assert result.returncode == EXIT_WRONG_MODEL
    assert "output 'probabilities' is missing (the model's outputs: image)" in result.stderr
    assert "accuracy:" not in result.stdout


def test_server_still_serves_after_the_error_cases(triton_server):
    assert clients(triton_server, "http", "health").returncode == 0


# ------------------------------------------------------------------------------------------ retries


class LateForwarder:
    """Refuses connections on `port` (nothing listens) until open() is called, then relays each connection
    to the real server: a server that comes up while the client is already trying."""

    def __init__(self, target: str):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.opened = threading.Event()
        self.stop = threading.Event()
        self.sockets: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> LateForwarder:
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop.set()
        self.opened.set()
        self.thread.join(timeout=10)
        for sock in self.sockets:
            sock.close()

    def open(self) -> None:
        self.opened.set()

    def _serve(self) -> None:
        self.opened.wait()
        if self.stop.is_set():
            return
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        listener.settimeout(0.2)
        self.sockets.append(listener)
        while not self.stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                continue
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_retries_reach_a_server_that_comes_up_late(triton_server, protocol):
    target = triton_server.grpc_url if protocol == "grpc" else triton_server.http_url
    # The server "comes up" once the client has said it failed and will retry: no clock to lose against on a
    # loaded machine. 7 retries wait up to 15.75 s in all.
    with LateForwarder(target) as forwarder:
        url = f"127.0.0.1:{forwarder.port}"
        command = [sys.executable, "-m", "clients", "health", "--protocol", protocol, "--url", url]
        client = subprocess.Popen(
            [*command, "--retries", "7", "--model", "mnist"],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=user_environment(),
        )
        stderr = []
        for line in client.stderr:
            stderr.append(line)
            if "retry 1 of 7" in line:
                forwarder.open()
        stdout = client.stdout.read()
        client.wait(timeout=60)
    stderr = "".join(stderr)
    assert client.returncode == 0, stderr
    assert f"warning: cannot reach Triton at {url}" in stderr and "retry 1 of 7" in stderr
    assert stdout.splitlines()[-1] == "health: OK"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_misspelt_model_is_answered_with_the_closest_served_name(triton_server, protocol):
    """Issue 40, item 7: a typo listed the kit's four models only; the load test said "no ready server"."""
    result = clients(triton_server, protocol, "health", "--model", "l2nrm")
    assert result.returncode == EXIT_MODEL_UNAVAILABLE
    assert "did you mean 'l2norm'?" in result.stdout, result.stdout
    started = time.monotonic()
    with pytest.raises(
        ModelsNotServed, match=r"is ready but does not serve 'l2nrm'; did you mean 'l2norm'\?"
    ):
        wait_until_ready(triton_server.location, models=["l2nrm"], protocols=[protocol], timeout_s=30)
    assert time.monotonic() - started < 10  # said at once: waiting does not make a model appear
