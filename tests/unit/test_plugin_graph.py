"""The CPU stand-in's graph runner (trt_plugin_kit/serving/plugin_graph.py) against the test oracle, ONNX's
ReferenceEvaluator with the plugin references (trt_plugin_kit/models/onnx_eval.py): our two plugin-flavour
models, graphs that interleave standard and plugin nodes, types and bad graphs or feeds; and the check of a
Triton configuration against the graph."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from trt_plugin_kit.interface import ONNX_DIR, PLUGIN_DOMAIN
from trt_plugin_kit.models import onnx_eval
from trt_plugin_kit.serving.plugin_graph import GraphError, PluginGraph, interface_mismatches
from trt_plugin_kit.specs import nodes as plugin_nodes

OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid(PLUGIN_DOMAIN, 1)]


def tensor(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


@pytest.mark.numeric
def test_mnist_plugin_flavour_matches_the_reference_evaluator():
    """Conv and Softmax run in ONNX Runtime instead of ONNX's reference: the same to float32 rounding."""
    model = onnx.load(ONNX_DIR / "mnist_plugin.onnx")
    images = np.random.default_rng(0).random((33, 1, 28, 28), dtype=np.float32)
    ours = PluginGraph(model).run({"image": images})["probabilities"]
    oracle = onnx_eval.run(model, {"image": images})["probabilities"]
    np.testing.assert_allclose(ours, oracle, rtol=0, atol=1e-6)
    assert ours.dtype == np.float32 and np.array_equal(ours.argmax(1), oracle.argmax(1))


def test_l2norm_plugin_flavour_is_the_reference_exactly():
    model = onnx.load(ONNX_DIR / "l2norm_plugin.onnx")
    graph = PluginGraph(model)
    for shape in ((1, 3), (5, 128), (64, 1)):
        vectors = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        assert np.array_equal(
            graph.run({"vector": vectors})["normalized"],
            onnx_eval.run(model, {"vector": vectors})["normalized"],
        )


def interleaved_model() -> onnx.ModelProto:
    """x -> Mul -> LeakyReLU -> Add(with x: a value from before the plugin) -> L2Normalize -> Neg, plus the
    plugin's output as a second graph output: segments must carry values across plugin nodes."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["doubled"]),
        plugin_nodes.make_node("LeakyReLU", ["doubled"], ["leaky"], "leaky", negative_slope=0.25),
        helper.make_node("Add", ["leaky", "x"], ["summed"]),
        plugin_nodes.make_node("L2Normalize", ["summed"], ["normed"], "l2"),
        helper.make_node("Neg", ["normed"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [tensor("x", ["batch", 6])],
        [tensor("y", ["batch", 6]), tensor("leaky", ["batch", 6])],
        [two],
    )
    return helper.make_model(graph, opset_imports=OPSETS)


def test_interleaved_graph_matches_the_oracle_exactly():
    model = interleaved_model()
    graph = PluginGraph(model)
    assert [type(step).__name__ for step in graph.steps] == [
        "_Segment",
        "_Plugin",
        "_Segment",
        "_Plugin",
        "_Segment",
    ]
    x = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    ours, oracle = graph.run({"x": x}), onnx_eval.run(model, {"x": x})
    for name in ("y", "leaky"):  # Mul by 2, Add, Neg: exact in any implementation
        assert np.array_equal(ours[name], oracle[name]), name


def test_types_follow_the_feed_fp16():
    node = plugin_nodes.make_node("LeakyReLU", ["h"], ["r"], "leaky", negative_slope=0.5)
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16), node,
         helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT)],
        "g", [tensor("x", ["n"])], [tensor("y", ["n"])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=OPSETS)
    x = np.array([-2.0, -1.0, 0.0, 3.0], np.float32)
    assert np.array_equal(PluginGraph(model).run({"x": x})["y"], [-1.0, -0.5, 0.0, 3.0])


def test_bad_feeds_are_refused_by_name():
    graph = PluginGraph(interleaved_model())
    with pytest.raises(GraphError, match="missing input 'x'"):
        graph.run({})
    with pytest.raises(GraphError, match="'x' must be float32"):
        graph.run({"x": np.zeros((2, 6), np.float64)})
    with pytest.raises(GraphError, match=r"'x' has shape \[2, 5\]"):
        graph.run({"x": np.zeros((2, 5), np.float32)})


def test_unsupported_operators_and_bad_plugin_nodes_are_refused_at_load():
    foreign = helper.make_node("Thing", ["x"], ["y"], domain="com.example")
    model = helper.make_model(
        helper.make_graph([foreign], "g", [tensor("x", [1])], [tensor("y", [1])]), opset_imports=OPSETS
    )
    with pytest.raises(GraphError, match="com.example::Thing is not supported"):
        PluginGraph(model)
    node = plugin_nodes.make_node("LeakyReLU", ["x"], ["y"], "leaky")
    node.attribute.append(helper.make_attribute("slope", 1.0))
    model = helper.make_model(
        helper.make_graph([node], "g", [tensor("x", [1])], [tensor("y", [1])]), opset_imports=OPSETS
    )
    with pytest.raises(GraphError, match="has no field"):
        PluginGraph(model)


def l2norm_config(**changes) -> dict:
    """The JSON form Triton hands a Python model (dims as strings), of l2norm's interface."""
    config = {
        "name": "l2norm",
        "max_batch_size": 64,
        "input": [{"name": "vector", "data_type": "TYPE_FP32", "dims": ["-1"]}],
        "output": [{"name": "normalized", "data_type": "TYPE_FP32", "dims": ["-1"]}],
    }
    config.update(changes)
    return config


def test_interface_check_accepts_the_matching_configuration():
    graph = PluginGraph(ONNX_DIR / "l2norm_plugin.onnx")
    assert interface_mismatches(graph, l2norm_config()) == []
    mnist = PluginGraph(ONNX_DIR / "mnist_plugin.onnx")
    config = {
        "max_batch_size": 8,
        "input": [{"name": "image", "data_type": "TYPE_FP32", "dims": ["1", "28", "28"]}],
        "output": [{"name": "probabilities", "data_type": "TYPE_FP32", "dims": ["10"]}],
    }
    assert interface_mismatches(mnist, config) == []


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        (
            {"input": [{"name": "vec", "data_type": "TYPE_FP32", "dims": ["-1"]}]},
            "['vec'] in the configuration",
        ),
        ({"output": [{"name": "normalized", "data_type": "TYPE_FP16", "dims": ["-1"]}]}, "TYPE_FP16"),
        ({"max_batch_size": 0}, "'vector' is [-1] in the configuration, ['?', '?'] in the graph"),
        (
            {"input": [{"name": "vector", "data_type": "TYPE_FP32", "dims": ["4", "4"]}]},
            "'vector' is ['batch', 4, 4]",
        ),
    ],
)
def test_interface_check_names_what_differs(changes, words):
    problems = interface_mismatches(PluginGraph(ONNX_DIR / "l2norm_plugin.onnx"), l2norm_config(**changes))
    assert any(words in problem for problem in problems), problems
