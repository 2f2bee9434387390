"""The builder's three kinds of failure and the exit codes ``build_engines.py`` reports them with."""

from __future__ import annotations

EXIT_FAILED = 1  # a build failed, an engine does not match config.pbtxt, or --verify failed
EXIT_USAGE = 2  # bad arguments, plugin config, model config or ONNX/config mismatch (nothing was built)
EXIT_ENVIRONMENT = 3  # no TensorRT, no GPU, no CUDA runtime


class UsageError(Exception):
    """Bad input from the user (arguments, files); reported without a traceback, exit code 2."""


class EnvironmentMissing(Exception):
    """TensorRT, the CUDA runtime or a GPU is missing; exit code 3."""


class BuildFailure(Exception):
    """Building, checking or verifying an engine failed; exit code 1."""


class CheckFailed(Exception):
    """A check found a problem; the message says what and what to do."""
