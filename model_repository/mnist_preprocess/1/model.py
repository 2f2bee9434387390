"""mnist_preprocess: encoded PNG/JPEG bytes -> the `mnist` model's input (Triton Python backend, CPU).

Runs in both serving variants (in front of the TensorRT engine or the CPU model) as the first step of the
`mnist_pipeline` ensemble. The image work lives in trt_plugin_kit/serving_preprocess.py.

Every request is answered on its own: a request with an image that is not a PNG/JPEG, is empty, corrupt or
too large (bytes or pixels) gets an error naming the reason and its batch row, while the other requests
batched with it succeed.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

from trt_plugin_kit.serving_preprocess import MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS, ImageRejected, decode_digit


def _parameter(config: dict, key: str, default: int) -> int:
    return int(config.get("parameters", {}).get(key, {}).get("string_value", default))


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.max_image_bytes = _parameter(config, "max_image_bytes", MAX_IMAGE_BYTES)
        self.max_image_pixels = _parameter(config, "max_image_pixels", MAX_IMAGE_PIXELS)

    def execute(self, requests):
        return [self._answer(request) for request in requests]

    def _answer(self, request):
        encoded = pb_utils.get_input_tensor_by_name(request, "image_bytes").as_numpy()  # [batch, 1] objects
        images = []
        for row, data in enumerate(encoded.reshape(-1)):
            try:
                images.append(decode_digit(bytes(data), self.max_image_bytes, self.max_image_pixels))
            except ImageRejected as error:
                return pb_utils.InferenceResponse(
                    output_tensors=[],
                    error=pb_utils.TritonError(
                        f"mnist_preprocess: image_bytes[{row}]: {error}", pb_utils.TritonError.INVALID_ARG
                    ),
                )
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("image", np.stack(images))])
