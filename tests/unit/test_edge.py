"""The edge's parsers and checks on their own (no server): what passes, what is refused and with which words.

The same rules against the real tritonserver, over both protocols: tests/server/test_edge_attacks.py.
"""

from __future__ import annotations

import gzip
import json
import zlib

import numpy as np
import pytest
from tritonclient.grpc import service_pb2 as pb

from trt_plugin_kit.serving.edge import limits, wire_json
from trt_plugin_kit.serving.edge.grpc_front import encode_model_infer, parse_model_infer, peer_of_call
from trt_plugin_kit.serving.edge.http_front import _inflate, parse_infer, route
from trt_plugin_kit.serving.edge.tensors import (
    ModelInterface,
    Refused,
    check_request,
    count_bytes_elements,
    probe_request,
    serialize_bytes_elements,
)
from trt_plugin_kit.serving.edge.wire_binary import encode_binary_request
from trt_plugin_kit.tritonserver.protocol import TensorSpec


def model(name: str, tensor: str, datatype: str, dims: tuple, output: str) -> ModelInterface:
    return ModelInterface(name, 64, {tensor: TensorSpec(tensor, datatype, dims)}, frozenset({output}))


MODELS = {
    "l2norm": model("l2norm", "vector", "FP32", (-1,), "normalized"),
    "mnist": model("mnist", "image", "FP32", (1, 28, 28), "probabilities"),
    "mnist_pipeline": model("mnist_pipeline", "image_bytes", "BYTES", (1,), "probabilities"),
}


def json_request(inputs: list[dict], **extra) -> bytes:
    return json.dumps({"inputs": inputs, **extra}).encode()


def vector(shape, data, datatype="FP32") -> dict:
    return {"name": "vector", "shape": shape, "datatype": datatype, "data": data}


# ---------------------------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    "method, path, name",
    [
        ("GET", "/v2/health/ready", "ready"),
        ("GET", "/v2", "server_metadata"),
        ("GET", "/v2/models/mnist", "model_metadata"),
        ("GET", "/v2/models/mnist/versions/1/config", "model_config"),
        ("POST", "/v2/models/l2norm/infer", "infer"),
        ("POST", "/v2/models/l2norm/versions/1/infer", "infer"),
        ("POST", "/v2/repository/index", "repository_index"),
        ("POST", "/v2/systemsharedmemory/region/r0/register", "shm_register"),
        ("GET", "/v2/models/mnist/trace/setting", "trace"),
    ],
)
def test_the_served_endpoints_route(method, path, name):
    assert route(method, path)[0].name == name


@pytest.mark.parametrize(
    "path",
    [
        "/v2/models/mnist/./infer",
        "/v2/models/mnist/../l2norm/infer",
        "/v2/models/%6dnist/infer",
        "/v2/models/mnist/%2e/infer",
        "//v2/models/mnist/infer",
        "/v2/models/mnist//infer",
        "/v2/models/mnist/generate",
        "/v2/models/mnist/generate_stream",
        "/v2/models/mnist/versions/x1/infer",
        "/v2/health",
        "/metrics",
        "/",
        "/v2/models/mnist/infer/",
    ],
)
def test_anything_else_is_not_found(path):
    with pytest.raises(Refused) as refused:
        route("POST", path)
    assert refused.value.status == 404


def test_a_wrong_method_is_405():
    with pytest.raises(Refused) as refused:
        route("DELETE", "/v2/models/mnist/infer")
    assert refused.value.status == 405


# ----------------------------------------------------------------------------------------------- JSON


@pytest.mark.parametrize(
    "text, words",
    [
        (b'{"a": 1, "a": 2}', "repeats the key 'a'"),
        (b'{"inputs": [{"shape": [1], "shape": [2]}]}', "repeats the key 'shape'"),
        (b"[NaN]", "NaN"),
        (b"[Infinity]", "Infinity"),
        (b"[" + b"9" * 40 + b"]", "integer of 40 digits"),
        (b"[" * 100_000 + b"]" * 100_000, "nests JSON too deeply"),
        (b"\xff\xfe", "not UTF-8"),
        (b"{", "not valid JSON"),
    ],
)
def test_json_is_read_strictly(text, words):
    with pytest.raises(Refused, match=words):
        wire_json.parse(text)


NUMBER_EDGES = [
    "9" * 32, "-" + "9" * 32, "9" * 33, "1" + "0" * 40, "0." + "1" * 32, "0." + "1" * 33, "1e99",
    "9.99e99", "1e308", "1.7976931348623157e308", "1e309", "-1e999", "1E+308", "1e-999", "1e0099",
    "12345678901234567890.5", "9" * 5000,
]  # fmt: skip


def outcome(parse, *args):
    try:
        return parse(*args)
    except Refused as refused:
        return str(refused)


@pytest.mark.parametrize("number", NUMBER_EDGES)
def test_the_fast_json_path_reads_numbers_as_the_checked_one(number):
    """The first pass (no per-number hooks) gives, near and past the bounds, in lists of numbers, mixed lists
    and alone, the value or the refusal of the checked parse."""
    for text in (f"[{number}, 1.5, -2]", f'{{"a": [{number}, "b", [1]], "a": 1}}', number):
        fast = outcome(wire_json.parse, text.encode())
        assert fast == outcome(wire_json._parse_checked, text, "the request"), text


# ---------------------------------------------------------------------------------------- inference


def checked(body: bytes, header_length=None, model="l2norm"):
    return check_request(parse_infer(model, "", body, header_length), MODELS)


def test_a_json_request_is_re_encoded_in_binary():
    request = checked(json_request([vector([1, 2], [3, 4])], outputs=[{"name": "normalized"}]))
    body, header_length = encode_binary_request(request)
    header = json.loads(body[:header_length])
    assert header == {
        "inputs": [
            {"name": "vector", "datatype": "FP32", "shape": [1, 2], "parameters": {"binary_data_size": 8}}
        ],
        "outputs": [{"name": "normalized"}],
    }
    np.testing.assert_array_equal(np.frombuffer(body[header_length:], np.float32), [3, 4])


def test_a_binary_request_passes_with_its_sizes_accounted_for():
    data = np.arange(8, dtype=np.float32).tobytes()
    header = json_request([{"name": "vector", "shape": [2, 4], "datatype": "FP32",
                            "parameters": {"binary_data_size": 32}}])  # fmt: skip
    request = checked(header + data, str(len(header)))
    assert request.inputs[0].raw == data
    with pytest.raises(Refused, match="no input claims"):
        checked(header + data + b"x", str(len(header)))
    with pytest.raises(Refused, match="binary_data_size 32 is not within"):
        checked(header + data[:-1], str(len(header)))
    for bad in ("99999999999999999999", "-1", "1e3", str(len(header) + 100)):
        with pytest.raises(Refused, match="Inference-Header-Content-Length"):
            checked(header + data, bad)


@pytest.mark.parametrize(
    "inputs, words",
    [
        ([vector([1, 2**62], [0])], "dimension 4611686018427387904 of shape"),
        ([vector([2**32, 4], [0])], "dimension 4294967296"),
        ([vector([65, 1], [0] * 65)], "batch size 65 of shape [65, 1] is not in 1..64"),
        ([vector([1] * 150_000, [0])], "at most 8 dimensions"),
        ([vector([4], [1, 2, 3, 4])], "needs [batch, -1]"),
        ([vector([1, 3], [1, 2])], "needs 12 bytes, got 8"),
        ([vector([1, 2], [[1, 2], [3]])], "ragged"),
        ([vector([1, 2], ["1", "2"])], "must hold numbers"),
        ([vector([1, 2], [True, False])], "must hold numbers"),
        ([vector([1, 2], [1, 2], datatype="FP64")], "datatype 'FP64', the model expects FP32"),
        ([vector([1, 2], [1, 2], datatype="FP128")], "unknown datatype 'FP128'"),
        ([{**vector([1, 2], [1, 2]), "name": "other"}], "takes inputs ['vector']"),
        ([vector([1, 2], [1, 2]), vector([1, 2], [1, 2])], "takes inputs ['vector']"),
        ([{**vector([1, 2], [1, 2]), "extra": 1}], "unknown field 'extra'"),
        ([{**vector([1, 2], [1, 2]), "parameters": {"x": 1}}], "parameter 'x' is not accepted"),
    ],
)
def test_what_the_model_cannot_take_is_refused_before_any_arithmetic(inputs, words):
    with pytest.raises(Refused) as refused:
        checked(json_request(inputs))
    assert words in str(refused.value)


def test_byte_tensors_account_for_every_byte():
    images = serialize_bytes_elements([b"png1", b"png22"])
    assert count_bytes_elements(images, "x", stop_after=2) == 2
    with pytest.raises(Refused, match="past the end"):
        count_bytes_elements(images[:-1], "x", stop_after=2)
    # A body of empty elements is counted only as far as the shape asks.
    assert count_bytes_elements(bytes(4 * 1000), "x", stop_after=2) == 3
    header = json_request([{"name": "image_bytes", "shape": [1, 1], "datatype": "BYTES",
                            "parameters": {"binary_data_size": len(images)}}])  # fmt: skip
    with pytest.raises(Refused, match="declares 1 elements but the data holds 2"):
        checked(header + images, str(len(header)), model="mnist_pipeline")


def test_outputs_and_request_fields_are_allowlisted():
    good = [vector([1, 2], [3, 4])]
    with pytest.raises(Refused, match="has no output 'secret'"):
        checked(json_request(good, outputs=[{"name": "secret"}]))
    with pytest.raises(Refused, match="unknown field 'sequence_id'"):
        checked(json_request(good, sequence_id=1))
    with pytest.raises(Refused, match="Request for unknown model: 'nope' is not found"):
        checked(json_request(good), model="nope")
    request = checked(
        json_request(good, outputs=[{"name": "normalized", "parameters": {"binary_data": True}}])
    )
    assert request.outputs[0].parameters == {"binary_data": True}


def test_decompression_is_bounded_in_output():
    assert _inflate(gzip.compress(b"x" * 1000), 16 + zlib.MAX_WBITS, 1000) == b"x" * 1000
    with pytest.raises(Refused, match="inflates past 1000 bytes"):
        _inflate(gzip.compress(b"x" * 1001), 16 + zlib.MAX_WBITS, 1000)
    with pytest.raises(Refused, match="not valid compressed data"):
        _inflate(b"not gzip", 16 + zlib.MAX_WBITS, 1000)


# ---------------------------------------------------------------------------------------------- gRPC


def test_grpc_requests_are_parsed_checked_and_re_encoded():
    message = pb.ModelInferRequest(model_name="l2norm", id="a")
    tensor = message.inputs.add(name="vector", datatype="FP32", shape=[1, 2])
    tensor.contents.fp32_contents.extend([3.0, 4.0])
    request = check_request(parse_model_infer(message), MODELS)
    again = pb.ModelInferRequest.FromString(encode_model_infer(request))
    assert (
        again.id == "a" and list(again.inputs[0].shape) == [1, 2] and not again.inputs[0].HasField("contents")
    )
    np.testing.assert_array_equal(np.frombuffer(again.raw_input_contents[0], np.float32), [3, 4])


def test_perf_analyzers_empty_final_response_parameter_is_accepted_and_not_forwarded():
    """NVIDIA's perf_analyzer sets triton_enable_empty_final_response on every gRPC request (make perf)."""
    message = pb.ModelInferRequest(model_name="l2norm")
    message.parameters["triton_enable_empty_final_response"].bool_param = True
    tensor = message.inputs.add(name="vector", datatype="FP32", shape=[1, 2])
    tensor.contents.fp32_contents.extend([3.0, 4.0])
    again = pb.ModelInferRequest.FromString(
        encode_model_infer(check_request(parse_model_infer(message), MODELS))
    )
    assert "triton_enable_empty_final_response" not in again.parameters
    message.parameters["triton_enable_empty_final_response"].string_param = "yes"
    with pytest.raises(Refused, match="must be a bool"):
        check_request(parse_model_infer(message), MODELS)
    message.parameters["triton_other"].bool_param = True
    del message.parameters["triton_enable_empty_final_response"]
    with pytest.raises(Refused, match="'triton_other' is not accepted"):
        check_request(parse_model_infer(message), MODELS)


def test_grpc_shape_without_data_is_refused():
    """The 38-byte request that killed the l2norm stub on Triton 2.51."""
    message = pb.ModelInferRequest(model_name="l2norm")
    message.inputs.add(name="vector", datatype="FP32", shape=[1, 2**62])
    assert len(message.SerializeToString()) < 40
    with pytest.raises(Refused, match="dimension 4611686018427387904"):
        check_request(parse_model_infer(message), MODELS)
    message.inputs[0].shape[:] = [1, 4]
    with pytest.raises(Refused, match="has no data"):
        check_request(parse_model_infer(message), MODELS)


def test_a_health_probe_is_a_request_its_model_accepts():
    for interface in MODELS.values():
        check_request(probe_request(interface), MODELS)


def test_limits_leave_room_for_the_largest_legitimate_request():
    assert 64 * 4096 * 4 < limits.MAX_REQUEST_BYTES  # a full l2norm batch
    assert limits.MAX_GRPC_MESSAGE_BYTES > limits.MAX_REQUEST_BYTES


@pytest.mark.parametrize(
    "peer, key",
    [
        ("ipv4:127.0.0.2:34244", "127.0.0.2"),
        ("ipv6:%5B::1%5D:50680", "0" * 16),  # ::1 by its /64, as grpcio 1.85 names it
        ("ipv6:%5B2001:db8:1:2:3::4%5D:443", "20010db800010002"),
        ("ipv6:%5B::ffff:10.0.0.1%5D:443", "10.0.0.1"),
        ("unix:/tmp/trt-edge-x/grpc-front", None),  # the compiled front relaying: budgeted there
    ],
)
def test_the_python_grpc_front_budgets_calls_by_the_peer_grpc_core_names(peer, key):
    assert peer_of_call(peer) == key
