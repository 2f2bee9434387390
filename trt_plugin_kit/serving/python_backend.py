"""How the repository's Python-backend models treat requests: each one answered on its own, shapes checked.

Used by the `mnist` and `l2norm` CPU models and by `mnist_preprocess` (model_repository/*/1/model.py). The
checks import nothing from Triton so that they can be used and tested anywhere; the response helpers import
`triton_python_backend_utils`, which exists only inside the Python backend's stub.

The rules (docs/SECURITY.md):

* Every request gets its own response whatever a library raises. A request the model refuses
  (:class:`RequestRejected`) gets INVALID_ARG with the reason; any other exception is logged with its
  traceback in the server log and answered with a short INTERNAL error that shows no server path. Nothing
  escapes ``execute()``: an exception there would fail every request of the dynamic batch and send the
  traceback to the clients.
* Input shapes are checked against the configuration before the data is used. Triton 2.51 keeps only the low
  32 bits of a declared batch size (HTTP binary and gRPC requests): a request declaring 2^32 rows arrives with
  no batch dimension at all, and 2^32 + 1 rows arrive as 1.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


class RequestRejected(ValueError):
    """The request is refused; the message (sent to the client) says why."""


@dataclass(frozen=True)
class InputSpec:
    """One input of a batching model: its name, per-item dims (-1: any length) and max_batch_size."""

    name: str
    dims: tuple[int, ...]
    max_batch_size: int

    @classmethod
    def from_config(cls, config: dict, name: str) -> InputSpec:
        """From the model configuration Triton hands to ``initialize`` (JSON: int64 dims come as strings)."""
        for tensor in config.get("input", []):
            if tensor["name"] == name:
                return cls(name, tuple(int(d) for d in tensor["dims"]), int(config["max_batch_size"]))
        raise KeyError(f"the model configuration has no input {name!r}")

    def expected(self) -> str:
        dims = ", ".join("any" if d < 0 else str(d) for d in self.dims)
        return f"[batch, {dims}] with 1 <= batch <= {self.max_batch_size}"

    def check(self, shape: Sequence[int]) -> int:
        """The batch size of a tensor of ``shape``; RequestRejected unless the shape is [batch, *dims]."""
        shape = [int(d) for d in shape]
        if len(shape) != len(self.dims) + 1:
            lost = " (no batch dimension: batch sizes of 2^32 and more are cut to 32 bits by the server)"
            raise RequestRejected(
                f"input '{self.name}' has shape {shape}, expected {self.expected()}"
                + (lost if len(shape) == len(self.dims) else "")
            )
        batch = shape[0]
        fixed_dims_match = all(
            want < 0 or got == want for got, want in zip(shape[1:], self.dims, strict=True)
        )
        if not 1 <= batch <= self.max_batch_size or not fixed_dims_match:
            raise RequestRejected(f"input '{self.name}' has shape {shape}, expected {self.expected()}")
        return batch


def nonfinite_rows(array) -> list[int]:
    """Batch rows of ``array`` ([batch, ...]) that hold NaN or +-Inf."""
    finite = np.isfinite(array).reshape(len(array), -1).all(axis=1)
    return np.flatnonzero(~finite).tolist()


# ------------------------------------------------------------- responses (inside the Python backend only)


def error_response(model: str, error: BaseException):
    """The response for a request that failed with ``error``: INVALID_ARG for a refusal; for anything else the
    traceback goes to the server log and the client gets a short INTERNAL error."""
    import triton_python_backend_utils as pb_utils

    if isinstance(error, RequestRejected):
        message, code = f"{model}: {error}", pb_utils.TritonError.INVALID_ARG
    else:
        details = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        pb_utils.Logger.log_error(f"{model}: request failed with an unexpected error:\n{details}")
        message = (
            f"{model}: internal error ({type(error).__name__}) while processing this request; "
            "the server log has the details"
        )
        code = pb_utils.TritonError.INTERNAL
    return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message, code))


def answer(model: str, compute: Callable[[], object]):
    """``compute()`` (a response), or the error response for whatever it raised."""
    try:
        return compute()
    except Exception as error:  # noqa: BLE001 - every request gets an answer, the model keeps serving
        return error_response(model, error)


def check_each(model: str, requests: Sequence, check: Callable[[object], object]) -> tuple[list, dict]:
    """``check(request)`` for every request alone, before the accepted ones run together: the responses (the
    error response of each request ``check`` raised for, None for the others) and {request index: what
    ``check`` returned} of the accepted ones, in request order."""
    responses: list = [None] * len(requests)
    accepted = {}
    for index, request in enumerate(requests):
        try:
            accepted[index] = check(request)
        except Exception as error:  # noqa: BLE001 - answered alone, the others go on
            responses[index] = error_response(model, error)
    return responses, accepted


def answer_each(model: str, requests: Sequence, respond: Callable[[object], object]) -> list:
    """``respond(request)`` for every request, each isolated from the others' failures."""
    return [answer(model, lambda request=request: respond(request)) for request in requests]
