"""What a client can and cannot make the server do (docs/SECURITY.md), checked against the real tritonserver
of the `triton_server` fixture (the CPU variant of `make serve`, same flags as the TensorRT variant) over
HTTP and gRPC. The claims already covered elsewhere (unload, repository index, shared memory through the
client CLI, the bad-input matrix) are pointed to from docs/SECURITY.md; these tests cover the rest.
"""

from __future__ import annotations

import json
import shutil
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from hostile_inputs import (
    MALFORMED_EXIF,
    WRAPPING_BATCH,
    assert_no_server_internals,
    bytes_tensor,
    encode,
    fuzz_seeds,
    grpc_raw_infer,
    http_binary_infer,
    jpeg_claiming_more_than_it_holds,
    jpeg_with_exif,
    mutated_images,
    on_paper,
)
from PIL import Image
from tritonclient.utils import InferenceServerException

from trt_plugin_kit.interface import (
    ADMIN_HEADER,
    GRPC_ADMIN_HEADER,
    MODEL_NAMES,
    MODEL_REPOSITORY,
    REPO_ROOT,
    repository_models,
)
from trt_plugin_kit.models import mnist
from trt_plugin_kit.serving import cli as serve
from trt_plugin_kit.serving.host import Ports
from trt_plugin_kit.serving.server import TritonServer

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
        assert "not allowed" in message or "not found" in message.lower(), message
    index = client.get_model_repository_index(headers=client.admin)
    names = [m["name"] for m in index] if client.protocol == "http" else [m.name for m in index.models]
    assert set(MODEL_NAMES) <= set(names)  # and the models a user added (new-plugin):
    assert sorted(names) == repository_models(triton_server.model_repository)
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
    # HTTP: the edge's body limit; gRPC: the edge's message limit, judged from the length prefix.
    assert any(words in message.lower() for words in ("too large", "larger than max")), message
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


# ------------------------------------------------------------------------------- hostile content (issue 18)
# Requests are sent together from threads, as hand-built HTTP binary requests, so that they share the models'
# dynamic batches; each must get its own answer and no error may show the server's code.

BURST_THREADS = 16


@pytest.fixture(scope="module")
def digits():
    split = mnist.load_split()
    return split.validation_images[:64], split.validation_labels[:64]


def send_images(triton_server, blobs: list[bytes], model: str = "mnist_pipeline"):
    """All `blobs` at once, one request each: [(HTTP status, answer JSON)] in order."""
    with ThreadPoolExecutor(BURST_THREADS) as pool:
        return list(pool.map(lambda blob: send_image(triton_server, blob, model), blobs))


def send_image(triton_server, blob: bytes, model: str = "mnist_pipeline"):
    return http_binary_infer(
        triton_server.http_url, model, "image_bytes", "BYTES", [1, 1], bytes_tensor([blob])
    )


def probabilities_of(answer) -> np.ndarray:
    status, body = answer
    assert status == 200, body
    (output,) = body["outputs"]
    assert output["name"] == "probabilities" and output["shape"] == [1, 10], output
    return np.array(output["data"])


def refusal(answer) -> str:
    """The message of a per-request refusal (400), checked for server internals."""
    status, body = answer
    assert status == 400, (status, body)
    assert_no_server_internals(body["error"])
    return body["error"]


def test_malformed_exif_jpegs_are_answered_and_do_not_fail_their_batch_neighbours(triton_server, digits):
    """Orientation 6 with a malformed tag made Pillow raise inside execute(): the whole dynamic batch failed
    and the traceback went to the clients (issue 18 item 2). One request in four carries such a JPEG."""
    crafted = [jpeg_with_exif(digits[0][0], entries) for entries in MALFORMED_EXIF.values()]
    good = [encode(Image.fromarray(digit)) for digit in digits[0]]
    blobs = [crafted[i % len(crafted)] if i % 4 == 3 else good[i] for i in range(64)]
    answers = send_images(triton_server, blobs)
    failed = [i for i, answer in enumerate(answers) if answer[0] != 200]
    assert not failed, f"{len(failed)} of 64 failed, e.g. {answers[failed[0]]}"
    for i, answer in enumerate(answers):
        if i % 4 != 3:
            assert int(np.argmax(probabilities_of(answer))) == int(digits[1][i])


def test_fuzzed_images_through_the_server_never_fail_their_neighbours(triton_server, digits):
    """Mutated PNGs/JPEGs (fixed seed) interleaved with good digits: each mutated one is answered or refused
    with INVALID_ARG, and every good one is answered correctly. (The decoder itself gets 400 cases in
    test_serving_preprocess.py.)"""
    cases = iter(mutated_images(fuzz_seeds(digits[0][0]), 48, seed=1818))
    blobs, expected = [], []  # expected: the label of a good digit, or the description of a mutated image
    for i in range(64):
        if i % 4 == 3:
            blobs.append(encode(Image.fromarray(digits[0][i])))
            expected.append(int(digits[1][i]))
        else:
            description, blob = next(cases)
            blobs.append(blob)
            expected.append(description)
    for want, answer in zip(expected, send_images(triton_server, blobs), strict=True):
        if isinstance(want, int):
            assert int(np.argmax(probabilities_of(answer))) == want
        elif answer[0] != 200:
            assert refusal(answer), want


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("4000x4000 JPEG in 3 KB", "corrupt JPEG image data"),  # was decoded: ~1 s, ~700 MB, a digit answered
        ("5000x5000 JPEG", "16777216 pixels"),
        ("2100x2100 PNG", "the limit is 4194304 pixels"),
    ],
)
def test_image_bombs_are_refused_before_decoding(triton_server, digits, case, message):
    """Issue 18 item 6: the limits are what a digit photo needs, and a JPEG claiming more pixels than its
    data can hold is corrupt."""
    blob = {
        "4000x4000 JPEG in 3 KB": lambda: jpeg_claiming_more_than_it_holds(digits[0][0], (4000, 4000)),
        "5000x5000 JPEG": lambda: encode(on_paper(digits[0][0], (5000, 5000)), "JPEG", quality=10),
        "2100x2100 PNG": lambda: encode(on_paper(digits[0][0], (2100, 2100)).convert("L")),
    }[case]()
    assert message in refusal(send_image(triton_server, blob))


def test_a_phone_photo_sized_jpeg_is_read_at_reduced_size(triton_server, digits):
    digit, label = digits[0][1], int(digits[1][1])
    photo = encode(on_paper(digit, (4032, 3024)), "JPEG", quality=90)
    assert int(np.argmax(probabilities_of(send_image(triton_server, photo)))) == label


# name -> (model, input, datatype, per-item dims, one item's bytes)
BATCHED_INPUTS = {
    "l2norm": ("l2norm", "vector", "FP32", [4], np.ones(4, np.float32).tobytes()),
    "mnist": ("mnist", "image", "FP32", [1, 28, 28], np.zeros(784, np.float32).tobytes()),
    "mnist_preprocess": ("mnist_preprocess", "image_bytes", "BYTES", [1], None),
}


def batched_input(name: str, digit: np.ndarray):
    model, tensor, datatype, dims, item = BATCHED_INPUTS[name]
    if item is None:
        item = bytes_tensor([encode(Image.fromarray(digit))])
    return model, tensor, datatype, dims, item


@pytest.fixture(scope="module")
def bare_server(tmp_path_factory):
    """A second real server with the edge off (tritonserver itself on the public ports): the models must
    hold without the edge too (defence in depth), and this shows what the edge now refuses before them."""
    root = tmp_path_factory.mktemp("bare")
    bare = TritonServer(
        variant="cpu", ports=Ports.free("127.0.0.1"), log_file=root / "tritonserver.log", exit_timeout_s=3,
        edge="off",
    )  # fmt: skip
    with bare as server:  # started, ready, stopped at the end of the module
        yield server


def send_batched(server, route: str, model, tensor, datatype, shape, item) -> tuple[str, str]:
    if route == "grpc":
        return grpc_raw_infer(server.grpc_url, model, tensor, datatype, shape, item)
    status, body = http_binary_infer(server.http_url, model, tensor, datatype, shape, item)
    return {200: "OK", 400: "INVALID_ARGUMENT"}.get(status, str(status)), body.get("error", str(body))


@pytest.mark.parametrize("route", ["grpc", "http"])
@pytest.mark.parametrize("name", list(BATCHED_INPUTS))
def test_a_batch_size_of_2_32_is_refused_per_request(triton_server, bare_server, digits, route, name):
    """Triton keeps 32 bits of the declared batch size: [2^32, ...] reaches the model as one item without a
    batch dimension. l2norm raised IndexError with its traceback to the client (issue 18 item 3). The edge
    refuses the dimension before Triton sees it; without the edge, the Python models check the shape they
    get and refuse it themselves."""
    model, tensor, datatype, dims, item = batched_input(name, digits[0][0])
    shape = [WRAPPING_BATCH, *dims]
    answer, message = send_batched(triton_server, route, model, tensor, datatype, shape, item)
    assert answer == "INVALID_ARGUMENT", (answer, message)
    assert f"dimension {WRAPPING_BATCH} of shape" in message, message
    answer, message = send_batched(bare_server, route, model, tensor, datatype, shape, item)
    assert answer == "INVALID_ARGUMENT", (answer, message)
    assert_no_server_internals(str(message))
    assert "no batch dimension" in str(message), message


@pytest.mark.parametrize("route", ["grpc", "http"])
def test_the_pipeline_answers_a_wrapped_batch_only_without_the_edge(
    triton_server, bare_server, digits, route
):
    """What Triton core does with [2^32, 1] (issue 18 item 3): the ensemble hands its steps a well-formed
    one-image request, so no model can tell, and the answer holds that image's probabilities with shape
    [10]. Through the edge it never gets that far."""
    image = encode(Image.fromarray(digits[0][0]))
    shape, item = [WRAPPING_BATCH, 1], bytes_tensor([image])
    answer, message = send_batched(
        triton_server, route, "mnist_pipeline", "image_bytes", "BYTES", shape, item
    )
    assert answer == "INVALID_ARGUMENT" and f"dimension {WRAPPING_BATCH}" in message, (answer, message)
    if route == "grpc":
        answer, outputs = grpc_raw_infer(
            bare_server.grpc_url, "mnist_pipeline", "image_bytes", "BYTES", shape, item
        )
        assert answer == "OK" and outputs["probabilities"] in ([10], [1, 10]), (answer, outputs)
        return
    status, body = http_binary_infer(
        bare_server.http_url, "mnist_pipeline", "image_bytes", "BYTES", shape, item
    )
    assert status == 200, body
    assert body["outputs"][0]["shape"] in ([10], [1, 10])
    assert int(np.argmax(body["outputs"][0]["data"])) == int(digits[1][0])


def test_hostile_tensors_do_not_fail_their_batch_neighbours(bare_server, digits):
    """Wrapped batch sizes and NaN images sent among good requests to the same models at the same time:
    306 of 480 good l2norm neighbours failed when the IndexError escaped execute(). Sent without the edge
    (which refuses the wrapped batch itself): the models must hold on their own."""
    vector = np.arange(1, 5, dtype=np.float32).tobytes()
    image = mnist.to_tensor(digits[0][0]).tobytes()
    nan_image = np.full(784, np.nan, np.float32).tobytes()
    requests = {  # (hostile, model) -> (input, shape, data)
        (False, "l2norm"): ("vector", [1, 4], vector),
        (True, "l2norm"): ("vector", [WRAPPING_BATCH, 4], vector),
        (False, "mnist"): ("image", [1, 1, 28, 28], image),
        (True, "mnist"): ("image", [1, 1, 28, 28], nan_image),
    }
    calls = [(i % 4 == 3, ("l2norm", "mnist")[i % 2]) for i in range(96)]

    def send(call):
        name, shape, data = requests[call]
        return http_binary_infer(bare_server.http_url, call[1], name, "FP32", shape, data)

    with ThreadPoolExecutor(BURST_THREADS) as pool:
        answers = list(pool.map(send, calls))
    for (hostile, model), (status, body) in zip(calls, answers, strict=True):
        if hostile:
            refusal((status, body))
            continue
        assert status == 200, (model, body)
        if model == "l2norm":
            np.testing.assert_allclose(
                body["outputs"][0]["data"], [v / 30**0.5 for v in (1, 2, 3, 4)], rtol=1e-6
            )


# A model that fails the way a library can: l2norm raising an unexpected exception (whose message names a
# server path) on vectors starting with 13. Same shape as its neighbours, so they share dynamic batches.
FAULTY_L2NORM = """
import importlib.util

spec = importlib.util.spec_from_file_location("real_l2norm", {real!r})
real = importlib.util.module_from_spec(spec)
spec.loader.exec_module(real)


class TritonPythonModel(real.TritonPythonModel):
    def _normalize(self, vectors):
        if (vectors[:, 0] == 13).any():
            raise RuntimeError("a library failed in /srv/secret/site-packages/lib.py")
        return super()._normalize(vectors)
"""


@pytest.fixture(scope="module")
def server_with_a_faulty_model(tmp_path_factory):
    """A second real server on a copy of the repository whose l2norm raises unexpectedly."""
    root = tmp_path_factory.mktemp("faulty")
    shutil.copytree(MODEL_REPOSITORY, root / "model_repository")
    (root / "models").symlink_to(
        REPO_ROOT / "models"
    )  # the CPU mnist's ONNX file, relative to the repository
    (root / "model_repository" / "l2norm" / "1" / "model.py").write_text(
        FAULTY_L2NORM.format(real=str(MODEL_REPOSITORY / "l2norm" / "1" / "model.py"))
    )
    server = TritonServer(
        variant="cpu",
        ports=Ports.free("127.0.0.1"),
        host="127.0.0.1",
        model_repository=root / "model_repository",
        log_file=root / "tritonserver.log",
        exit_timeout_s=3,
    )
    try:
        server.start()
        server.wait_until_ready(180)
        yield server
    finally:
        server.stop()


def test_an_unexpected_exception_fails_only_its_request_and_shows_no_internals(server_with_a_faulty_model):
    """The catch-all of every Python model (trt_plugin_kit/serving/python_backend.py): the failing request
    gets a
    short INTERNAL error naming the exception type, the traceback goes to the server log, and the requests
    batched with it are answered."""
    server = server_with_a_faulty_model
    faulty, good = np.array([13, 1, 1, 1], np.float32), np.array([3, 4, 0, 0], np.float32)
    vectors = [faulty if i % 4 == 3 else good for i in range(64)]

    def send(vector):
        return http_binary_infer(server.http_url, "l2norm", "vector", "FP32", [1, 4], vector.tobytes())

    with ThreadPoolExecutor(BURST_THREADS) as pool:
        answers = list(pool.map(send, vectors))
    for i, (status, body) in enumerate(answers):
        if i % 4 == 3:
            assert status == 500, body
            assert body["error"].startswith("l2norm: internal error (RuntimeError) while processing")
            assert_no_server_internals(body["error"])
            assert "/srv/secret" not in body["error"]
        else:
            assert status == 200, body
            np.testing.assert_allclose(body["outputs"][0]["data"], [0.6, 0.8, 0, 0], rtol=1e-6)
    log = Path(server.log_file).read_text(errors="replace")
    assert "Traceback" in log and "/srv/secret/site-packages/lib.py" in log
