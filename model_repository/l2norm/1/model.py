"""l2norm on the CPU: Triton Python backend model computing y = x / sqrt(max(sum(x^2), eps)) with NumPy.

This is the CPU configuration (../configs/cpu.pbtxt) of the `l2norm` model; the default configuration runs
the same op as a TensorRT plugin. Each request is answered on its own, so one bad request in a dynamic
batch gets its own error while the others succeed.

Defined behaviour for edge cases (documented in model_repository/README.md):
- a zero vector gives a zero vector (eps keeps the division finite, like TensorFlow's l2_normalize);
- a vector containing NaN or +-Inf is rejected with an error naming the offending row;
- an empty vector or one longer than the `max_vector_length` parameter is rejected.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

from trt_plugin_kit.reference import l2_normalize


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        parameters = config.get("parameters", {})
        self.max_vector_length = int(parameters["max_vector_length"]["string_value"])

    def execute(self, requests):
        return [self._answer(request) for request in requests]

    def _answer(self, request):
        try:
            vectors = pb_utils.get_input_tensor_by_name(request, "vector").as_numpy()
            normalized = self._normalize(vectors)
        except ValueError as error:
            return pb_utils.InferenceResponse(
                output_tensors=[],
                error=pb_utils.TritonError(f"l2norm: {error}", pb_utils.TritonError.INVALID_ARG),
            )
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("normalized", normalized)])

    def _normalize(self, vectors: np.ndarray) -> np.ndarray:
        # Triton already checked dtype (FP32) and rank ([batch, length]) against the configuration.
        length = vectors.shape[1]
        if length == 0:
            raise ValueError("input 'vector' is empty; send at least one element per vector")
        if length > self.max_vector_length:
            raise ValueError(
                f"input 'vector' has {length} elements; this server accepts at most {self.max_vector_length}"
            )
        finite = np.isfinite(vectors).all(axis=1)
        if not finite.all():
            bad_rows = np.flatnonzero(~finite).tolist()
            raise ValueError(
                f"input 'vector' contains NaN or Inf in batch row(s) {bad_rows}; the L2 norm is undefined"
            )
        # The NumPy reference of the l2normalize plugin (eps = 1e-12, the plugin's default).
        return l2_normalize(vectors, axis=-1).astype(np.float32)
