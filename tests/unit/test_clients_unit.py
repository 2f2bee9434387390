"""The clients' parts that need no Triton: flags, input loading, model contracts, statistics, and the
errors for servers that are down or silent (a closed port, a socket that never answers)."""

from __future__ import annotations

import gzip
import io
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clients import cli
from clients.commands._common import parse_classification
from clients.commands.evaluate import select_digits
from clients.contracts import CONTRACTS, L2NORM, MNIST, MNIST_PIPELINE, check_model
from clients.errors import (
    EXIT_BAD_INPUT,
    EXIT_TIMEOUT,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    BadInputError,
    UsageError,
)
from clients.inputs import (
    encode_png,
    expand_image_paths,
    load_dev_digits,
    load_vectors,
    preprocess_for_mnist,
    read_image,
    read_images,
    save_vectors,
)
from clients.stats import (
    accuracy,
    confusion_matrix,
    format_accuracy_line,
    format_confusion_matrix,
    summarize_latencies,
)
from clients.tritonserver import ConnectionSettings, normalize_config, normalize_metadata
from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.models import mnist
from trt_plugin_kit.serving import preprocess as serving_preprocess

COMMANDS = ("infer", "l2norm", "eval", "health")


def run_cli(
    *args: str, stdin: bytes | None = None, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python -m clients ARGS` as a user runs it; the environment's admin key is left out."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_ADMIN_KEY"} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "clients", *args],
        cwd=REPO_ROOT,
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env=env,
    )


def command_args(command: str, tmp_path: Path) -> list[str]:
    """Valid arguments for each command, so that only the connection can fail."""
    if command == "infer":
        path = tmp_path / "seven.png"
        Image.fromarray(mnist.load_dev_set()[0][0]).save(path)
        return ["infer", str(path)]
    if command == "l2norm":
        path = tmp_path / "v.csv"
        path.write_text("3,4\n")
        return ["l2norm", str(path)]
    if command == "eval":
        return ["eval", "--limit", "10", "--no-progress"]
    return ["health"]


# ------------------------------------------------------------------------------------------- flags


def test_help_lists_every_command_and_defaults():
    result = run_cli("--help")
    assert result.returncode == 0
    for command in COMMANDS:
        assert command in result.stdout.decode()
    infer_help = run_cli("infer", "--help").stdout.decode()
    for flag in ("--protocol", "--url", "--model", "--timeout", "--ssl", "--root-certificates", "--header"):
        assert flag in infer_help
    assert "(default: the --url scheme, else grpc; $TRITON_PROTOCOL)" in " ".join(infer_help.split())
    assert "(default: 30)" in infer_help and "(default: 8001; $TRITON_GRPC_PORT)" in infer_help


@pytest.mark.parametrize(
    "argv, message",
    [
        (["infer", "x.png", "--batch-size", "0"], "must be at least 1"),
        (["eval", "--min-accuracy", "1.5"], "between 0 and 1"),
        (["health", "--protocol", "udp"], "expected one of grpc, http, got 'udp'"),
        (["health", "--header", "novalue"], "KEY=VALUE"),
        (["health", "--timeout", "-1"], "more than 0"),
        (["l2norm", "--concurrency", "many"], "whole number"),
    ],
)
def test_bad_flags_exit_with_usage_code(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.build_parser().parse_args(argv)
    assert exit_info.value.code == EXIT_USAGE
    assert message in capsys.readouterr().err


def test_connection_flags_are_the_same_for_every_command():
    for protocol, port in (("grpc", "8001"), ("http", "8000")):
        for command in ("infer", "l2norm", "eval", "health"):
            extra = ["img.png"] if command == "infer" else []
            args = cli.build_parser().parse_args(
                [command, *extra, "--protocol", protocol, "--header", "x-team=clients", "--timeout", "2.5"]
            )
            settings = cli.connection_settings(args)
            assert settings.resolved_url() == f"127.0.0.1:{port}"
            assert settings.headers == {"x-team": "clients"}
            assert settings.timeout_s == 2.5 and settings.protocol == protocol


def test_admin_key_header_name_depends_on_protocol(monkeypatch):
    monkeypatch.setenv("TRITON_ADMIN_KEY", "from-env")
    grpc_args = cli.build_parser().parse_args(["health"])
    assert cli.connection_settings(grpc_args).headers == {"triton-grpc-protocol-triton-admin-key": "from-env"}
    http_args = cli.build_parser().parse_args(["health", "--protocol", "http", "--admin-key", "flag"])
    assert cli.connection_settings(http_args).headers == {"triton-admin-key": "flag"}


def _settings(*argv: str) -> ConnectionSettings:
    return cli.connection_settings(cli.build_parser().parse_args(["health", *argv]))


def test_url_forms():
    assert _settings("--url", "localhost:9000", "--protocol", "http").resolved_url() == "localhost:9000"
    https = _settings("--url", "https://triton.example:443/")
    assert (https.protocol, https.resolved_url(), https.ssl) == ("http", "triton.example:443", True)
    grpcs = _settings("--url", "grpcs://triton.example:8001")
    assert (grpcs.protocol, grpcs.resolved_url(), grpcs.ssl) == ("grpc", "triton.example:8001", True)
    # The scheme picks the protocol: no --protocol needed.
    assert _settings("--url", "http://127.0.0.1:18200").describe() == "127.0.0.1:18200 over HTTP"
    assert _settings("--url", "grpc://127.0.0.1:18201").describe() == "127.0.0.1:18201 over gRPC"
    for argv, message in (
        (["--url", "http://h:1", "--protocol", "grpc"], "is an HTTP URL but --protocol is grpc"),
        (["--url", "grpc://h:1", "--protocol", "http"], "is a gRPC URL but --protocol is http"),
        (["--url", "ftp://h:1"], "unknown scheme 'ftp'"),
        (["--url", "h:1/v2"], "expected HOST:PORT"),
        (["--url", "h"], "expected HOST:PORT"),
        (["--url", "h:99999"], "1 to 65535"),
    ):
        with pytest.raises(UsageError, match=message):
            _settings(*argv)


def test_server_location_comes_from_the_environment_like_every_tool(monkeypatch):
    """TRITON_HOST / TRITON_HTTP_PORT / TRITON_GRPC_PORT / TRITON_PROTOCOL, as serve.py and the load tests."""
    monkeypatch.setenv("TRITON_HOST", "10.0.0.7")
    monkeypatch.setenv("TRITON_GRPC_PORT", "18201")
    monkeypatch.setenv("TRITON_HTTP_PORT", "18200")
    assert _settings().describe() == "10.0.0.7:18201 over gRPC"
    assert _settings("--protocol", "http").describe() == "10.0.0.7:18200 over HTTP"
    assert _settings("--grpc-port", "9001").describe() == "10.0.0.7:9001 over gRPC"  # the flag wins
    monkeypatch.setenv("TRITON_PROTOCOL", "http")
    assert _settings().describe() == "10.0.0.7:18200 over HTTP"
    # A --url scheme on the command line wins over $TRITON_PROTOCOL (a --protocol flag would be an error).
    assert _settings("--url", "grpc://h:5").describe() == "h:5 over gRPC"


@pytest.mark.parametrize(
    "variable, value, message",
    [
        ("TRITON_GRPC_PORT", "x", "argument --grpc-port: $TRITON_GRPC_PORT='x': expected a port number"),
        ("TRITON_HTTP_PORT", "70000", "$TRITON_HTTP_PORT='70000': a port number is 1 to 65535"),
        ("TRITON_PROTOCOL", "udp", "$TRITON_PROTOCOL='udp': expected one of grpc, http"),
        ("TRITON_HOST", "http://h", "$TRITON_HOST='http://h': expected a host name or address"),
    ],
)
def test_a_bad_environment_value_is_a_usage_error_that_names_the_variable(variable, value, message):
    result = run_cli("health", env={variable: value})
    assert result.returncode == EXIT_USAGE, result.stderr
    assert message in result.stderr.decode() and "Traceback" not in result.stderr.decode()


def test_tls_flags_need_ssl_and_go_together():
    parse = cli.build_parser().parse_args
    with pytest.raises(UsageError, match="need --ssl"):
        cli.connection_settings(parse(["health", "--root-certificates", "ca.pem"]))
    with pytest.raises(UsageError, match="go together"):
        cli.connection_settings(parse(["health", "--ssl", "--private-key", "key.pem"]))
    settings = cli.connection_settings(parse(["health", "--url", "https://h:8443", "--protocol", "http"]))
    assert settings.ssl and settings.describe() == "h:8443 over HTTP (TLS)"


def test_missing_certificate_file_is_a_bad_input_error(tmp_path):
    result = run_cli("health", "--ssl", "--root-certificates", str(tmp_path / "none.pem"), "--retries", "0")
    assert result.returncode == EXIT_BAD_INPUT
    assert "cannot read --root-certificates" in result.stderr.decode()


def test_cuda_shared_memory_gives_a_clear_error_where_unavailable():
    try:
        import tritonclient.utils.cuda_shared_memory  # noqa: F401
    except (ImportError, RuntimeError, OSError):
        pass
    else:
        pytest.skip("CUDA shared memory helpers import here; this test is for machines without them")
    result = run_cli("l2norm", "--shared-memory", "cuda", "-", stdin=b"1,2\n")
    assert result.returncode == 1
    stderr = result.stderr.decode()
    assert "CUDA shared memory is not available on this machine" in stderr
    assert "--shared-memory system" in stderr


# ------------------------------------------------------------------------------ server down / silent


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed


@pytest.mark.parametrize("protocol", ["grpc", "http"])
@pytest.mark.parametrize("command", COMMANDS)
def test_server_down_says_so_and_exits_3(command, protocol, tmp_path):
    url = f"127.0.0.1:{closed_port()}"
    started = time.monotonic()
    result = run_cli(*command_args(command, tmp_path), "--protocol", protocol, "--url", url, "--retries", "2")
    elapsed = time.monotonic() - started
    stderr = result.stderr.decode()
    assert result.returncode == EXIT_UNREACHABLE, stderr
    scheme = "gRPC" if protocol == "grpc" else "HTTP"
    assert f"cannot reach Triton at {url} over {scheme}: is the server running? (make serve)" in stderr
    assert "Traceback" not in stderr
    assert elapsed < 20  # 2 retries with backoff 0.25 + 0.5 s: bounded, not hanging


@pytest.fixture
def silent_server():
    """A TCP port that accepts connections and never answers: what an overloaded or hung server looks like."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept_forever():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in accepted:
            connection.close()
        listener.close()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_timeout_is_reported_and_not_retried(protocol, silent_server, tmp_path):
    started = time.monotonic()
    result = run_cli(
        *command_args("infer", tmp_path), "--protocol", protocol, "--url", silent_server, "--timeout", "1"
    )
    elapsed = time.monotonic() - started
    stderr = result.stderr.decode()
    assert result.returncode == EXIT_TIMEOUT, stderr
    assert f"no answer from Triton at {silent_server}" in stderr and "within 1 s (--timeout)" in stderr
    assert elapsed < 15  # one attempt of 1 s (plus interpreter start), no retries


# -------------------------------------------------------------------------------------------- inputs


def test_expand_image_paths_files_directories_globs(tmp_path):
    (tmp_path / "a").mkdir()
    for name in ("a/1.png", "a/2.jpg", "a/notes.txt", "b.png", "c.bmp"):
        (tmp_path / name).write_bytes(b"x")
    found = expand_image_paths([str(tmp_path / "a"), str(tmp_path / "*.png"), str(tmp_path / "b.png")])
    assert found == [tmp_path / "a/1.png", tmp_path / "a/2.jpg", tmp_path / "b.png"]
    with pytest.raises(BadInputError) as error:
        expand_image_paths(
            [str(tmp_path / "missing.png"), str(tmp_path / "*.gif"), str(tmp_path / "a/notes.txt")]
        )
    message = str(error.value)
    assert "missing.png: no such file or directory" in message and "no file matches" in message


def test_read_images_reports_every_bad_file_at_once(tmp_path):
    good = tmp_path / "good.png"
    Image.fromarray(np.full((28, 28), 200, np.uint8)).save(good)
    (tmp_path / "text.png").write_text("not an image")
    (tmp_path / "empty.png").write_bytes(b"")
    truncated = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64), dtype=np.uint8)).save(
        truncated, "PNG"
    )
    (tmp_path / "cut.png").write_bytes(truncated.getvalue()[:200])
    paths = [good, tmp_path / "text.png", tmp_path / "empty.png", tmp_path / "cut.png"]
    with pytest.raises(BadInputError) as error:
        read_images(paths)
    message = str(error.value)
    assert "3 of 4 inputs are not usable images (nothing was sent)" in message
    assert "text.png: not an image" in message and "empty.png: empty file" in message and "cut.png" in message
    assert read_images([good])[0].data == good.read_bytes()  # PNG goes as it is


def test_formats_the_server_does_not_decode_are_reencoded_losslessly(tmp_path):
    pixels = np.random.default_rng(1).integers(0, 255, (30, 40), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "digit.bmp")
    image = read_image(tmp_path / "digit.bmp")
    assert image.format == "BMP" and image.data.startswith(b"\x89PNG")
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(image.data))), pixels)


def test_raw_preprocessing_is_the_servers(tmp_path):
    digit = mnist.load_dev_set()[0][3]
    rgba = Image.fromarray(255 - np.kron(digit, np.ones((3, 3), np.uint8))).convert("RGBA")
    rgba.save(tmp_path / "big.png")
    image = read_image(tmp_path / "big.png")
    np.testing.assert_array_equal(preprocess_for_mnist(image), serving_preprocess.decode_digit(image.data))
    Image.new("L", (40, 40), 128).save(tmp_path / "blank.png")
    with pytest.raises(BadInputError, match="no digit"):
        preprocess_for_mnist(read_image(tmp_path / "blank.png"))


def test_encode_png_is_lossless():
    digit = mnist.load_dev_set()[0][5]
    decoded = np.asarray(Image.open(io.BytesIO(encode_png(digit))))
    np.testing.assert_array_equal(decoded, digit)


def test_load_vectors_from_npy_csv_text(tmp_path, monkeypatch):
    matrix = np.arange(12, dtype=np.float64).reshape(3, 4) - 5.5
    np.save(tmp_path / "m.npy", matrix)
    np.testing.assert_array_equal(load_vectors(str(tmp_path / "m.npy")), matrix.astype(np.float32))
    np.save(tmp_path / "one.npy", np.array([3.0, 4.0]))
    assert load_vectors(str(tmp_path / "one.npy")).shape == (1, 2)
    (tmp_path / "m.csv").write_text("# header comment\n1, 2, 3\n\n4,5,6  # trailing\n")
    np.testing.assert_array_equal(load_vectors(str(tmp_path / "m.csv")), [[1, 2, 3], [4, 5, 6]])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"1 2\n3 4\n")))
    np.testing.assert_array_equal(load_vectors("-"), [[1, 2], [3, 4]])
    buffer = io.BytesIO()
    np.save(buffer, matrix)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(buffer.getvalue())))
    np.testing.assert_array_equal(load_vectors("-"), matrix.astype(np.float32))


@pytest.mark.parametrize(
    "content, message",
    [
        (b"1,2\n3\n", "line 2: 1 values, but the first vector has 2"),
        (b"1,nan\n", "not a finite number"),
        (b"1,abc\n", "line 1: not a number"),
        (b"# nothing\n\n", "no vectors found"),
        (b"1e39,1\n", "too large for float32"),
        (b"\xff\xfe\x00", "neither a .npy array nor UTF-8 text"),
    ],
)
def test_load_vectors_rejects_bad_text(tmp_path, content, message):
    (tmp_path / "bad.csv").write_bytes(content)
    with pytest.raises(BadInputError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_vectors(str(tmp_path / "bad.csv"))


def test_load_vectors_rejects_bad_arrays(tmp_path):
    np.save(tmp_path / "cube.npy", np.zeros((2, 2, 2)))
    np.save(tmp_path / "strings.npy", np.array(["a", "b"]))
    np.save(tmp_path / "empty.npy", np.zeros((0, 3)))
    (tmp_path / "fake.npy").write_bytes(b"1,2\n")
    for name, message in (
        ("cube.npy", "expected vectors"),
        ("strings.npy", "expected numbers"),
        ("empty.npy", "no values"),
        ("fake.npy", "no NumPy header"),
        ("absent.npy", "cannot read"),
    ):
        with pytest.raises(BadInputError, match=message):
            load_vectors(str(tmp_path / name))


def test_save_vectors_round_trip(tmp_path):
    vectors = np.random.default_rng(2).normal(size=(5, 3)).astype(np.float32)
    save_vectors(str(tmp_path / "out.npy"), vectors)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), vectors)
    save_vectors(str(tmp_path / "out.csv"), vectors)
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "out.csv", delimiter=",", dtype=np.float32), vectors)
    with pytest.raises(BadInputError, match=".npy or .csv"):
        save_vectors(str(tmp_path / "out.bin"), vectors)


def _write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(gzip.compress(header + array.tobytes()))


def test_load_dev_digits_errors(tmp_path, monkeypatch):
    _write_idx(tmp_path / mnist.DEV_IMAGES_FILE, np.zeros((3, 28, 28), np.uint8))
    _write_idx(tmp_path / mnist.DEV_LABELS_FILE, np.array([1, 2, 3], np.uint8))
    images, labels = load_dev_digits(tmp_path)
    assert images.shape == (3, 28, 28) and labels.tolist() == [1, 2, 3]
    monkeypatch.setenv("MNIST_DIR", str(tmp_path))  # the variable every tool reads
    assert load_dev_digits(None)[1].tolist() == [1, 2, 3]
    _write_idx(tmp_path / mnist.DEV_LABELS_FILE, np.array([1, 2], np.uint8))
    with pytest.raises(BadInputError, match="3 images but 2 labels"):
        load_dev_digits(tmp_path)
    (tmp_path / mnist.DEV_IMAGES_FILE).write_bytes(b"hello world")
    with pytest.raises(BadInputError, match="not an MNIST IDX file"):
        load_dev_digits(tmp_path)
    with pytest.raises(BadInputError, match=r"nowhere \(the folder given\) has no mnist-dev-images"):
        load_dev_digits("nowhere")


def test_eval_without_the_digits_says_where_they_are_expected_and_exits_7(tmp_path):
    # The closed port is never reached: missing data is reported first.
    result = run_cli("eval", "--url", f"127.0.0.1:{closed_port()}", env={"MNIST_DIR": str(tmp_path)})
    stderr = result.stderr.decode()
    assert result.returncode == EXIT_BAD_INPUT, stderr
    assert f"MNIST digits not found: {tmp_path} ($MNIST_DIR) has no mnist-dev-images-idx3-ubyte.gz" in stderr
    assert "this project keeps them in ../shared/data/mnist beside the checkout" in stderr
    assert "Point --mnist-dir DIR or $MNIST_DIR at a folder holding" in stderr
    assert "`eval` needs them and stops here (nothing was sent)" in stderr
    assert "python -m clients infer samples/digits/" in stderr


def test_eval_bad_idx_files_exit_7_before_connecting(tmp_path):
    (tmp_path / mnist.DEV_IMAGES_FILE).write_bytes(b"junk")
    (tmp_path / mnist.DEV_LABELS_FILE).write_bytes(b"junk")
    result = run_cli("eval", "--mnist-dir", str(tmp_path), "--url", f"127.0.0.1:{closed_port()}")
    assert result.returncode == EXIT_BAD_INPUT
    assert "not an MNIST IDX file" in result.stderr.decode()


def test_select_digits_uses_the_models_split():
    train, validation = mnist.split_indices(80)
    np.testing.assert_array_equal(select_digits(80, "validation", None), validation)
    np.testing.assert_array_equal(select_digits(80, "train", 5), train[:5])
    np.testing.assert_array_equal(select_digits(80, "all", 3), [0, 1, 2])


# ----------------------------------------------------------------------------------------- contracts


def config_for(contract, max_batch_size=64, labels=True) -> dict:
    def tensors(specs, with_labels):
        return [
            {
                "name": s.name,
                "data_type": "TYPE_STRING" if s.datatype == "BYTES" else f"TYPE_{s.datatype}",
                "dims": list(s.dims),
                "label_filename": "labels.txt" if with_labels and s.labels else "",
            }
            for s in specs
        ]

    return normalize_config(
        {
            "max_batch_size": max_batch_size,
            "input": tensors(contract.inputs, False),
            "output": tensors(contract.outputs, labels),
        }
    )


def metadata_for(contract) -> dict:
    def tensors(specs):
        return [{"name": s.name, "datatype": s.datatype, "shape": [-1, *s.dims]} for s in specs]

    return {"inputs": tensors(contract.inputs), "outputs": tensors(contract.outputs)}


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_the_serving_interface_passes_its_own_contract(name):
    contract = CONTRACTS[name]
    check = check_model(contract, config_for(contract), metadata_for(contract))
    assert check.ok and not check.warnings and check.max_batch_size == 64


def test_the_repository_configs_match_the_contracts():
    """The CPU and TensorRT configs in model_repository/ are what the clients expect (names, types, dims)."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    for name, contract in CONTRACTS.items():
        folder = REPO_ROOT / "model_repository" / name
        for path in [folder / "config.pbtxt", *sorted((folder / "configs").glob("*.pbtxt"))]:
            if not path.is_file():
                continue
            message = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
            config = normalize_config(json_format.MessageToDict(message, preserving_proto_field_name=True))
            check = check_model(contract, config)
            assert check.ok, f"{path}: {check.problems}"
            assert not check.warnings, f"{path}: {check.warnings}"


def test_a_wrong_model_lists_every_difference():
    check = check_model(MNIST_PIPELINE, config_for(L2NORM), metadata_for(L2NORM))
    assert not check.ok
    assert "input 'image_bytes' is missing (the model's inputs: vector)" in check.problems
    assert "output 'probabilities' is missing (the model's outputs: normalized)" in check.problems
    assert "input 'vector' is required by the model but this client does not send it" in check.problems
    assert len(check.problems) == len(set(check.problems)) == 3  # config and metadata not double-counted


def test_dtype_shape_and_batching_differences():
    config = config_for(MNIST, max_batch_size=0)
    config["input"][0]["data_type"] = "TYPE_FP16"
    config["input"][0]["dims"] = [28, 28]
    config["output"][0]["dims"] = [-1]  # any size on the server is fine for the client
    check = check_model(MNIST, config)
    assert check.problems == [
        "max_batch_size is 0: the model has no batch dimension, the client sends batches",
        "input 'image': datatype is FP16, expected FP32",
        "input 'image': shape is [28, 28], expected [1, 28, 28] (per item, -1 = any)",
    ]


def test_missing_labels_is_a_warning_and_fixed_vector_length_is_reported():
    check = check_model(MNIST, config_for(MNIST, labels=False))
    assert check.ok and "no label_filename" in check.warnings[0]
    config = config_for(L2NORM)
    config["input"][0]["dims"] = [128]
    check = check_model(L2NORM, config)
    assert check.ok and check.input_shapes["vector"] == (128,)


def test_grpc_json_forms_are_normalized():
    grpc_config = {
        "config": {
            "max_batch_size": 8,
            "input": [{"name": "vector", "data_type": "TYPE_FP32", "dims": ["-1"]}],
        }
    }
    config = normalize_config(grpc_config)
    assert config["max_batch_size"] == 8 and config["input"][0]["dims"] == [-1]
    assert config["output"] == [] and config["input"][0]["label_filename"] == ""
    assert normalize_config({"name": "x"})["max_batch_size"] == 0  # gRPC omits zero values
    metadata = normalize_metadata({"inputs": [{"name": "vector", "datatype": "FP32", "shape": ["-1", "-1"]}]})
    assert metadata["inputs"][0]["shape"] == [-1, -1] and metadata["outputs"] == []


# ---------------------------------------------------------------------------------------- statistics


def test_confusion_matrix_and_accuracy():
    true = [0, 0, 1, 2, 2, 2]
    predicted = [0, 1, 1, 2, 0, 2]
    matrix = confusion_matrix(true, predicted, num_classes=3)
    assert matrix.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 2]]
    assert accuracy(matrix) == pytest.approx(4 / 6)
    assert accuracy(np.zeros((3, 3), np.int64)) == 0.0
    text = format_confusion_matrix(matrix)
    assert text.splitlines()[0].split() == ["true\\pred", "0", "1", "2", "recall"]
    assert text.splitlines()[3].split() == ["2", "1", "0", "2", "0.6667"]
    with pytest.raises(ValueError, match="outside"):
        confusion_matrix([0, 3], [0, 1], num_classes=3)
    with pytest.raises(ValueError, match="labels but"):
        confusion_matrix([0, 1], [0], num_classes=3)


def test_latency_percentiles():
    summary = summarize_latencies([i / 1000 for i in range(1, 101)])  # 1..100 ms
    assert summary.count == 100 and summary.max_ms == pytest.approx(100)
    assert summary.mean_ms == pytest.approx(50.5)
    # numpy's linear interpolation: rank p/100 * (n - 1)
    assert summary.percentiles_ms == pytest.approx({50: 50.5, 90: 90.1, 99: 99.01})
    assert summarize_latencies([]).count == 0
    assert summary.as_dict()["p99_ms"] == pytest.approx(99.01)


def test_accuracy_line_format():
    assert format_accuracy_line(0.985) == "accuracy: 0.9850"
    assert format_accuracy_line(1.0) == "accuracy: 1.0000"
    assert format_accuracy_line(2 / 3) == "accuracy: 0.6667"


def test_parse_classification():
    array = np.array([[b"0.9:7:seven", b"0.05:1:one"], [b"0.5:3", b"0.25:2:a:b"]], dtype=np.object_)
    assert parse_classification(array) == [
        [{"label": "seven", "index": 7, "score": 0.9}, {"label": "one", "index": 1, "score": 0.05}],
        [{"label": "3", "index": 3, "score": 0.5}, {"label": "a:b", "index": 2, "score": 0.25}],
    ]


def test_connection_settings_describe():
    assert ConnectionSettings().describe() == "127.0.0.1:8001 over gRPC"
    assert ConnectionSettings(protocol="http", url="h:1", ssl=True).describe() == "h:1 over HTTP (TLS)"
