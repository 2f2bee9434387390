"""mnist_preprocess: encoded PNG/JPEG bytes -> the `mnist` model's input (Triton Python backend, CPU).

Runs in both serving variants (in front of the TensorRT engine or the CPU model) as the first step of the
`mnist_pipeline` ensemble. The image work lives in trt_plugin_kit/serving/preprocess.py.

Every request is answered on its own (trt_plugin_kit/serving/python_backend.py): a request whose tensor is not
[batch, 1], or with an image that is not a PNG/JPEG, is empty, corrupt, too large (bytes or pixels) or
holds no digit gets an INVALID_ARG error naming the reason and its batch row; whatever else Pillow or NumPy
raises is logged and answered with a short INTERNAL error. The other requests batched with it succeed.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

from trt_plugin_kit.serving.preprocess import ImageLimits, ImageRejected, decode_digit
from trt_plugin_kit.serving.python_backend import InputSpec, RequestRejected, answer_each

MODEL = "mnist_preprocess"


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.spec = InputSpec.from_config(config, "image_bytes")
        parameters = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        self.limits = ImageLimits.from_parameters(parameters)

    def execute(self, requests):
        return answer_each(MODEL, requests, self._answer)

    def _answer(self, request):
        encoded = pb_utils.get_input_tensor_by_name(request, "image_bytes").as_numpy()  # [batch, 1] objects
        self.spec.check(encoded.shape)
        images = []
        for row, data in enumerate(encoded.reshape(-1)):
            try:
                images.append(decode_digit(bytes(data), self.limits))
            except ImageRejected as error:
                raise RequestRejected(f"image_bytes[{row}]: {error}") from error
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("image", np.stack(images))])
