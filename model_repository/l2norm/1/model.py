"""l2norm on the CPU: Triton Python backend model computing y = x / sqrt(max(sum(x^2), eps)) with NumPy.

This is the CPU configuration (../configs/cpu.pbtxt) of the `l2norm` model; the default configuration runs
the same op as a TensorRT plugin. Each request is answered on its own
(trt_plugin_kit/serving/python_backend.py), so
one bad request in a dynamic batch gets its own error while the others succeed.

Defined behaviour for edge cases (documented in model_repository/README.md):
- a zero vector gives a zero vector (eps keeps the division finite, like TensorFlow's l2_normalize);
- a vector containing NaN or +-Inf is rejected with an error naming the offending row;
- an empty vector, one longer than the `max_vector_length` parameter, or a tensor that is not
  [batch, length] (e.g. a declared batch of 2^32 that Triton cut to nothing) is rejected.
Every check runs on the shape or on the request's own buffer before anything is allocated for it.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

from trt_plugin_kit.serving.python_backend import InputSpec, RequestRejected, answer_each, nonfinite_rows
from trt_plugin_kit.specs.reference import l2_normalize

MODEL = "l2norm"


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.spec = InputSpec.from_config(config, "vector")
        self.max_vector_length = int(config["parameters"]["max_vector_length"]["string_value"])

    def execute(self, requests):
        return answer_each(MODEL, requests, self._answer)

    def _answer(self, request):
        vectors = pb_utils.get_input_tensor_by_name(request, "vector").as_numpy()  # a view of the request
        normalized = self._normalize(vectors)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("normalized", normalized)])

    def _normalize(self, vectors: np.ndarray) -> np.ndarray:
        self.spec.check(vectors.shape)  # dtype (FP32) was checked by Triton
        length = vectors.shape[1]
        if length == 0:
            raise RequestRejected("input 'vector' is empty; send at least one element per vector")
        if length > self.max_vector_length:
            raise RequestRejected(
                f"input 'vector' has {length} elements; this server accepts at most {self.max_vector_length}"
            )
        bad_rows = nonfinite_rows(vectors)
        if bad_rows:
            raise RequestRejected(
                f"input 'vector' contains NaN or Inf in batch row(s) {bad_rows}; the L2 norm is undefined"
            )
        # The NumPy reference of the l2normalize plugin (eps = 1e-12, the plugin's default).
        return l2_normalize(vectors, axis=-1).astype(np.float32)
