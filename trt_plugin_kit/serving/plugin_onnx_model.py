"""The CPU stand-in of any plugin-flavour ONNX model: Triton's Python-based backend ``plugin_onnx``.

One implementation for every model (Triton's *Python-based backends*: ``make serve`` lays this file out as
``backends/plugin_onnx/model.py``; :func:`trt_plugin_kit.serving.server.prepare_cpu_backends`). A model folder
uses it with ``backend: "plugin_onnx"`` in ``configs/cpu.pbtxt``; no ``model.py`` of its own. It serves the
same ONNX file the engine builder consumes (parameter ``onnx_model``, relative to the model folder, default
``model.onnx``), plugin nodes computed by their NumPy references (:mod:`trt_plugin_kit.serving.plugin_graph`).

At load, the configuration's inputs and outputs must be the graph's (names, element types, ranks, fixed dims;
the batch dimension first when ``max_batch_size`` > 0), or the model fails to load saying which differs.
Each request is checked on its own (shape against the configuration, every input the same batch size); the
accepted requests of a dynamic batch run together when their shapes agree, else each alone; a request the
graph refuses (a reference's ValueError: shapes it cannot take) gets INVALID_ARG with the reason, the others
their answers (:mod:`trt_plugin_kit.serving.python_backend`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

from trt_plugin_kit.interface import MODEL_ONNX_FILE
from trt_plugin_kit.serving.plugin_graph import GraphError, PluginGraph, interface_mismatches
from trt_plugin_kit.serving.python_backend import InputSpec, RequestRejected, answer, check_each


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.name = config["name"]
        parameters = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        folder = Path(args["model_repository"])
        onnx_path = (folder / parameters.get("onnx_model", MODEL_ONNX_FILE)).resolve()
        if not onnx_path.is_file():
            raise pb_utils.TritonModelException(
                f"{self.name}: ONNX model {onnx_path} not found (parameter onnx_model, relative to {folder})"
            )
        try:
            self.graph = PluginGraph(onnx_path, int(parameters.get("intra_op_threads", "1")))
        except GraphError as error:
            raise pb_utils.TritonModelException(f"{self.name}: {onnx_path.name}: {error}") from error
        self.batching = int(config.get("max_batch_size", 0)) > 0
        problems = interface_mismatches(self.graph, config)
        if problems:
            raise pb_utils.TritonModelException(
                f"{self.name}: the configuration and {onnx_path.name} disagree: " + "; ".join(problems)
            )
        self.specs = [InputSpec.from_config(config, tensor["name"]) for tensor in config["input"]]
        self.outputs = {
            tensor["name"]: pb_utils.triton_string_to_numpy(tensor["data_type"])
            for tensor in config["output"]
        }

    def execute(self, requests):
        responses, accepted = check_each(self.name, requests, self._feeds)  # accepted: index -> feeds
        shapes = {tuple((k, v.shape[1:]) for k, v in feeds.items()) for feeds in accepted.values()}
        if self.batching and len(accepted) > 1 and len(shapes) == 1:
            try:
                names = list(next(iter(accepted.values())))
                merged = {n: np.concatenate([feeds[n] for feeds in accepted.values()]) for n in names}
                results = self._run(merged)
                split_at = np.cumsum([len(feeds[names[0]]) for feeds in accepted.values()])[:-1]
                parts = {n: np.split(array, split_at) for n, array in results.items()}
                for position, index in enumerate(accepted):
                    responses[index] = self._response({n: parts[n][position] for n in parts})
                return responses
            except Exception:  # noqa: BLE001, S110 - isolate the faulty request: each runs alone below
                pass
        for index, feeds in accepted.items():
            responses[index] = answer(self.name, lambda feeds=feeds: self._response(self._run(feeds)))
        return responses

    def _feeds(self, request) -> dict[str, np.ndarray]:
        feeds, batches = {}, set()
        for spec in self.specs:
            tensor = pb_utils.get_input_tensor_by_name(request, spec.name)
            if tensor is None:
                raise RequestRejected(f"input '{spec.name}' is missing")
            array = tensor.as_numpy()
            if self.batching:
                batches.add(spec.check(array.shape))
            feeds[spec.name] = array
        if len(batches) > 1:
            raise RequestRejected(f"the inputs have different batch sizes {sorted(batches)}; send one")
        return feeds

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            return self.graph.run(feeds, list(self.outputs))
        except (GraphError, ValueError, TypeError) as error:  # the references' words for a bad input
            raise RequestRejected(str(error)) from error

    def _response(self, results: dict[str, np.ndarray]):
        tensors = [
            pb_utils.Tensor(name, np.ascontiguousarray(results[name], dtype=dtype))
            for name, dtype in self.outputs.items()
        ]
        return pb_utils.InferenceResponse(output_tensors=tensors)
