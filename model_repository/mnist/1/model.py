"""mnist on the CPU: the native LeNet-5 ONNX model (standard ops only) run by ONNX Runtime.

This is the CPU configuration (../configs/cpu.pbtxt) of the `mnist` model; the default configuration is a
TensorRT engine with this project's plugins. Same input `image` FP32 [batch, 1, 28, 28] and output
`probabilities` FP32 [batch, 10].

Each request is checked on its own first: a tensor that is not [batch, 1, 28, 28] (e.g. a declared batch of
2^32 that Triton cut to nothing) or that holds NaN/Inf is refused with INVALID_ARG. The accepted requests of a
dynamic batch go through ONNX Runtime in one call; if that call fails, each is retried alone so that only the
faulty one gets an error (trt_plugin_kit/serving/python_backend.py).
"""

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils

from trt_plugin_kit.serving.python_backend import (
    InputSpec,
    RequestRejected,
    answer,
    check_each,
    nonfinite_rows,
)

MODEL = "mnist"


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.spec = InputSpec.from_config(config, "image")
        parameters = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        model_path = (Path(args["model_repository"]) / parameters["onnx_model"]).resolve()
        if not model_path.is_file():
            raise pb_utils.TritonModelException(f"mnist: ONNX model {model_path} not found")
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(parameters.get("intra_op_threads", "1"))
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        self.input_name = self.session.get_inputs()[0].name
        self.output_name = self.session.get_outputs()[0].name

    def execute(self, requests):
        responses, accepted = check_each(MODEL, requests, self._checked_images)  # accepted: index -> images
        if accepted:
            try:
                parts = list(accepted.values())
                probabilities = self._run(parts[0] if len(parts) == 1 else np.concatenate(parts))
                split_at = np.cumsum([len(images) for images in accepted.values()])[:-1]
                for index, part in zip(accepted, np.split(probabilities, split_at), strict=True):
                    responses[index] = self._response(part)
            except Exception:  # noqa: BLE001 - isolate the faulty request: each runs alone
                for index, images in accepted.items():
                    responses[index] = answer(MODEL, lambda images=images: self._response(self._run(images)))
        return responses

    def _checked_images(self, request) -> np.ndarray:
        images = pb_utils.get_input_tensor_by_name(request, "image").as_numpy()
        self.spec.check(images.shape)
        bad_rows = nonfinite_rows(images)
        if bad_rows:
            raise RequestRejected(
                f"input 'image' contains NaN or Inf in batch row(s) {bad_rows}; "
                "pixels must be finite (pixel / 255, in [0, 1])"
            )
        return images

    def _run(self, batch: np.ndarray) -> np.ndarray:
        return self.session.run([self.output_name], {self.input_name: batch})[0].astype(np.float32)

    @staticmethod
    def _response(probabilities: np.ndarray):
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("probabilities", probabilities)])
