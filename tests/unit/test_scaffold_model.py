"""The served model `new-plugin` writes beside a plugin (trt_plugin_kit/scaffold/model.py), for plugins of
the tree: a TensorRT configuration and a CPU one of the same interface, which is the ONNX graph's; a dynamic
batch dimension; the node the parser check accepts. (tests/library/test_scaffold.py runs `new-plugin` itself;
tests/server/test_plugin_onnx_stand_in.py serves such a model.)"""

from __future__ import annotations

import json

import onnx
import pytest
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

from trt_plugin_kit.interface import CPU_MODEL_CONFIG_NAME, MODEL_ONNX_FILE, PLUGIN_ONNX_BACKEND
from trt_plugin_kit.scaffold import model as served_model
from trt_plugin_kit.serving.plugin_graph import PluginGraph, interface_mismatches
from trt_plugin_kit.specs import nodes as plugin_nodes
from trt_plugin_kit.specs import spec as plugin_spec
from trt_plugin_kit.tritonserver.config import load_model_config


@pytest.mark.parametrize(("plugin", "reduce"), [("LeakyReLU", False), ("ConcatCopy", False)])
def test_model_folder_is_one_node_with_a_dynamic_batch(tmp_path, plugin, reduce):
    spec = plugin_spec.get(plugin)
    folder = served_model.create(spec, reduce, tmp_path)
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "1/README.md",
        "config.pbtxt",
        f"configs/{CPU_MODEL_CONFIG_NAME}.pbtxt",
        MODEL_ONNX_FILE,
    ]
    tensorrt = load_model_config(folder / "config.pbtxt")
    cpu = load_model_config(folder / "configs" / f"{CPU_MODEL_CONFIG_NAME}.pbtxt")
    assert tensorrt.is_tensorrt and cpu.backend == PLUGIN_ONNX_BACKEND
    assert (tensorrt.name, tensorrt.max_batch_size, tensorrt.inputs, tensorrt.outputs) == (
        cpu.name, cpu.max_batch_size, cpu.inputs, cpu.outputs,
    )  # fmt: skip
    assert [t.name for t in cpu.inputs] == [t.name for t in spec.inputs]
    model = onnx.load(folder / MODEL_ONNX_FILE)
    (node,) = model.graph.node
    plugin_nodes.node_fields(node)  # what TensorRT's parser and our creator accept
    assert all(i.type.tensor_type.shape.dim[0].dim_param == "batch" for i in model.graph.input)
    message = text_format.Parse(
        (folder / "configs" / f"{CPU_MODEL_CONFIG_NAME}.pbtxt").read_text(), model_config_pb2.ModelConfig()
    )
    as_json = json.loads(json_format.MessageToJson(message, preserving_proto_field_name=True))
    assert interface_mismatches(PluginGraph(model), as_json) == []


def test_an_existing_model_folder_is_never_overwritten(tmp_path):
    served_model.create(plugin_spec.get("LeakyReLU"), False, tmp_path)
    with pytest.raises(FileExistsError, match="leaky_relu already exists"):
        served_model.create(plugin_spec.get("LeakyReLU"), False, tmp_path)
