"""The served model of a scaffolded plugin: ``model_repository/<name>/``, a one-node model of the op.

``new-plugin NAME`` writes, beside ``plugins/<name>/``:

* ``model_repository/<name>/model.onnx``: the plugin-flavour ONNX (one plugin node, the spec's fields at their
  defaults, FP32, a dynamic batch dimension first, then :data:`ITEM_LENGTH` values per item), what
  ``build_engines.py --model <name>`` builds an engine from on a GPU host;
* ``config.pbtxt``: the TensorRT configuration (``1/model.plan``, KIND_GPU), the default;
* ``configs/cpu.pbtxt``: the CPU stand-in of the same interface, the ``plugin_onnx`` backend serving that same
  ONNX file with the plugin's NumPy reference (:mod:`trt_plugin_kit.serving.plugin_onnx_model`);
* ``1/README.md``: Triton needs the version folder; the engine goes there.
"""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

from trt_plugin_kit.interface import (
    CPU_MODEL_CONFIG_NAME,
    MODEL_ONNX_FILE,
    MODEL_REPOSITORY,
    PLUGIN_DOMAIN,
    PLUGIN_ONNX_BACKEND,
)
from trt_plugin_kit.specs import nodes as plugin_nodes
from trt_plugin_kit.specs import spec as plugin_spec

ITEM_LENGTH = 16  # values per batch item: a fixed length keeps the engine's profile to the batch dimension
MAX_BATCH_SIZE = 64
OPSET = 19


def item_dims(reduce: bool) -> tuple[list[int], list[int]]:
    """Per-item dims of the inputs and of the outputs (a reducing op keeps its last axis as 1)."""
    return [ITEM_LENGTH], [1 if reduce else ITEM_LENGTH]


def onnx_model(spec: plugin_spec.PluginSpec, reduce: bool) -> onnx.ModelProto:
    """One plugin node, every input [batch, ITEM_LENGTH] FP32."""
    inputs, outputs = [t.name for t in spec.inputs], [t.name for t in spec.outputs]
    in_dims, out_dims = item_dims(reduce)
    node = plugin_nodes.make_node(spec.name, inputs, outputs, spec.folder.name)
    graph = helper.make_graph(
        [node],
        spec.folder.name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", *in_dims]) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", *out_dims]) for n in outputs],
    )
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid(PLUGIN_DOMAIN, 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="trt_plugin_kit new-plugin")
    onnx.checker.check_model(model)
    return model


def _tensors(names: list[str], dims: list[int]) -> str:
    dims_text = ", ".join(str(d) for d in dims)
    return ",\n".join(
        f'  {{\n    name: "{name}"\n    data_type: TYPE_FP32\n    dims: [ {dims_text} ]\n  }}'
        for name in names
    )


def _warmup(names: list[str], dims: list[int]) -> str:
    dims_text = ", ".join(str(d) for d in dims)
    inputs = "".join(
        f'    inputs {{\n      key: "{name}"\n      value {{\n        data_type: TYPE_FP32\n'
        f"        dims: [ {dims_text} ]\n        zero_data: true\n      }}\n    }}\n"
        for name in names
    )
    return f'model_warmup [\n  {{\n    name: "zero_items"\n    batch_size: 8\n{inputs}  }}\n]\n'


def configs(spec: plugin_spec.PluginSpec, reduce: bool) -> tuple[str, str]:
    """(config.pbtxt, configs/cpu.pbtxt): the same name, tensors and batch limit."""
    name = spec.folder.name
    inputs, outputs = [t.name for t in spec.inputs], [t.name for t in spec.outputs]
    in_dims, out_dims = item_dims(reduce)
    interface = (
        f'name: "{name}"\n{{backend}}max_batch_size: {MAX_BATCH_SIZE}\n'
        f"input [\n{_tensors(inputs, in_dims)}\n]\noutput [\n{_tensors(outputs, out_dims)}\n]\n"
    )
    batching = (
        "dynamic_batching {\n  preferred_batch_size: [ 16, 32, 64 ]\n"
        "  max_queue_delay_microseconds: {delay}\n}\n"
    )
    tensorrt = (
        f"# {name}, TensorRT variant (the default configuration): the {spec.name} plugin of\n"
        f"# libtrt_plugin_kit.so in an engine that `build_engines.py --model {name}` builds from\n"
        f"# {MODEL_ONNX_FILE} into 1/model.plan (profile: batch 1 to max_batch_size). Triton runs with the\n"
        "# TensorRT backend loading the plugin library (make serve: --backend-config=tensorrt,plugins=).\n"
        f"# The CPU variant (same name, inputs and outputs) is configs/{CPU_MODEL_CONFIG_NAME}.pbtxt.\n"
        + interface.replace("{backend}", 'platform: "tensorrt_plan"\n')
        + "instance_group [\n  {\n    count: 1\n    kind: KIND_GPU\n  }\n]\n"
        + batching.replace("{delay}", "100")
        + _warmup(inputs, in_dims)
    )
    cpu = (
        f"# {name}, CPU variant: same name, inputs and outputs as ../config.pbtxt. The\n"
        f"# {PLUGIN_ONNX_BACKEND} backend serves the same ONNX file as the engine ({MODEL_ONNX_FILE}),\n"
        f"# {spec.name} computed by its NumPy reference (trt_plugin_kit/serving/plugin_onnx_model.py).\n"
        "# `make serve` picks it on machines without TensorRT.\n"
        + interface.replace("{backend}", f'backend: "{PLUGIN_ONNX_BACKEND}"\n')
        + "instance_group [\n  {\n    count: 1\n    kind: KIND_CPU\n  }\n]\n"
        + batching.replace("{delay}", "500")
        + "parameters [\n  {\n    # The ONNX file, relative to this model's folder.\n"
        + f'    key: "onnx_model"\n    value: {{ string_value: "{MODEL_ONNX_FILE}" }}\n  }}\n]\n'
        + _warmup(inputs, in_dims)
    )
    return tensorrt, cpu


def create(spec: plugin_spec.PluginSpec, reduce: bool, model_repository: Path = MODEL_REPOSITORY) -> Path:
    """Writes model_repository/<name>/ for the plugin; refuses an existing folder."""
    folder = Path(model_repository) / spec.folder.name
    if folder.exists():
        raise FileExistsError(f"{folder} already exists")
    model = onnx_model(spec, reduce)  # before writing anything: a node the helper refuses leaves no folder
    tensorrt, cpu = configs(spec, reduce)
    (folder / "configs").mkdir(parents=True)
    (folder / "1").mkdir()
    onnx.save(model, folder / MODEL_ONNX_FILE)
    (folder / "config.pbtxt").write_text(tensorrt)
    (folder / "configs" / f"{CPU_MODEL_CONFIG_NAME}.pbtxt").write_text(cpu)
    (folder / "1" / "README.md").write_text(
        f"The version folder of `{spec.folder.name}`: `build_engines.py --model {spec.folder.name}` writes "
        "the TensorRT engine `model.plan` here on a GPU host. The CPU variant needs nothing here.\n"
    )
    return folder
