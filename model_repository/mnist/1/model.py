"""mnist on the CPU: the native LeNet-5 ONNX model (standard ops only) run by ONNX Runtime.

This is the CPU configuration (../configs/cpu.pbtxt) of the `mnist` model; the default configuration is a
TensorRT engine with this project's plugins. Same input `image` FP32 [batch, 1, 28, 28] and output
`probabilities` FP32 [batch, 10].

All requests of a dynamic batch go through ONNX Runtime in one call; if that call fails, each request is
retried alone so that only the faulty one gets an error.
"""

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
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
        images = [pb_utils.get_input_tensor_by_name(r, "image").as_numpy() for r in requests]
        try:
            batch = np.concatenate(images) if len(images) > 1 else images[0]
            probabilities = self._run(batch)
        except Exception:  # noqa: BLE001 - isolate the faulty request below
            return [self._answer_alone(image) for image in images]
        split_at = np.cumsum([len(image) for image in images])[:-1]
        return [self._response(part) for part in np.split(probabilities, split_at)]

    def _run(self, batch: np.ndarray) -> np.ndarray:
        return self.session.run([self.output_name], {self.input_name: batch})[0].astype(np.float32)

    def _answer_alone(self, image: np.ndarray):
        try:
            return self._response(self._run(image))
        except Exception as error:  # noqa: BLE001 - reported to the client, the model keeps serving
            return pb_utils.InferenceResponse(
                output_tensors=[], error=pb_utils.TritonError(f"mnist: {error}")
            )

    @staticmethod
    def _response(probabilities: np.ndarray):
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("probabilities", probabilities)])
