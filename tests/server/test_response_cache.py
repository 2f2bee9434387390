"""Triton's response cache as loadtests/README.md says to turn it on: `response_cache { enable: true }` in the
deterministic models' configurations and a server with a cache (`--cache-config`). Over both protocols,
through the edge: a repeated request is a hit with the same answer, another input a miss; the ensemble caches
its whole answer. The shipped configurations enable no cache: with it enabled Triton 2.51 exports no request
latency summaries for the model, which the dashboard's percentile panels and the rules read."""

from __future__ import annotations

import re
import secrets
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from loadtests.response_cache import CACHE_FLAG, CACHE_METRICS, HITS, MISSES, MODELS, cached_repository
from trt_plugin_kit.interface import (
    L2NORM,
    L2NORM_INPUT,
    L2NORM_OUTPUT,
    MNIST,
    MNIST_INPUT,
    MNIST_OUTPUT,
    MNIST_PIPELINE,
    PIPELINE_INPUT,
    PIPELINE_OUTPUT,
    REPO_ROOT,
)
from trt_plugin_kit.serving.server import Ports, TritonServer
from trt_plugin_kit.tritonserver.metrics import read_metrics

CLIENTS = {"http": httpclient, "grpc": grpcclient}


@pytest.fixture(scope="module")
def cached_server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("cache")
    server = TritonServer(
        variant="cpu",
        ports=Ports.free("127.0.0.1"),
        model_repository=cached_repository(workdir),
        log_file=workdir / "tritonserver.log",
        extra_args=[CACHE_FLAG],
        exit_timeout_s=3,
        admin_key=secrets.token_hex(32),
    )
    try:
        server.start()
        server.wait_until_ready(240)
        yield server
    finally:
        server.stop()


def counts(server, model: str) -> tuple[float, float]:
    values = read_metrics(server.metrics_url, (HITS, MISSES))
    return values[HITS].get(model, 0.0), values[MISSES].get(model, 0.0)


def infer(server, protocol: str, model: str, name: str, array: np.ndarray, output: str) -> np.ndarray:
    module = CLIENTS[protocol]
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    datatype = "BYTES" if array.dtype == np.object_ else "FP32"
    tensor = module.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    try:
        return client.infer(model, [tensor]).as_numpy(output)
    finally:
        client.close()


def requests(protocol: str) -> list[tuple[str, str, np.ndarray, np.ndarray, str]]:
    """(model, input, a request, another request, output) of each cached model; distinct per protocol, so
    that each protocol's first request is a miss."""
    rng = np.random.default_rng(0 if protocol == "http" else 1)
    digits = rng.random((2, 8, 1, 28, 28), dtype=np.float32)
    vectors = rng.standard_normal((2, 4, 128)).astype(np.float32)
    png = (REPO_ROOT / "samples" / "digits" / ("3.png" if protocol == "http" else "7.png")).read_bytes()
    other = (REPO_ROOT / "samples" / "digits" / ("5.png" if protocol == "http" else "9.png")).read_bytes()
    pictures = [np.array([[png]], dtype=np.object_), np.array([[other]], dtype=np.object_)]
    return [
        (MNIST, MNIST_INPUT, digits[0], digits[1], MNIST_OUTPUT),
        (L2NORM, L2NORM_INPUT, vectors[0], vectors[1], L2NORM_OUTPUT),
        (MNIST_PIPELINE, PIPELINE_INPUT, pictures[0], pictures[1], PIPELINE_OUTPUT),
    ]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_repeated_request_is_answered_from_the_cache(cached_server, protocol):
    for model, name, first, second, output in requests(protocol):
        hits, misses = counts(cached_server, model)
        answer = infer(cached_server, protocol, model, name, first, output)
        again = infer(cached_server, protocol, model, name, first, output)
        other = infer(cached_server, protocol, model, name, second, output)
        np.testing.assert_array_equal(again, answer)  # the cached answer is the computed one
        assert not np.array_equal(other, answer), model
        after = counts(cached_server, model)
        assert (after[0] - hits, after[1] - misses) == (1, 2), (model, protocol, after, hits, misses)


def test_the_cache_metrics_the_docs_name_are_exported(cached_server):
    # The names loadtests/response_cache.py reads and the docs quote (the monitoring test allows them for
    # that reason: make serve's server, which it reads, has no cache).
    with urllib.request.urlopen(cached_server.metrics_url, timeout=10) as response:
        exported = set(re.findall(r"^(nv_cache_\w+)[{ ]", response.read().decode(), re.MULTILINE))
    assert set(CACHE_METRICS) <= exported, exported


def test_the_shipped_models_keep_their_latency_summaries(triton_server):
    # make serve's server: no cache, and no model's configuration enables one, so every model exports the
    # request latency summaries (p50/p99) that a response_cache block in its configuration would take away.
    vectors = np.ones((4, 128), np.float32)
    for _ in range(2):
        infer(triton_server, "grpc", L2NORM, L2NORM_INPUT, vectors, L2NORM_OUTPUT)
    with urllib.request.urlopen(triton_server.metrics_url, timeout=10) as response:
        text = response.read().decode()
    assert "nv_cache_" not in text
    summarized = set(re.findall(r'^nv_inference_request_summary_us_count\{model="(\w+)"', text, re.MULTILINE))
    assert set(MODELS) <= summarized, summarized
