"""The PyTorch path (trt_plugin_kit/models/torch_op.py) where PyTorch is not installed (this project's
machines): the parts that need no PyTorch, i.e. the op schemas, the ONNX schemas the new exporter builds the
nodes with, the check of an exported file, and the clear message without PyTorch. The exports themselves ran
where PyTorch is: records/torch-export/torch-export.md (its JSON record is read back here)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
from onnx import TensorProto, helper

from trt_plugin_kit.interface import PLUGIN_DOMAIN, REPO_ROOT
from trt_plugin_kit.models import torch_op
from trt_plugin_kit.specs import nodes as plugin_nodes
from trt_plugin_kit.specs import spec as plugin_spec

RECORD = REPO_ROOT / "records" / "torch-export" / "torch-export.json"


def test_op_schemas_follow_the_specs():
    assert torch_op.schema(plugin_spec.get("LeakyReLU")) == "(Tensor x, float negative_slope) -> Tensor"
    assert torch_op.schema(plugin_spec.get("FullyConnected")) == (
        "(Tensor x, float[] weights, float[]? bias, int num_outputs) -> Tensor"
    )
    assert torch_op.schema(plugin_spec.get("ConcatCopy")) == "(Tensor in0, Tensor in1) -> (Tensor, Tensor)"


@pytest.mark.parametrize("plugin", sorted(plugin_spec.all_specs()))
def test_onnx_schemas_name_every_field_and_the_lookup(plugin):
    schema = torch_op.onnx_schema(plugin)
    spec = plugin_spec.get(plugin)
    assert (schema.name, schema.domain, schema.since_version) == (spec.name, PLUGIN_DOMAIN, 1)
    assert set(schema.attributes) == {"plugin_version", "plugin_namespace", *spec.field_names}
    assert [i.name for i in schema.inputs] == [t.name for t in spec.inputs]


def test_an_exported_file_is_checked_by_node_and_by_value(tmp_path):
    import onnx

    node = plugin_nodes.make_node("LeakyReLU", ["h"], ["y"], "leaky", negative_slope=0.125)
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["h"]), node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(PLUGIN_DOMAIN, 1)]
    )
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 6)
    expected = np.where(2 * x > 0, 2 * x, np.float32(0.125) * 2 * x)
    checked = torch_op.check_exported(path, {"input0": x}, [expected])
    assert checked["max_abs_difference_vs_torch"] == 0.0
    assert checked["plugin_nodes"][0]["fields"] == {"negative_slope": 0.125}
    with pytest.raises(AssertionError, match="no plugin node"):
        onnx.save(helper.make_model(helper.make_graph([], "e", [], [])), tmp_path / "e.onnx")
        torch_op.check_exported(tmp_path / "e.onnx", {}, [])


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="PyTorch is installed here")
def test_without_pytorch_the_message_says_how_to_get_it():
    with pytest.raises(ImportError, match=r"pip install -e '\.\[torch\]'"):
        torch_op.torch_op("LeakyReLU")


def test_the_committed_record_has_both_exporters_passing_for_four_plugins():
    record = json.loads(RECORD.read_text())
    passed = {(r["plugin"], r["exporter"]) for r in record["results"] if r["ok"]}
    assert passed == {
        (p, e) for p in ("LeakyReLU", "FullyConnected", "Pool", "ConcatCopy") for e in ("dynamo", "legacy")
    }
    assert record["torch"].startswith("2.")
