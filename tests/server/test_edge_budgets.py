"""Issue 39: every resource the edge holds for a client has a budget the client cannot renew.

Each test is one observation of the issue's table, judged by outcome: an honest client (127.0.0.1) keeps
being answered within 2 s while an attacker (127.0.0.2, another peer: loopback answers all of 127/8) does
what the table says; the front's memory stays bounded and it is never restarted. The gRPC tests run against
each gRPC front alone (the compiled one, and the Python one that serves where it is not built), its
upstream a real gRPC server standing where tritonserver's socket is (:class:`Answerer`, answering every
ModelInfer with ``answer_bytes`` bytes), with its time budgets shortened so that each test takes seconds; the
budgets' defaults are edge/limits.py's (docs/SECURITY.md). The HTTP front's budgets, tritonserver's memory
and the pipeline flood are tried through a whole server; more attacks through it are in
test_edge_attacks.py.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent import futures
from pathlib import Path

import grpc
import hpack
import pytest
from tritonclient.grpc import service_pb2 as pb

from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.serving.edge import limits, policy
from trt_plugin_kit.serving.edge.native_front import BINARY_NAME, configuration, models_block, native_binary
from trt_plugin_kit.serving.edge.policy import SERVICE
from trt_plugin_kit.serving.edge.tensors import ModelInterface
from trt_plugin_kit.serving.host import free_port
from trt_plugin_kit.tritonserver.protocol import TensorSpec

BINARY = native_binary()
NOT_BUILT = f"{BINARY_NAME} is not built (make edge-native; needs libnghttp2-dev, libssl-dev and zlib1g-dev)"
MODELS = {
    "l2norm": ModelInterface(
        "l2norm", 64, {"vector": TensorSpec("vector", "FP32", (-1,))}, frozenset({"normalized"})
    ),
}
ATTACKER = "127.0.0.2"
HONEST_WITHIN_S = 2.0
# The Python gRPC front (the fallback where the compiled one is not built): a client that connects while 512
# zero-window calls of 2 MiB answers arrive waits while Python refuses and budgets the burst: its first call
# 1.1-1.9 s on a loaded 2-core machine, 2.53 s in CI's (14a13e6); every later call ~20 ms (SECURITY.md).
PYTHON_FRONT_HONEST_WITHIN_S = 4.0
# Shortened so that a test waits seconds, not the defaults' tens of seconds.
SHORT = {"answer_timeout_ms": 2000, "handshake_timeout_ms": 1000, "idle_timeout_ms": 3000}


def honest_request() -> bytes:
    message = pb.ModelInferRequest(model_name="l2norm")
    message.inputs.add(name="vector", datatype="FP32", shape=[1, 2])
    message.raw_input_contents.append(struct.pack("<2f", 3.0, 4.0))
    return message.SerializeToString()


class Answerer:
    """Stands where tritonserver's gRPC socket is: every ModelInfer answered with `answer_bytes` bytes."""

    def __init__(self, address: str):
        self.answer_bytes = 0
        self.received = 0
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=8), options=[("grpc.max_send_message_length", -1)]
        )

        def model_infer(_raw: bytes, _context) -> bytes:
            self.received += 1
            return bytes(self.answer_bytes)

        handler = grpc.method_handlers_generic_handler(
            SERVICE, {"ModelInfer": grpc.unary_unary_rpc_method_handler(model_infer)}
        )
        self.server.add_generic_rpc_handlers((handler,))
        assert self.server.add_insecure_port(address)
        self.server.start()


class Front:
    def __init__(self, process: subprocess.Popen, address: str, answerer: Answerer, kind: str):
        self.process, self.address, self.answerer, self.kind = process, address, answerer, kind

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.address.rpartition(":")
        return host, int(port)

    def rss(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def descriptors(self) -> int:
        return len(list(Path(f"/proc/{self.process.pid}/fd").iterdir()))

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks of 10 ms

    def assert_running(self) -> None:
        assert self.process.poll() is None, f"the front exited with {self.process.returncode}"


def start_compiled_front(address: str, upstream: str, folder: Path) -> subprocess.Popen:
    if BINARY is None:
        pytest.skip(NOT_BUILT)
    relayed = ["ModelMetadata", "ServerLive"]  # nothing listens there: they are refused before it matters
    config = configuration(address, upstream, f"unix:{folder}/none", relayed)
    config = config.replace("\nend\n", "".join(f"\nlimit {k} {v}" for k, v in SHORT.items()) + "\nend\n")
    process = subprocess.Popen(
        [str(BINARY)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    process.stdin.write(config + models_block(MODELS))
    return process


def start_python_front(address: str, upstream: str, _folder: Path) -> subprocess.Popen:
    """The edge's Python gRPC front (what serves gRPC where the compiled one is not built), alone."""
    config = {
        "listen": address,
        "upstream": upstream,
        "limits": {f"{key.removesuffix('_ms').upper()}_S": value / 1000 for key, value in SHORT.items()},
        "models": {
            name: {
                "max_batch_size": model.max_batch_size,
                "inputs": {s.name: [s.datatype, list(s.dims)] for s in model.inputs.values()},
                "outputs": sorted(model.outputs),
            }
            for name, model in MODELS.items()
        },
    }
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("python_grpc_front.py"))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
        env=environment,
    )
    process.stdin.write(json.dumps(config) + "\n")
    return process


@pytest.fixture(scope="module", params=["compiled", "python"])
def front(request, tmp_path_factory):
    """Each gRPC front the edge may serve from: the compiled one, and the Python one (where that is not
    built)."""
    folder = tmp_path_factory.mktemp("budgets")
    answerer = Answerer(f"unix:{folder}/grpc")
    address = f"127.0.0.1:{free_port()}"
    start = start_compiled_front if request.param == "compiled" else start_python_front
    process = start(address, f"unix:{folder}/grpc", folder)
    process.stdin.flush()
    assert process.stdout.readline().startswith("listening "), "the front did not start"
    try:
        yield Front(process, address, answerer, request.param)
    finally:
        process.stdin.close()
        assert process.wait(timeout=10) == 0
        answerer.server.stop(None)


def compiled_only(front: Front, why: str) -> None:
    """Skips, saying why, a budget that grpc core gives the Python front no hook for."""
    if front.kind == "python":
        pytest.skip(f"the Python gRPC front has no such budget: {why} (only the compiled front bounds it)")


class Honest:
    """A client calling ModelInfer every 50 ms in a thread; each answer's time and status kept."""

    def __init__(self, front: Front):
        self.front = front
        self.results: list[tuple[float, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with grpc.insecure_channel(self.front.address) as channel:
            call = channel.unary_unary(f"/{SERVICE}/ModelInfer")
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    call(honest_request(), timeout=10)
                    status = "OK"
                except grpc.RpcError as error:
                    status = f"{error.code().name}: {error.details()}"
                self.results.append((time.monotonic() - started, status))
                time.sleep(0.05)

    def __enter__(self) -> Honest:
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop.set()
        self.thread.join(timeout=15)
        failed = [status for _, status in self.results if status != "OK"]
        assert self.results and not failed, failed[:3]
        slowest = max(seconds for seconds, _ in self.results)
        kind = getattr(self.front, "kind", "compiled")  # triton_server: the compiled front
        bound = HONEST_WITHIN_S if kind == "compiled" else PYTHON_FRONT_HONEST_WITHIN_S
        assert slowest < bound, f"an honest call took {slowest:.2f} s ({kind} front)"


# ------------------------------------------------------------------------------------------ raw HTTP/2

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
INITIAL_WINDOW_SIZE = 0x4


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def request_frames(stream: int, message: bytes, method: str = "ModelInfer", end: bool = True) -> bytes:
    block = hpack.Encoder().encode(
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", f"/{SERVICE}/{method}"),
            (":authority", "edge"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
    )
    body = b"\x00" + struct.pack(">I", len(message)) + message
    return frame(HEADERS, END_HEADERS, stream, block) + frame(DATA, END_STREAM if end else 0, stream, body)


def attacker_socket(front: Front) -> socket.socket:
    connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    connection.bind((ATTACKER, 0))
    connection.settimeout(5)
    connection.connect(front.host_port)
    return connection


def read_frames(connection: socket.socket, seen: dict, stop: threading.Event) -> None:
    """Reads and counts frames by type until the connection ends: seen[type] += 1, seen['closed']."""
    buffer = b""
    connection.settimeout(0.5)
    while not stop.is_set():
        try:
            chunk = connection.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            seen["closed"] = seen.get("closed", 0) + 1
            return
        buffer += chunk
        while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
            length, kind = int.from_bytes(buffer[:3], "big"), buffer[3]
            seen[kind] = seen.get(kind, 0) + 1
            buffer = buffer[9 + length :]


# ------------------------------------------------------------------------------------------ the tests


def test_a_hundred_thousand_parameters_are_refused_in_linear_time(front):
    """Observed: 100,000 distinct request parameters kept the front's only thread busy 18.9 s."""
    message = pb.ModelInferRequest.FromString(honest_request())
    for index in range(200_000):
        message.parameters[f"p{index}"].int64_param = index
    raw = message.SerializeToString()
    with Honest(front), grpc.insecure_channel(front.address) as channel:
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary(f"/{SERVICE}/ModelInfer")(raw, timeout=30)
        took = time.monotonic() - started
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == f"the request: at most {limits.MAX_PARAMETERS} parameters"
    assert took < 1.0, f"{len(raw)} bytes of parameters took {took:.2f} s"
    front.assert_running()


def test_zero_window_calls_do_not_hold_the_slots_whatever_pings_arrive(front):
    """Observed: 8 connections of 64 calls with a zero flow-control window, and a PING every 5 s, held all
    512 calls in flight; honest gRPC had 0 of 181 answered for 45 s. Here the answers are 2 MiB each, so the
    byte budgets show too (observed: l2norm's classification=4096 pinned 4.4 MB per 1 KB request)."""
    front.answerer.answer_bytes = 2 << 20
    rss_before = front.rss()
    stop, connections, seen = threading.Event(), [], {}
    readers = []
    try:
        for _ in range(8):
            connection = attacker_socket(front)
            settings = frame(SETTINGS, 0, 0, struct.pack(">HI", INITIAL_WINDOW_SIZE, 0))
            calls = b"".join(request_frames(2 * index + 1, honest_request()) for index in range(64))
            connection.sendall(PREFACE + settings + calls)
            connections.append(connection)
            reader = threading.Thread(target=read_frames, args=(connection, seen, stop), daemon=True)
            reader.start()
            readers.append(reader)
        with Honest(front):
            for _ in range(8):  # 4 s: past the answer timeout (2 s here), pinging all along
                for connection in connections:
                    with contextlib.suppress(OSError):  # ended: idle once its calls were reset
                        connection.sendall(frame(PING, 0, 0, bytes(8)))
                time.sleep(0.5)
            grown = front.rss() - rss_before
    finally:
        stop.set()
        for connection in connections:
            connection.close()
    # Each unread answer ended its stream (RST_STREAM) and freed its slot; the rest were refused at once.
    assert seen.get(RST_STREAM, 0) > 0, seen
    front.assert_running()
    front.answerer.answer_bytes = 0
    # The Python front's answers leave its budget when the handler returns; grpc core then holds an unread one
    # with no hook to end it (SECURITY.md): 317 MiB seen for 128 calls of 2 MiB. Only the compiled front's is
    # bounded by the peer's budget.
    compiled_only(front, "grpc core holds an answer the client does not read, past the handler")
    budget = limits.BUFFER_BYTES_PER_PEER + (16 << 20)
    assert grown < budget, f"the front grew {grown >> 20} MiB for one peer (its budget: {budget >> 20})"


def test_preface_only_connections_are_capped_closed_and_cost_no_spinning(front):
    """Observed: 21,000 connections that sent only the preface were never closed; the front sat at its
    descriptor limit, spinning at 94 % of a core, and new gRPC clients were never answered."""
    descriptors_before = front.descriptors()
    connections = []
    with Honest(front):
        cpu_before = front.cpu_seconds()
        for _ in range(400):
            try:
                connection = attacker_socket(front)
                connection.sendall(PREFACE + frame(SETTINGS, 0, 0))
                connections.append(connection)
            except OSError:
                pass
        time.sleep(0.5)
        held = front.descriptors() - descriptors_before
        if front.kind == "compiled":  # grpc core has no hook at accept: the Python front's are timed only
            assert held <= limits.MAX_CONNECTIONS_PER_PEER + 2, f"{held} connections of one peer held"
        # Past the handshake deadline (1 s here); grpc core's handshake ends with the client's SETTINGS, after
        # which the Python front closes a connection without calls at the idle deadline (3 s here).
        time.sleep(2.0 if front.kind == "compiled" else SHORT["idle_timeout_ms"] / 1000 + 1)
        spent = front.cpu_seconds() - cpu_before
    closed = 0
    for connection in connections:
        connection.settimeout(0.5)
        try:
            closed += connection.recv(65536) == b"" or 0
            closed += connection.recv(65536) == b""  # after the SETTINGS frames, the end
        except (ConnectionResetError, TimeoutError, OSError):
            closed += 1
        connection.close()
    assert closed == len(connections), f"{len(connections) - closed} preface-only connections still open"
    assert front.descriptors() <= descriptors_before + 2
    assert spent < 1.5, f"the front spent {spent:.2f} CPU-s in 2.5 s beside the honest client"
    front.assert_running()


def test_messages_held_open_are_bounded_by_the_byte_budgets(front):
    """Observed: 64 streams x 16 MiB without END_STREAM grew the front by 1 GB in 8 s (the 32 MiB limit is
    per message; nothing bounded the sum). Past the connection's budget a call is refused at once, and the
    memory goes back once the streams end."""
    compiled_only(front, "grpc core receives a whole message before any handler sees it")
    rss_before = front.rss()
    release = threading.Event()
    answers: list[str] = []

    def held_open(message: bytes):
        yield message
        release.wait(20)

    def call(channel) -> None:
        try:
            channel.stream_unary(f"/{SERVICE}/ModelInfer")(held_open(bytes(16 << 20)), timeout=20)
            answers.append("OK")
        except grpc.RpcError as error:
            answers.append(f"{error.code().name}: {error.details()}")

    options = [("grpc.max_send_message_length", -1)]
    with Honest(front), grpc.insecure_channel(f"{front.address}", options=options) as channel:
        threads = [threading.Thread(target=call, args=(channel,)) for _ in range(12)]
        for thread in threads:
            thread.start()
        time.sleep(4)
        grown = front.rss() - rss_before
        release.set()
        for thread in threads:
            thread.join(timeout=30)
    refused = [answer for answer in answers if answer.startswith("RESOURCE_EXHAUSTED")]
    assert refused and all(policy.BUSY_REFUSAL in answer for answer in refused), answers
    budget = limits.GRPC_BUFFER_BYTES_PER_CONNECTION + (24 << 20)
    assert grown < budget, f"the front grew {grown >> 20} MiB for one connection"
    time.sleep(1)
    assert front.rss() - rss_before < 32 << 20, "the memory was kept after the burst"
    front.assert_running()


def raw_call(front: Front, method: str, body: bytes, headers: list[tuple[str, str]]) -> tuple[str, str]:
    """One call in hand-written frames from the attacker's address (`body` within HTTP/2's initial
    windows); its (grpc-status, grpc-message), or ("closed", how)."""
    block = hpack.Encoder().encode(
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", f"/{SERVICE}/{method}"),
            (":authority", "edge"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            *headers,
        ]
    )
    pieces = [body[at : at + 16384] for at in range(0, len(body), 16384)]
    data = b"".join(
        frame(DATA, END_STREAM if index == len(pieces) - 1 else 0, 1, piece)
        for index, piece in enumerate(pieces)
    )
    decoder, buffer, found = hpack.Decoder(), b"", {}
    with attacker_socket(front) as connection:
        connection.settimeout(20)
        connection.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_HEADERS, 1, block) + data)
        while "grpc-status" not in found:
            chunk = connection.recv(65536)
            if not chunk:
                return "closed", "connection closed"
            buffer += chunk
            while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
                length, kind = int.from_bytes(buffer[:3], "big"), buffer[3]
                if kind == HEADERS:
                    found.update(decoder.decode(buffer[9 : 9 + length], raw=False))
                buffer = buffer[9 + length :]
    return found["grpc-status"], urllib.parse.unquote(found.get("grpc-message", ""))


def test_gzip_bombs_are_inflated_off_the_loop_and_never_for_relayed_methods(front):
    """Observed: gzip bombs to ModelInfer and to a relayed method (ModelMetadata) were inflated and parsed
    in the front's loop: honest gRPC p50 ~1 s, and the relayed ones stalled the Python edge. Now ModelInfer's
    are inflated on the inflater's thread (refused past the message limit, or at once when it is busy) and
    the relayed methods' are refused before anything is inflated; the Python front takes none."""
    bomb = gzip.compress(bytes(limits.MAX_GRPC_MESSAGE_BYTES + (8 << 20)))  # about 40 KB
    body = b"\x01" + struct.pack(">I", len(bomb)) + bomb
    answers: list[tuple[str, str, str]] = []

    def send(method: str) -> None:
        answers.append((method, *raw_call(front, method, body, [("grpc-encoding", "gzip")])))

    with Honest(front):
        threads = [
            threading.Thread(target=send, args=("ModelInfer" if index % 4 else "ModelMetadata",))
            for index in range(24)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert len(answers) == 24
    exhausted = str(grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])
    unimplemented = str(grpc.StatusCode.UNIMPLEMENTED.value[0])
    for method, code, details in answers:
        if front.kind == "python":  # no compressed message at all: grpc core would inflate any method's
            assert (code, details) == (unimplemented, "Compression algorithm 'gzip' is disabled."), method
        elif method == "ModelMetadata":
            assert (code, details) == (
                str(grpc.StatusCode.UNIMPLEMENTED.value[0]),
                policy.COMPRESSION_REFUSAL,
            )
        else:
            assert code == exhausted, (code, details)
            assert "larger than max" in details or details == policy.BUSY_REFUSAL, details
    front.assert_running()


# ------------------------------------------------------------------------------------------ the HTTP front


def rss_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class HonestTritonClient(Honest):
    """The same honest client through tritonclient, over HTTP (binary tensors) or gRPC, against the whole
    server: l2norm, or mnist where the attack is allowed work on l2norm itself (a model's queue is first
    come, first served)."""

    def __init__(self, server, protocol: str, model: str = "l2norm"):
        super().__init__(server)
        self.protocol, self.model = protocol, model

    def _run(self) -> None:
        import numpy as np  # noqa: PLC0415
        import tritonclient.grpc as grpcclient  # noqa: PLC0415
        import tritonclient.http as httpclient  # noqa: PLC0415

        if self.protocol == "grpc":
            module, timeout = grpcclient, {"client_timeout": 10}
            client = grpcclient.InferenceServerClient(self.front.grpc_url)
        else:
            module, timeout = httpclient, {}
            client = httpclient.InferenceServerClient(url=self.front.http_url, network_timeout=10)
        if self.model == "mnist":
            tensor = module.InferInput("image", [1, 1, 28, 28], "FP32")
            tensor.set_data_from_numpy(np.zeros((1, 1, 28, 28), dtype=np.float32))
        else:
            tensor = module.InferInput("vector", [1, 2], "FP32")
            tensor.set_data_from_numpy(np.array([[3.0, 4.0]], dtype=np.float32))
        try:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    client.infer(self.model, [tensor], **timeout)
                    status = "OK"
                except Exception as error:  # noqa: BLE001 - kept, and asserted on
                    status = f"{type(error).__name__}: {error}"
                self.results.append((time.monotonic() - started, status))
                time.sleep(0.05)
        finally:
            client.close()


def http_attacker(server, receive_buffer: int | None = None) -> socket.socket:
    """A connection from the attacker's address; `receive_buffer`: its socket's, set before connecting so
    that the TCP window stays that small (a client that does not read then shows a zero window at once)."""
    host, _, port = server.http_url.rpartition(":")
    connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    connection.bind((ATTACKER, 0))
    connection.settimeout(10)
    connection.connect((host, int(port)))
    return connection


def test_http_bodies_past_the_byte_budget_are_refused_at_once_and_memory_returns(triton_server):
    """Observed: 32 then 48 HTTP bodies one byte short of 32 MiB grew the HTTP front by 1.5 GB in seconds,
    kept after the connections closed (MAX_HTTP_CONNECTIONS was only the listen backlog)."""
    edge = triton_server.edge_process.pid
    rss_before = rss_of(edge)
    size = limits.MAX_REQUEST_BYTES - 1
    head = (
        f"POST /v2/models/l2norm/infer HTTP/1.1\r\nHost: edge\r\nContent-Length: {size}\r\n"
        "Inference-Header-Content-Length: 2\r\n\r\n{}"
    ).encode()
    connections, answers = [], []
    with HonestTritonClient(triton_server, "http"):
        for _ in range(48):
            connection = http_attacker(triton_server)
            connection.sendall(head)
            connections.append(connection)
        for connection in connections:  # each body but its last byte, where the front still reads
            connection.settimeout(0.2)
            with contextlib.suppress(OSError):
                connection.sendall(bytes(size - 3))
        time.sleep(1)
        grown = rss_of(edge) - rss_before
        for connection in connections:
            connection.settimeout(2)
            with contextlib.suppress(OSError):
                answers.append(connection.recv(4096))
            connection.close()
    refused = [answer for answer in answers if answer.startswith(b"HTTP/1.1 429")]
    assert len(refused) >= 48 - limits.BUFFER_BYTES_PER_PEER // limits.MAX_REQUEST_BYTES, answers[:3]
    assert all(b"Retry-After: 1" in answer and policy.BUSY_REFUSAL.encode() in answer for answer in refused)
    budget = limits.BUFFER_BYTES_PER_PEER + (64 << 20)
    assert grown < budget, f"the HTTP front grew {grown >> 20} MiB for one peer"
    time.sleep(1)
    kept = rss_of(edge) - rss_before
    assert kept < 48 << 20, f"the HTTP front kept {kept >> 20} MiB after the burst"
    assert triton_server.edge_process.pid == edge and triton_server.is_running()


def classification_request() -> bytes:
    """l2norm asked for 4096 classes of 64 vectors of 4096 values, gzipped: 1.3 KB uploaded, a 4.1 MB
    answer (the issue's table: ~1 KB pinned ~4.4 MB of unsendable answer in the front)."""
    import json  # noqa: PLC0415

    vectors = bytes(struct.pack("<f", 1.0) * (64 * 4096))
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "vector",
                    "datatype": "FP32",
                    "shape": [64, 4096],
                    "parameters": {"binary_data_size": len(vectors)},
                }
            ],
            "outputs": [{"name": "normalized", "parameters": {"classification": 4096}}],
        }
    ).encode()
    body = gzip.compress(header + vectors)
    head = (
        f"POST /v2/models/l2norm/infer HTTP/1.1\r\nHost: edge\r\nContent-Length: {len(body)}\r\n"
        f"Content-Encoding: gzip\r\nInference-Header-Content-Length: {len(header)}\r\n\r\n"
    ).encode()
    return head + body


def unread_outcome(connection: socket.socket) -> str | None:
    """Without reading (a peek; the window stays shut): "refused" (429), "ended" (200, and the server reset
    the connection), or None (no answer yet, or one still held open)."""
    try:
        first = connection.recv(12, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return None
    except ConnectionResetError:
        return "ended"
    if first.startswith(b"HTTP/1.1 429"):
        return "refused"
    if first.startswith(b"HTTP/1.1 200"):
        return "ended" if connection.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) else None
    return f"answered {first!r}"


def test_http_answers_not_read_are_budgeted_and_end_with_their_deadline(triton_server):
    """Observed: a zero window and l2norm's classification=4096 pinned ~4.4 MB of unsendable answer per
    ~1 KB request in the front (+1.2 GB). Answers not yet sent are held in the HTTP front's byte budget:
    past the peer's share a request is refused 429 at once; an answer not read within the answer deadline
    ends its connection and its bytes are given back."""
    edge = triton_server.edge_process.pid
    rss_before = rss_of(edge)
    request = classification_request()
    connections, outcomes, grown = [], {}, 0
    with HonestTritonClient(triton_server, "http", model="mnist"):
        for _ in range(64):  # 64 x 4.1 MB: well past the peer's share, well below its connection cap
            connection = http_attacker(triton_server, receive_buffer=4096)
            connection.sendall(request)
            connections.append(connection)
        # Each answer's deadline runs from when it is made (l2norm makes them one batch after another):
        # every connection must be refused or ended by the answer deadline plus the time to make them all.
        give_up = time.monotonic() + limits.ANSWER_TIMEOUT_S + 30
        while len(outcomes) < len(connections) and time.monotonic() < give_up:
            time.sleep(0.5)
            grown = max(grown, rss_of(edge) - rss_before)
            for index, connection in enumerate(connections):
                if index not in outcomes and (outcome := unread_outcome(connection)) is not None:
                    outcomes[index] = outcome
    for connection in connections:
        connection.close()
    seen = sorted(outcomes.values())
    assert "refused" in seen and "ended" in seen, seen
    assert seen.count("refused") + seen.count("ended") == len(connections), (
        f"{len(connections) - len(outcomes)} unread answers still held open; seen: {set(seen)}"
    )
    budget = limits.BUFFER_BYTES_PER_PEER + (48 << 20)
    assert grown < budget, f"the HTTP front grew {grown >> 20} MiB for one peer's unread answers"
    time.sleep(1)
    kept = rss_of(edge) - rss_before
    assert kept < 48 << 20, f"the HTTP front kept {kept >> 20} MiB after the unread answers ended"
    assert triton_server.edge_process.pid == edge and triton_server.is_running()


def test_http_connections_past_the_peer_cap_are_reset_at_accept(triton_server):
    """The connection caps are counted at accept (not the listen backlog): one peer's connections past
    limits.MAX_CONNECTIONS_PER_PEER are reset at once, whatever they would send."""
    edge = triton_server.edge_process.pid
    connections, reset = [], 0
    with HonestTritonClient(triton_server, "http"):
        for _ in range(limits.MAX_CONNECTIONS_PER_PEER + 72):
            try:
                connections.append(http_attacker(triton_server))
            except ConnectionResetError:  # reset before connect() returned
                reset += 1
        time.sleep(0.5)
        for connection in connections:
            connection.settimeout(0.05)
            try:
                reset += connection.recv(1) == b""
            except ConnectionResetError:
                reset += 1
            except TimeoutError:
                pass
        for connection in connections:
            connection.close()
    assert reset == 72, f"{reset} of {len(connections)} connections were reset"
    assert triton_server.edge_process.pid == edge and triton_server.is_running()


# ------------------------------------------------------------------------------------------ tritonserver


def anonymous_rss(pid: int) -> int:
    """A process's private memory (RssAnon): the Python backend's shared regions, fixed in size
    (serving/shm_budget.py), are not in it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon")


def send_refused_near_limit(url: str, protocol: str, clients: int, each: int) -> list[str]:
    """`clients` threads each sending `each` l2norm requests of 64 vectors just under 32 MiB in all, longer
    than the model accepts (it refuses them itself); the answers' words."""
    import numpy as np  # noqa: PLC0415
    import tritonclient.grpc as grpcclient  # noqa: PLC0415
    import tritonclient.http as httpclient  # noqa: PLC0415

    library = grpcclient if protocol == "grpc" else httpclient
    vectors = np.ones((64, (limits.MAX_REQUEST_BYTES - 4096) // (64 * 4)), dtype=np.float32)
    answers: list[str] = []

    def client() -> None:
        connection = library.InferenceServerClient(url)
        for _ in range(each):
            tensor = library.InferInput("vector", list(vectors.shape), "FP32")
            tensor.set_data_from_numpy(vectors)
            try:
                connection.infer("l2norm", [tensor])
                answers.append("answered")
            except Exception as error:  # noqa: BLE001 - the words are asserted on
                answers.append(str(error))
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return answers


def test_tritonserver_keeps_no_memory_after_refused_requests_near_the_limit(tmp_path):
    """Observed: l2norm requests just under 32 MiB, refused by the model, left tritonserver ~1 GB larger for
    good. Its gRPC side kept up to 8 inference states for reuse, each holding the largest request it had
    parsed (192-250 MB after 64 such requests); the server now runs with none kept. A server of its own: the
    session's has met large requests before."""
    from trt_plugin_kit.serving.host import Ports  # noqa: PLC0415
    from trt_plugin_kit.serving.server import TritonServer  # noqa: PLC0415

    server = TritonServer(
        variant="cpu", ports=Ports.free(), models=("l2norm",), exit_timeout_s=3, log_file=tmp_path / "log"
    )
    with server:
        triton = server.process.pid
        before = anonymous_rss(triton)
        grpc_url, http_url = server.grpc_url, server.http_url
        answers = []
        for _ in range(2):  # the second round must find the memory of the first given back, or reused
            answers += send_refused_near_limit(grpc_url, "grpc", clients=8, each=3)
            answers += send_refused_near_limit(http_url, "http", clients=8, each=2)
        grown = anonymous_rss(triton) - before
        assert server.is_running()
    refused_by_the_model = [answer for answer in answers if "this server accepts at most 4096" in answer]
    assert len(refused_by_the_model) >= 16, sorted(set(answers))
    assert all(
        "this server accepts at most 4096" in answer or policy.BUSY_REFUSAL in answer for answer in answers
    ), sorted(set(answers))
    # The states' pool alone kept 242-253 MiB here; what is left, glibc's arena fragments of gRPC's read
    # buffers, measured 21-29 MiB on a quiet machine and up to 112 MiB at a load average of 10.
    assert grown < 160 << 20, f"tritonserver kept {grown >> 20} MiB after {len(answers)} refused requests"


# ------------------------------------------------------------------------------------------ health


def big_progressive_jpeg() -> bytes:
    """A 2000 x 1500 progressive JPEG (a smooth picture, about 100 KB): decoding 64 of them keeps
    mnist_preprocess busy for seconds (the issue's flood: 64 large progressive JPEGs per request)."""
    import io  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415

    ramp = np.add.outer(np.arange(1500), np.arange(2000)) % 256
    buffer = io.BytesIO()
    Image.fromarray(ramp.astype(np.uint8)).save(buffer, "JPEG", progressive=True, quality=90)
    return buffer.getvalue()


def pipeline_flood_request() -> tuple[bytes, dict]:
    """One mnist_pipeline request of 64 large progressive JPEGs (12.9 MB, within every limit), in
    tritonclient's binary form: its body and headers."""
    import numpy as np  # noqa: PLC0415
    import tritonclient.http as httpclient  # noqa: PLC0415

    tensor = httpclient.InferInput("image_bytes", [64, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([big_progressive_jpeg()] * 64, dtype=np.object_).reshape(64, 1))
    body, json_size = httpclient.InferenceServerClient.generate_request_body([tensor])
    headers = {"Inference-Header-Content-Length": str(json_size), "Content-Type": "application/octet-stream"}
    return body, headers


def test_a_pipeline_flood_does_not_slow_the_direct_models(triton_server):
    """Observed: 16 allowed mnist_pipeline requests of 64 large progressive JPEGs made every model wait. Sent
    from two peers (each within its byte budget), one request per connection at once, while honest clients
    call mnist and l2norm over both protocols: every honest call answered within 2 s, every flood request
    answered too (allowed work is done, not refused). Measured here: the slowest honest call 1.07 s over
    HTTP (the edge receiving 206 MB of bodies at once), 0.04 s over gRPC, with the flood's 15-30 s each."""
    import http.client  # noqa: PLC0415

    body, headers = pipeline_flood_request()
    host, _, port = triton_server.http_url.rpartition(":")
    statuses: list[int | str] = []

    def flood(peer: str) -> None:
        connection = http.client.HTTPConnection(host, int(port), timeout=120, source_address=(peer, 0))
        try:
            connection.request("POST", "/v2/models/mnist_pipeline/infer", body, headers)
            statuses.append(connection.getresponse().status)
        except OSError as error:
            statuses.append(f"{type(error).__name__}: {error}")
        finally:
            connection.close()

    honest = [
        HonestTritonClient(triton_server, "http", model="mnist"),
        HonestTritonClient(triton_server, "http", model="l2norm"),
        HonestTritonClient(triton_server, "grpc", "mnist"),
        HonestTritonClient(triton_server, "grpc", "l2norm"),
    ]
    with contextlib.ExitStack() as stack:
        for client in honest:
            stack.enter_context(client)
        floods = [threading.Thread(target=flood, args=(f"127.0.0.{2 + index % 2}",)) for index in range(16)]
        for thread in floods:
            thread.start()
        for thread in floods:
            thread.join(timeout=150)
    assert statuses == [200] * 16, statuses
    assert triton_server.is_running()


def test_a_slow_model_is_reported_slow_not_down(triton_server, monkeypatch):
    """Observed: 16 allowed mnist_pipeline requests of 64 large JPEGs made the edge's probes wait in the
    same queue and time out, and the watchdog restarted tritonserver: every model down ~6 s. A probe that
    times out while the model completes requests is a slow model: reported, never a restart. (A model that
    completes nothing, a hung stub, is still found down: test_serving_hardening.py's hung-stub test.)"""
    import asyncio  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415
    import tritonclient.http as httpclient  # noqa: PLC0415

    from trt_plugin_kit.serving.edge.upstream import Upstream  # noqa: PLC0415

    # Behind 64 large JPEGs: far too short. A probe can still slip in between batches (then the decision is
    # "up"); the judge asks again until one waits behind them (40 decisions at most).
    monkeypatch.setattr(limits, "HEALTH_PROBE_TIMEOUT_S", 0.02)
    monkeypatch.setattr(limits, "HEALTH_PERIOD_S", 1.0)
    # A decision spans HEALTH_FAILURES periods: 8 s, long enough for one of 3 floods of 64 JPEGs to complete
    # on a loaded 2-core CI machine (3 s was not, at c505c83: "did not answer", no completion seen).
    monkeypatch.setattr(limits, "HEALTH_FAILURES", 8)
    images = np.array([big_progressive_jpeg()] * 64, dtype=np.object_)
    stop = threading.Event()

    flood_errors: list[str] = []

    def flood() -> None:
        client = httpclient.InferenceServerClient(url=triton_server.http_url, network_timeout=120)
        tensor = httpclient.InferInput("image_bytes", [64, 1], "BYTES")
        tensor.set_data_from_numpy(images.reshape(64, 1))
        while not stop.is_set():
            try:
                client.infer("mnist_pipeline", [tensor])
            except Exception as error:  # noqa: BLE001 - reported below if the model was never found slow
                flood_errors.append(str(error)[:200])
                time.sleep(0.1)
        client.close()

    async def judge() -> tuple[list[str], dict]:
        upstream = Upstream(triton_server.socket_dir, triton_server._internal_key)
        down: list[str] = []
        upstream.on_model_down = lambda model, reason: down.append(f"{model}: {reason}")
        await upstream.open()
        try:
            await upstream.load_models(10)
            for _ in range(40):
                await upstream._probe_until_decided("mnist_pipeline")
                if "mnist_pipeline" in upstream.slow:
                    break
            return down, dict(upstream.slow)
        finally:
            await upstream.close()

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(2)
        down, slow = asyncio.run(judge())
    finally:
        stop.set()
        for thread in threads:
            thread.join(120)
    assert not down, down
    assert "completed" in slow.get("mnist_pipeline", ""), (slow, len(flood_errors), flood_errors[:3])
    assert triton_server.is_running()
