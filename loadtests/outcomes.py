"""How a load-test request is named and how its failure is reported: shared by the kinds written for our
models (workloads.py) and the kind built from any model's metadata (any_model.py), below both."""

from __future__ import annotations


class ResponseCheckError(Exception):
    """The server answered, but not with what the model must return."""


class RequestFailure(Exception):
    """What a failed request reports to Locust: the original error's type and message.

    Locust groups failures by repr(exception); tritonclient's exceptions have an empty repr, so the
    report would only say "InferenceServerException()" without this.
    """

    @classmethod
    def wrap(cls, error: Exception) -> RequestFailure:
        failure = cls(f"{type(error).__name__}: {error}")
        failure.__cause__ = error
        return failure

    def __repr__(self) -> str:
        return self.args[0]


def request_name(protocol: str, model: str, batch: int) -> str:
    """The name each request type has in every report, e.g. "grpc mnist b8": the protocol (Locust's request
    type column) and the name Locust shows beside it (locust_name)."""
    return f"{protocol} {locust_name(model, batch)}"


def locust_name(model: str, batch: int) -> str:
    """The request's name in Locust's own tables, next to its type (the protocol): "mnist b8"."""
    return f"{model} b{batch}"
