"""The CPU stand-in of plugin-flavour ONNX models (the `plugin_onnx` backend) in the real tritonserver of
`make serve`: a repository with two more models than ours, each served by the one generic implementation with
no model.py of its own:

* `leaky_relu`: the one-node model `new-plugin` writes for a plugin (trt_plugin_kit/scaffold/model.py), here
  for LeakyReLU: answers are the NumPy reference's, bit for bit, alone and under dynamic batching;
* `mnist_plugin_cpu`: our mnist interface on models/onnx/mnist_plugin.onnx, the file the engine builder
  consumes: answers match the `mnist` CPU model (the native graph in ONNX Runtime) to float32 rounding.

And the tools for any model against them (#24 item 5): `python -m clients tensor` answers with the reference's
result, `python -m loadtests --mix leaky_relu=1,mnist_plugin_cpu=1` runs with 0 failures.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from trt_plugin_kit.interface import (
    CPU_MODEL_CONFIG_NAME,
    MODEL_ONNX_FILE,
    MODEL_REPOSITORY,
    MODELS_DIR,
    PLUGIN_ONNX_BACKEND,
    REPO_ROOT,
)
from trt_plugin_kit.scaffold import model as served_model
from trt_plugin_kit.serving.host import Ports
from trt_plugin_kit.serving.plugin_graph import PluginGraph
from trt_plugin_kit.serving.server import TritonServer
from trt_plugin_kit.specs import nodes as plugin_nodes
from trt_plugin_kit.specs import reference
from trt_plugin_kit.specs import spec as plugin_spec

ITEM = served_model.ITEM_LENGTH


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("stand_in")
    repository = root / "model_repository"
    shutil.copytree(MODEL_REPOSITORY, repository)
    (root / "models").symlink_to(MODELS_DIR)  # mnist's onnx_model is ../../models/onnx/...
    served_model.create(plugin_spec.get("LeakyReLU"), False, repository)
    mnist = repository / "mnist_plugin_cpu"
    (mnist / "configs").mkdir(parents=True)
    (mnist / "1").mkdir()
    shutil.copy2(repository / "mnist" / "labels.txt", mnist / "labels.txt")
    text = (repository / "mnist" / "configs" / f"{CPU_MODEL_CONFIG_NAME}.pbtxt").read_text()
    text = text.replace('name: "mnist"', 'name: "mnist_plugin_cpu"').replace(
        'backend: "python"', f'backend: "{PLUGIN_ONNX_BACKEND}"'
    )
    (mnist / "configs" / f"{CPU_MODEL_CONFIG_NAME}.pbtxt").write_text(
        text.replace("mnist_native.onnx", "mnist_plugin.onnx")
    )
    triton = TritonServer(
        variant="cpu",
        ports=Ports.free(),
        model_repository=repository,
        log_file=root / "triton.log",
        exit_timeout_s=3,
    )
    try:
        triton.start()
        triton.wait_until_ready(240)
        yield triton
    finally:
        triton.stop()


@pytest.fixture
def client(server):
    http = httpclient.InferenceServerClient(url=server.http_url, concurrency=8)
    yield http
    http.close()


def infer(client, model: str, feeds: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
    inputs = []
    for name, array in feeds.items():
        tensor = httpclient.InferInput(name, list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    result = client.infer(model, inputs)
    return {name: result.as_numpy(name) for name in outputs}


def test_both_stand_ins_load_beside_our_models(server):
    assert {"leaky_relu", "mnist_plugin_cpu", "mnist", "l2norm"} <= set(server.loaded_models())


def expected(server, x: np.ndarray) -> np.ndarray:
    """The reference with the fields as the node hands them to the plugin (float32 values)."""
    (node,) = onnx.load(Path(server.model_repository) / "leaky_relu" / MODEL_ONNX_FILE).graph.node
    return reference.run("LeakyReLU", [x], plugin_nodes.node_fields(node))[0]


def test_the_scaffolded_model_answers_with_the_reference(server, client):
    metadata = client.get_model_metadata("leaky_relu")
    assert metadata["platform"] == PLUGIN_ONNX_BACKEND
    assert [(t["name"], t["datatype"], t["shape"]) for t in metadata["inputs"]] == [("x", "FP32", [-1, ITEM])]
    x = np.random.default_rng(0).standard_normal((5, ITEM)).astype(np.float32)
    got = infer(client, "leaky_relu", {"x": x}, ["y"])["y"]
    assert np.array_equal(got, expected(server, x))


def test_dynamic_batches_answer_each_request_with_its_own_rows(server, client):
    """24 requests in flight at once (tritonclient's async HTTP, one thread): the dynamic batcher merges them;
    each answer must hold its own rows."""
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((1 + i % 4, ITEM)).astype(np.float32) for i in range(24)]
    pending = []
    for x in batches:
        tensor = httpclient.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        pending.append(client.async_infer("leaky_relu", [tensor]))
    for x, request in zip(batches, pending, strict=True):
        assert np.array_equal(request.get_result().as_numpy("y"), expected(server, x))


def test_a_wrong_item_shape_is_refused_and_the_model_keeps_serving(client):
    with pytest.raises(InferenceServerException, match="16"):
        infer(client, "leaky_relu", {"x": np.zeros((2, ITEM - 1), np.float32)}, ["y"])
    assert infer(client, "leaky_relu", {"x": np.ones((1, ITEM), np.float32)}, ["y"])["y"].shape == (1, ITEM)


@pytest.mark.numeric
def test_the_engine_builders_mnist_file_served_on_the_cpu_matches_mnist(client):
    """mnist_plugin.onnx (Pool, FullyConnected, PReLU plugin nodes) against the native graph: ONNX Runtime's
    float32 FC vs the reference's float64 one differ in the last bits only."""
    images = np.random.default_rng(2).random((7, 1, 28, 28), dtype=np.float32)
    stand_in = infer(client, "mnist_plugin_cpu", {"image": images}, ["probabilities"])["probabilities"]
    native = infer(client, "mnist", {"image": images}, ["probabilities"])["probabilities"]
    np.testing.assert_allclose(stand_in, native, rtol=0, atol=1e-5)
    assert np.array_equal(stand_in.argmax(1), native.argmax(1))
    local = PluginGraph(onnx.load(Path(MODELS_DIR) / "onnx" / "mnist_plugin.onnx")).run({"image": images})
    np.testing.assert_allclose(stand_in, local["probabilities"], rtol=0, atol=1e-7)


def tool(server, module: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m clients|loadtests` as a user runs it, against this server only (no stray settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOADTEST_", "TRITON_", "LOCUST_"))}
    env |= {"TRITON_HTTP_PORT": str(server.ports.http), "TRITON_GRPC_PORT": str(server.ports.grpc)}
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_clients_tensor_answers_with_the_reference(server, tmp_path, protocol):
    x = np.random.default_rng(3).standard_normal((37, ITEM)).astype(np.float32)  # 3 batches of 16
    np.save(tmp_path / "x.npy", x)
    result = tool(server, "clients", "tensor", "--model", "leaky_relu", str(tmp_path / "x.npy"),
                  "--protocol", protocol, "--output", str(tmp_path / "y.npz"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert np.array_equal(np.load(tmp_path / "y.npz")["y"], expected(server, x))
    shown = tool(server, "clients", "tensor", "--model", "leaky_relu", str(tmp_path / "x.npy"), "--json")
    assert np.array_equal(np.array(json.loads(shown.stdout)["outputs"]["y"], np.float32), expected(server, x))
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((2, ITEM + 1), np.float32))
    refused = tool(server, "clients", "tensor", "--model", "leaky_relu", str(bad))
    assert refused.returncode == 7 and f"'x' has shape [2, {ITEM + 1}]" in refused.stderr


def test_load_test_of_stand_in_models_has_no_failures(server, tmp_path):
    result = tool(
        server, "loadtests", "--mix", "leaky_relu=2,mnist_plugin_cpu=1", "--users", "2", "--run-time", "4s",
        "--model-batch", "4", "--reports-dir", str(tmp_path), timeout=150,
    )  # fmt: skip
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    lines = [line for line in result.stdout.splitlines() if " b4 " in line]
    assert {"grpc leaky_relu b4", "http mnist_plugin_cpu b4"} <= {
        " ".join(line.split()[:3]) for line in lines
    }
    assert all(" 0 fail" in " ".join(line.split()) for line in lines), lines
