"""Errors a person understands, each with its own exit code so scripts can tell them apart.

Every failure the clients expect ends up as a `ClientError` subclass whose message says what happened
and what to try next; `python -m clients` prints it on stderr and exits with `exit_code`.
"""

from __future__ import annotations

# Exit codes of `python -m clients` (documented in clients/README.md; argparse itself uses 2).
EXIT_OK = 0
EXIT_FAILED = 1  # a check failed (e.g. eval below --min-accuracy, a request the server refused)
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_MODEL_UNAVAILABLE = 4
EXIT_WRONG_MODEL = 5
EXIT_TIMEOUT = 6
EXIT_BAD_INPUT = 7
EXIT_ACCESS_DENIED = 8
EXIT_INTERRUPTED = 130


class ClientError(Exception):
    """Base class: `str(error)` is the complete message shown to the user."""

    exit_code = EXIT_FAILED


class UsageError(ClientError):
    """Flags that cannot work together (caught after argparse, which cannot express them)."""

    exit_code = EXIT_USAGE


class ServerUnreachableError(ClientError):
    """Connection refused / reset / DNS failure / gRPC UNAVAILABLE: safe to retry, nothing was run."""

    exit_code = EXIT_UNREACHABLE


class WrongProtocolError(ClientError):
    """The port answers the other protocol (gRPC on an HTTP port or the reverse): no retry can help."""

    exit_code = EXIT_UNREACHABLE


class ModelUnavailableError(ClientError):
    """The model is not in the repository, or is there but not ready (loading, failed, unloaded)."""

    exit_code = EXIT_MODEL_UNAVAILABLE


class WrongModelError(ClientError):
    """The served model does not have the tensors (names, dtypes, shapes) this command sends/reads."""

    exit_code = EXIT_WRONG_MODEL


class RequestTimeoutError(ClientError):
    """No answer within --timeout seconds."""

    exit_code = EXIT_TIMEOUT


class BadInputError(ClientError):
    """An input file or value the client cannot use; reported before anything is sent."""

    exit_code = EXIT_BAD_INPUT


class AccessDeniedError(ClientError):
    """The server restricts this API (shared memory, repository index) to clients with a key header."""

    exit_code = EXIT_ACCESS_DENIED


class InferenceError(ClientError):
    """The server answered with an error for a request (it keeps serving)."""

    exit_code = EXIT_FAILED


class RejectedInputError(InferenceError):
    """The server refused the data of a request (gRPC INVALID_ARGUMENT, HTTP 400): e.g. a blank picture."""

    exit_code = EXIT_BAD_INPUT


class SharedMemoryError(ClientError):
    """Shared memory was asked for but cannot be used (no CUDA, remote server, region errors)."""

    exit_code = EXIT_FAILED
