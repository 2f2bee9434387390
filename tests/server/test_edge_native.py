"""The edge's compiled gRPC front (trt_plugin_kit/serving/edge/native/): the Python front's verdicts,
started and supervised by the edge, and the Python front where it is not built.

The verdict test runs the binary alone: its upstream is a recorder standing where tritonserver's socket is
(a real gRPC server that keeps the bytes it receives), so that what the binary forwards can be compared with
what grpc_front.encode_model_infer makes of the same request. The attack tests of test_edge_attacks.py run
against it through the whole server (the edge starts it whenever it is built).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from tritonclient.grpc import service_pb2 as pb

from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.serving.edge import limits, policy
from trt_plugin_kit.serving.edge.contract import INTERNAL_KEY_ENV, NATIVE_GRPC_ENV
from trt_plugin_kit.serving.edge.grpc_front import SERVICE, encode_model_infer, parse_model_infer
from trt_plugin_kit.serving.edge.native_front import (
    BINARY_NAME,
    configuration,
    models_block,
    native_binary,
)
from trt_plugin_kit.serving.edge.tensors import ModelInterface, Refused, check_request
from trt_plugin_kit.serving.host import free_port
from trt_plugin_kit.tritonserver.protocol import TensorSpec

BINARY = native_binary()
needs_binary = pytest.mark.skipif(
    BINARY is None,
    reason=f"{BINARY_NAME} is not built (make edge-native; needs libnghttp2-dev, libssl-dev and zlib1g-dev, "
    "which CI installs)",
)

MODELS = {
    "l2norm": ModelInterface(
        "l2norm", 64, {"vector": TensorSpec("vector", "FP32", (-1,))}, frozenset({"normalized"})
    ),
    "pipe": ModelInterface(
        "pipe", 8, {"image_bytes": TensorSpec("image_bytes", "BYTES", (1,))}, frozenset({"p"})
    ),
    "pair": ModelInterface(
        "pair",
        0,
        {"a": TensorSpec("a", "INT8", (2,)), "b": TensorSpec("b", "UINT16", (2, -1))},
        frozenset({"y", "z"}),
        frozenset({"1", "3"}),
    ),
}


def infer(model="l2norm", inputs=(), raw=(), outputs=(), **fields) -> pb.ModelInferRequest:
    message = pb.ModelInferRequest(model_name=model, **fields)
    for entry in inputs:
        message.inputs.add().CopyFrom(entry)
    message.raw_input_contents.extend(raw)
    for name in outputs:
        message.outputs.add(name=name)
    return message


def tensor(name="vector", datatype="FP32", shape=(1, 2), **fields) -> pb.ModelInferRequest.InferInputTensor:
    return pb.ModelInferRequest.InferInputTensor(name=name, datatype=datatype, shape=list(shape), **fields)


def with_parameter(message, target, key, **value):
    target.parameters[key].CopyFrom(pb.InferParameter(**value))
    return message


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _cases() -> dict[str, bytes]:
    good = infer(inputs=[tensor()], raw=[bytes(8)], outputs=["normalized"])
    cases = {
        "good": good,
        "good with id and version": infer(inputs=[tensor()], raw=[bytes(8)], id="r-1", model_version="1"),
        "unknown model": infer("nope", [tensor()], [bytes(8)]),
        "model name not a name": infer("../x", [tensor()], [bytes(8)]),
        "bad version": infer(inputs=[tensor()], raw=[bytes(8)], model_version="1a"),
        "missing version": infer(inputs=[tensor()], raw=[bytes(8)], model_version="2"),
        "id too long": infer(inputs=[tensor()], raw=[bytes(8)], id="x" * 257),
        "no inputs": infer(),
        "17 inputs": infer(inputs=[tensor()] * 17),
        "raw count": infer(inputs=[tensor()], raw=[bytes(8), bytes(8)]),
        "input name": infer(inputs=[tensor(name="a b")], raw=[bytes(8)]),
        "datatype": infer(inputs=[tensor(datatype="FP99")], raw=[bytes(8)]),
        "wrong datatype": infer(inputs=[tensor(datatype="FP16")], raw=[bytes(4)]),
        "wrong input": infer(inputs=[tensor(name="other")], raw=[bytes(8)]),
        "shape 2^62": infer(inputs=[tensor(shape=(1, 2**62))]),
        "negative dim": infer(inputs=[tensor(shape=(1, -1))], raw=[bytes(8)]),
        "9 dims": infer(inputs=[tensor(shape=[1] * 9)], raw=[bytes(4)]),
        "no batch": infer(inputs=[tensor(shape=(2,))], raw=[bytes(8)]),
        "batch 0": infer(inputs=[tensor(shape=(0, 2))], raw=[b""]),
        "batch 65": infer(inputs=[tensor(shape=(65, 1))], raw=[bytes(65 * 4)]),
        "too large": infer(inputs=[tensor(shape=(64, 2**24))]),
        "raw short": infer(inputs=[tensor()], raw=[bytes(7)]),
        "no data": infer(inputs=[tensor()]),
        "typed contents": infer(inputs=[tensor(contents=pb.InferTensorContents(fp32_contents=[3, 4]))]),
        "typed contents, wrong field": infer(
            inputs=[tensor(contents=pb.InferTensorContents(int_contents=[3, 4]))]
        ),
        "contents and raw": infer(
            inputs=[tensor(contents=pb.InferTensorContents(fp32_contents=[3, 4]))], raw=[bytes(8)]
        ),
        "unknown output": infer(inputs=[tensor()], raw=[bytes(8)], outputs=["secret"]),
        "17 outputs": infer(inputs=[tensor()], raw=[bytes(8)], outputs=["normalized"] * 17),
        "bytes good": infer(
            "pipe", [tensor("image_bytes", "BYTES", (2, 1))], [b"\x01\0\0\0a\x00\0\0\0"], outputs=["p"]
        ),
        "bytes count": infer("pipe", [tensor("image_bytes", "BYTES", (2, 1))], [b"\x01\0\0\0a"]),
        "bytes past end": infer("pipe", [tensor("image_bytes", "BYTES", (1, 1))], [b"\x09\0\0\0a"]),
        "bytes cut length": infer("pipe", [tensor("image_bytes", "BYTES", (1, 1))], [b"\x01\0\0\0a\0"]),
        "bytes contents": infer(
            "pipe",
            [
                tensor(
                    "image_bytes",
                    "BYTES",
                    (2, 1),
                    contents=pb.InferTensorContents(bytes_contents=[b"x", b""]),
                )
            ],
        ),
        "two typed inputs": infer(
            "pair",
            [
                tensor(
                    "b",
                    "UINT16",
                    (2, 3),
                    contents=pb.InferTensorContents(uint_contents=[1, 2, 3, 4, 5, 65535]),
                ),
                tensor("a", "INT8", (2,), contents=pb.InferTensorContents(int_contents=[-128, 127])),
            ],
            outputs=["z", "y"],
            model_version="3",
        ),
        "int8 overflow": infer(
            "pair",
            [
                tensor("a", "INT8", (2,), contents=pb.InferTensorContents(int_contents=[1, 300])),
                tensor("b", "UINT16", (2, 1), contents=pb.InferTensorContents(uint_contents=[1, 2])),
            ],
        ),
        "batch dims differ": infer(
            "pair", [tensor("a", "INT8", (3,)), tensor("b", "UINT16", (2, 1))], [bytes(3), bytes(4)]
        ),
        "mixed shm and data": None,
        "malformed": b"\x0a\xff",
        "truncated varint": b"\x2a\x80",
        "not utf-8": b"\x0a\x02\xff\xfe",
        "unknown fields dropped": good.SerializeToString() + b"\xf8\x07\x01" + b"\x82\x08\x01x",
    }
    shm = infer(
        "pair",
        [tensor("a", "INT8", (2,)), tensor("b", "UINT16", (2, 1))],
    )
    shm.inputs[0].parameters["shared_memory_region"].string_param = "r1"
    shm.inputs[0].parameters["shared_memory_byte_size"].int64_param = 2
    shm.inputs[1].parameters["shared_memory_region"].string_param = "r2"
    shm.inputs[1].parameters["shared_memory_byte_size"].int64_param = 4
    cases["shm inputs"] = shm
    mixed = pb.ModelInferRequest()
    mixed.CopyFrom(shm)
    del mixed.inputs[1].parameters["shared_memory_region"]
    mixed.inputs[1].contents.uint_contents.extend([1, 2])
    cases["mixed shm and data"] = mixed
    params = infer(inputs=[tensor()], raw=[bytes(8)], outputs=["normalized"])
    params.parameters["binary_data_output"].bool_param = True
    params.outputs[0].parameters["binary_data"].bool_param = True
    params.outputs[0].parameters["classification"].int64_param = 3
    cases["allowed parameters"] = params
    return {name: m if isinstance(m, bytes) else m.SerializeToString() for name, m in cases.items()}


def _parameter_cases() -> dict[str, bytes]:
    cases = {}
    for name, (key, value) in {
        "parameter not allowed": ("priority", pb.InferParameter(int64_param=1)),
        "parameter wrong type": ("binary_data_output", pb.InferParameter(int64_param=1)),
        "parameter double": ("binary_data_output", pb.InferParameter(double_param=0.5)),
        "parameter unset": ("binary_data_output", pb.InferParameter()),
    }.items():
        message = infer(inputs=[tensor()], raw=[bytes(8)])
        message.parameters[key].CopyFrom(value)
        cases[name] = message
    many = infer(inputs=[tensor()], raw=[bytes(8)])
    for index in range(9):
        many.parameters[f"p{index}"].bool_param = True
    cases["9 parameters"] = many
    big_int = infer(inputs=[tensor()], raw=[bytes(8)], outputs=["normalized"])
    big_int.outputs[0].parameters["classification"].uint64_param = 2**64 - 1
    cases["uint64 parameter"] = big_int
    bad_region = infer("pair", [tensor("a", "INT8", (2,)), tensor("b", "UINT16", (2, 1))])
    bad_region.inputs[0].parameters["shared_memory_region"].string_param = "../x"
    cases["region not a name"] = bad_region
    return {name: m.SerializeToString() for name, m in cases.items()}


def _wire_cases() -> dict[str, bytes]:
    """The protobuf wire format's corners, where a hand parser and protobuf's can differ."""
    good = infer(inputs=[tensor()], raw=[bytes(8)], outputs=["normalized"])
    cases = {
        # Groups (wire types 3 and 4): unknown fields protobuf still skips, nested up to its depth limit.
        "unknown group dropped": good.SerializeToString() + b"\x83\x01\x08\x01\x84\x01",
        "groups 100 deep": good.SerializeToString() + b"\x83\x01" * 100 + b"\x84\x01" * 100,
        "groups 101 deep": good.SerializeToString() + b"\x83\x01" * 101 + b"\x84\x01" * 101,
        "group ends another": good.SerializeToString() + b"\x83\x01\x8c\x01",
        "group end alone": good.SerializeToString() + b"\x84\x01",
        "group never ends": good.SerializeToString() + b"\x83\x01",
        "field 0": good.SerializeToString() + b"\x02\x00",
    }
    # Found by the random differential test (each was a verdict the two rules gave differently):
    entry = b"\x0a\x12binary_data_output\x32\x01x"  # a map entry with an unknown field: not in the map
    cases["parameter entry with another field"] = (
        infer(inputs=[tensor()], raw=[bytes(8)]).SerializeToString() + b"\x22" + _varint(len(entry)) + entry
    )
    for value in (3.729e-155, 0.1, 1e16, 2.0, -1.5e-5):  # printed as Python's repr() prints them
        message = infer(inputs=[tensor()], raw=[bytes(8)])
        message.parameters["binary_data_output"].double_param = value
        cases[f"double parameter {value!r}"] = message
    broken = b"\x2a\x12\x0a\x01p\x12\x04FP99\x2a\x07\x0a\x15\x01\x00\x00\x00\x01"  # its contents cut
    cases["contents framing broken, datatype unknown"] = broken
    for depth in (98, 99, 100):  # within an input (depth 1) and its parameter's value (depth 3)
        deep = infer(inputs=[tensor()], raw=[bytes(8)])
        entry = tensor().SerializeToString() + b"\x83\x01" * depth + b"\x84\x01" * depth
        cases[f"groups {depth} deep in an input"] = (
            infer(raw=[bytes(8)]).SerializeToString() + b"\x2a" + _varint(len(entry)) + entry
        )
        value = b"\x08\x01" + b"\x83\x01" * (depth - 2) + b"\x84\x01" * (depth - 2)
        pair = b"\x0a\x01k\x12" + _varint(len(value)) + value
        cases[f"groups {depth - 2} deep in a parameter"] = (
            deep.SerializeToString() + b"\x22" + _varint(len(pair)) + pair
        )
    return {name: m if isinstance(m, bytes) else m.SerializeToString() for name, m in cases.items()}


CASES = _cases() | _parameter_cases() | _wire_cases()


def python_verdict(raw: bytes):
    """What the Python front answers: (code name, details), or ("OK", the message it forwards)."""
    try:
        request = check_request(parse_model_infer(pb.ModelInferRequest.FromString(raw)), MODELS)
        return "OK", pb.ModelInferRequest.FromString(encode_model_infer(request))
    except Refused as refusal:
        return refusal.grpc_code, str(refusal)
    except Exception as error:  # noqa: BLE001 - as GrpcFront.model_infer words it
        return "INVALID_ARGUMENT", f"malformed request ({type(error).__name__})"


class Recorder:
    """Stands where tritonserver's gRPC socket is and keeps each ModelInfer it gets."""

    def __init__(self, address: str):
        self.received: list[bytes] = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))

        def model_infer(raw: bytes, _context) -> bytes:
            self.received.append(raw)
            return b""

        handler = grpc.method_handlers_generic_handler(
            SERVICE, {"ModelInfer": grpc.unary_unary_rpc_method_handler(model_infer)}
        )
        self.server.add_generic_rpc_handlers((handler,))
        assert self.server.add_insecure_port(address)
        self.server.start()


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    """The binary alone, on a free port, its upstream the recorder; (address, recorder)."""
    folder = tmp_path_factory.mktemp("native")
    recorder = Recorder(f"unix:{folder}/grpc")
    address = f"127.0.0.1:{free_port()}"
    process = subprocess.Popen(
        [str(BINARY)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    process.stdin.write(configuration(address, f"unix:{folder}/grpc", f"unix:{folder}/none", ["ServerLive"]))
    process.stdin.write(models_block(MODELS))
    process.stdin.flush()
    assert process.stdout.readline().startswith("listening "), "the binary did not start"
    try:
        yield address, recorder
    finally:
        process.stdin.close()
        assert process.wait(timeout=10) == 0
        recorder.server.stop(None)


@needs_binary
@pytest.mark.parametrize("case", list(CASES))
def test_the_native_front_answers_as_the_python_front(native, case):
    address, recorder = native
    raw = CASES[case]
    expected = python_verdict(raw)
    recorder.received.clear()
    with grpc.insecure_channel(address) as channel:
        try:
            channel.unary_unary(f"/{SERVICE}/ModelInfer")(raw, timeout=10)
            answer = ("OK",)
        except grpc.RpcError as error:
            answer = (error.code().name, error.details())
    if expected[0] != "OK":
        assert answer == expected, case
        assert recorder.received == []
        return
    assert answer == ("OK",), (case, answer)
    (forwarded,) = recorder.received
    assert pb.ModelInferRequest.FromString(forwarded) == expected[1], case


@needs_binary
def test_methods_outside_the_list_are_unimplemented_and_relayed_ones_need_the_relay(native):
    address, _ = native
    with grpc.insecure_channel(address) as channel:
        for method in ("RepositoryIndex", "../ModelInfer", "Nope"):
            with pytest.raises(grpc.RpcError) as caught:
                channel.unary_unary(f"/{SERVICE}/{method}")(b"", timeout=10)
            assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED, method
        with pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary("/other.Service/ModelInfer")(b"", timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
        with pytest.raises(grpc.RpcError) as caught:  # listed, but nothing listens where it relays to
            channel.unary_unary(f"/{SERVICE}/ServerLive")(b"", timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


@needs_binary
def test_a_message_over_the_limit_is_refused_by_its_length(native):
    address, recorder = native
    message = infer(inputs=[tensor(shape=(1, 4))]).SerializeToString()
    message += b"\x3a" + _varint(limits.MAX_GRPC_MESSAGE_BYTES) + bytes(limits.MAX_GRPC_MESSAGE_BYTES)
    with grpc.insecure_channel(address) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary(f"/{SERVICE}/ModelInfer")(message, timeout=30)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in caught.value.details()


# ---------------------------------------------------------------------------------- the edge around it


def start_edge(tmp_path: Path, binary: str):
    """The edge process with no tritonserver behind it (its readiness wait runs on while the test does)."""
    ports = [free_port() for _ in range(3)]
    env = dict(os.environ, **{INTERNAL_KEY_ENV: "k" * 32, NATIVE_GRPC_ENV: binary})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    socket_dir = tmp_path / "sockets"
    socket_dir.mkdir(mode=0o700)
    log = (tmp_path / "edge.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trt_plugin_kit.serving.edge",
            f"--http=127.0.0.1:{ports[0]}",
            f"--grpc=127.0.0.1:{ports[1]}",
            f"--metrics=127.0.0.1:{ports[2]}",
            f"--socket-dir={socket_dir}",
            "--ready-timeout=120",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return process, f"127.0.0.1:{ports[1]}", tmp_path / "edge.log"


def server_ready(address: str, timeout_s: float = 60.0) -> pb.ServerReadyResponse:
    """ServerReady through the edge's gRPC port, retried until it answers (the edge is starting)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with grpc.insecure_channel(address) as channel:
                raw = channel.unary_unary(f"/{SERVICE}/ServerReady")(b"", timeout=5)
            return pb.ServerReadyResponse.FromString(raw)
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def gone(pid: int, timeout_s: float = 10.0) -> bool:
    """Whether `pid` ends (or is a zombie) within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


def end(process) -> None:
    """The edge ends (killed: it waits for tritonserver, which never comes, before it takes SIGTERM)."""
    process.kill()
    process.wait(timeout=15)


def test_without_the_binary_the_python_front_serves_grpc_and_says_so(tmp_path):
    process, address, log = start_edge(tmp_path, str(tmp_path / "not-built"))
    try:
        assert server_ready(address).ready is False  # tritonserver is not there: answered, not ready
        assert "the native gRPC front is not built" in log.read_text()
        assert children(process.pid) == []
    finally:
        end(process)


@needs_binary
def test_the_edge_starts_the_binary_again_when_it_dies(tmp_path):
    process, address, log = start_edge(tmp_path, str(BINARY))
    try:
        assert server_ready(address).ready is False  # the binary relays ServerReady to the Python front
        (first,) = children(process.pid)
        assert Path(f"/proc/{first}/exe").resolve() == BINARY.resolve()
        os.kill(first, 9)
        assert server_ready(address).ready is False
        (second,) = children(process.pid)
        assert second != first and Path(f"/proc/{second}/exe").resolve() == BINARY.resolve()
        assert "the native gRPC front exited" in log.read_text()
        assert process.poll() is None
    finally:
        end(process)
    assert gone(second), "the binary outlived the edge (its stdin closed when the edge died)"


@needs_binary
def test_the_session_server_serves_grpc_from_the_binary(triton_server):
    (child,) = children(triton_server.edge_process.pid)
    assert Path(f"/proc/{child}/exe").resolve() == BINARY.resolve()
    message = infer("l2norm", [tensor(shape=(1, 2))], [bytes(8)]).SerializeToString()
    with grpc.insecure_channel(triton_server.grpc_url) as channel:
        raw = channel.unary_unary(f"/{SERVICE}/ModelInfer")(message, timeout=30)
    assert pb.ModelInferResponse.FromString(raw).outputs[0].name == "normalized"


VALID = next(raw for raw in CASES.values() if python_verdict(raw)[0] == "OK")


@needs_binary
def test_compressed_messages_are_inflated_within_the_limit(native):
    """gRPC message compression (gzip, deflate) is inflated at the edge and forwarded as the same request;
    a bomb (40 MiB of zeros in about 40 KB) is refused while it inflates, before anything is forwarded."""
    address, recorder = native
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(f"/{SERVICE}/ModelInfer")
        for algorithm in (grpc.Compression.Gzip, grpc.Compression.Deflate):
            recorder.received.clear()
            call(VALID, timeout=10, compression=algorithm)
            (forwarded,) = recorder.received
            assert pb.ModelInferRequest.FromString(forwarded) == python_verdict(VALID)[1], algorithm
        recorder.received.clear()
        bomb = infer(inputs=[tensor(shape=(1, 4))]).SerializeToString()
        bomb += b"\x3a" + _varint(40 << 20) + bytes(40 << 20)
        with pytest.raises(grpc.RpcError) as caught:
            call(bomb, timeout=30, compression=grpc.Compression.Gzip)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in caught.value.details()
    assert recorder.received == []


# ------------------------------------------------------------------------- random messages, both rules

_NAMES = ["l2norm", "pipe", "pair", "nope", "a b", "", "vector", "image_bytes", "a", "b", "p", "y", "z"]
_DATATYPES = ["FP32", "BYTES", "INT8", "UINT16", "FP16", "INT64", "BOOL", "FP99", ""]
_PARAMETER_KEYS = [
    "binary_data_output",
    "binary_data",
    "classification",
    "shared_memory_region",
    "shared_memory_byte_size",
    "priority",
    "p0",
    "",
]
_CONTENT_FIELDS = {
    "fp32_contents": lambda r: [r.uniform(-1e3, 1e3) for _ in range(r.randint(0, 6))],
    "int_contents": lambda r: [r.randint(-300, 300) for _ in range(r.randint(0, 6))],
    "uint_contents": lambda r: [r.randint(0, 70000) for _ in range(r.randint(0, 6))],
    "int64_contents": lambda r: [r.randint(-(2**40), 2**40) for _ in range(r.randint(0, 6))],
    "bool_contents": lambda r: [r.random() < 0.5 for _ in range(r.randint(0, 6))],
    "bytes_contents": lambda r: [r.randbytes(r.randint(0, 5)) for _ in range(r.randint(0, 4))],
}


def _random_parameters(r, target) -> None:
    for _ in range(r.choice([0, 0, 1, 2, 9])):
        key = r.choice(_PARAMETER_KEYS) if r.random() < 0.9 else f"k{r.randint(0, 99)}"
        kind = r.choice(["bool_param", "int64_param", "string_param", "double_param", "uint64_param"])
        value = {
            "bool_param": r.random() < 0.5,
            "int64_param": r.choice([0, 3, -1, 2**40]),
            "string_param": r.choice(["r1", "../x", "", "ünï"]),
            "double_param": 0.5,
            "uint64_param": r.choice([1, 2**64 - 1]),
        }[kind]
        setattr(target[key], kind, value)


def random_model_infer(r) -> bytes:
    """A ModelInferRequest drawn from the names, datatypes, shapes and sizes both rules judge."""
    message = pb.ModelInferRequest(model_name=r.choice(_NAMES[:6]))
    message.model_version = r.choice(["", "", "1", "3", "x"])
    message.id = r.choice(["", "r-1", "x" * 257])
    _random_parameters(r, message.parameters)
    use_raw = r.random() < 0.6
    for _ in range(r.choice([0, 1, 1, 1, 2, 3])):
        entry = message.inputs.add(name=r.choice(_NAMES), datatype=r.choice(_DATATYPES))
        entry.shape.extend(r.choice([0, 1, 2, 4, 5, 64, 65, 2**24, 2**25]) for _ in range(r.randint(0, 3)))
        if r.random() < 0.2:
            _random_parameters(r, entry.parameters)
        if use_raw:
            message.raw_input_contents.append(bytes(r.choice([0, 1, 2, 4, 8, 16])))
        elif r.random() < 0.7:
            field = r.choice(list(_CONTENT_FIELDS))
            getattr(entry.contents, field).extend(_CONTENT_FIELDS[field](r))
    for _ in range(r.choice([0, 0, 1, 2])):
        output = message.outputs.add(name=r.choice(_NAMES))
        if r.random() < 0.2:
            _random_parameters(r, output.parameters)
    raw = bytearray(message.SerializeToString())
    if raw and r.random() < 0.3:  # a byte changed, or the message cut, or bytes inserted
        at = r.randrange(len(raw))
        mutation = r.choice(["flip", "cut", "insert"])
        if mutation == "flip":
            raw[at] ^= 1 << r.randrange(8)
        elif mutation == "cut":
            del raw[at:]
        else:
            raw[at:at] = r.randbytes(r.randint(1, 4))
    return bytes(raw)


@needs_binary
def test_random_messages_get_the_same_verdict_from_both_rules(native):
    """The differential test (issue 39, item 6): 400 random ModelInfer messages, seeded, a third of them
    mutated at the byte level, to the Python rules and the compiled front: the same verdict and message, and
    for the accepted ones the same request. $DIFF_SEED and $DIFF_COUNT run others (24,000 more agreed)."""
    import random  # noqa: PLC0415

    address, recorder = native
    r = random.Random(int(os.environ.get("DIFF_SEED", "39")))
    differ = []
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(f"/{SERVICE}/ModelInfer")
        for index in range(int(os.environ.get("DIFF_COUNT", "400"))):
            raw = random_model_infer(r)
            expected = python_verdict(raw)
            recorder.received.clear()
            try:
                call(raw, timeout=10)
                answer = ("OK", pb.ModelInferRequest.FromString(recorder.received[0]))
            except grpc.RpcError as error:
                answer = (error.code().name, error.details())
            if answer != expected:
                differ.append((index, raw.hex(), expected, answer))
    assert not differ, differ[:3]


# ------------------------------------------------------------------------------ one home for the words

NATIVE_SOURCES = REPO_ROOT / "trt_plugin_kit" / "serving" / "edge" / "native"
# The compiled front's ModelInfer rules: every refusal they give is worded by edge/policy.py's REFUSALS.
MODEL_INFER_RULES = ("model_infer.cc", "model_request.cc", "request.h")
REFUSAL_SITE = re.compile(r"\b(?:invalid|malformed)\(|Refused\{Code::\w+,")
REFUSAL_KEY = re.compile(r'refusal\(\s*"(\w+)"')


def _statement(text: str, start: int) -> str:
    """From `start` to the end of its C++ statement (the `;` outside any parentheses or braces)."""
    depth = 0
    for index in range(start, len(text)):
        depth += (text[index] in "({") - (text[index] in ")}")
        if text[index] == ";" and depth <= 0:
            return text[start:index]
    return text[start:]


def test_the_compiled_front_words_no_refusal_itself():
    """A refusal's words have one home, edge/policy.py (sent on stdin): a text literal at a refusal of the
    compiled front's ModelInfer rules would be a second one, held equal only by the differential tests.
    Literals left once each `refusal("key", {{"field", ...}})` is taken out fail here; so does a key that
    policy.REFUSALS does not have (the binary would answer "malformed request" instead)."""
    literal = re.compile(r'"(?:[^"\\]|\\.)*"')
    found = []
    for name in MODEL_INFER_RULES:
        text = (NATIVE_SOURCES / name).read_text()
        for site in REFUSAL_SITE.finditer(text):
            statement = _statement(text, site.start())
            if site.group().startswith("malformed(") and literal.fullmatch(statement[10:-1].strip()):
                continue  # malformed("DecodeError"): protobuf's exception name, the field of malformed_why
            bare = re.sub(r'\{"\w+",', "{", REFUSAL_KEY.sub("refusal(", statement))
            found += [f"{name}: {text_literal}" for text_literal in literal.findall(bare)]
    assert not found, found
    used = {key for path in NATIVE_SOURCES.glob("*.[ch]*") for key in REFUSAL_KEY.findall(path.read_text())}
    assert used and used <= set(policy.REFUSALS), sorted(used - set(policy.REFUSALS))
