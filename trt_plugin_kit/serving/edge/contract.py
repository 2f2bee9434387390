"""What the supervisor (trt_plugin_kit.serving.server) and the edge process agree on; standard library only,
so that
serving stays importable by a system python3 without the edge's dependencies."""

from __future__ import annotations

from pathlib import Path

# The random per-start key tritonserver is given; only the edge receives it (by environment).
INTERNAL_KEY_ENV = "TRT_PLUGIN_KIT_INTERNAL_KEY"
# The compiled gRPC front's path, or "off" (the Python front serves gRPC); unset: build/edge-native's.
NATIVE_GRPC_ENV = "TRT_PLUGIN_KIT_EDGE_GRPC"
# Exit codes of the edge besides 0 (stopped) and 1 (could not listen).
EXIT_MODEL_DOWN = 3
EXIT_NEVER_READY = 4


def socket_paths(socket_dir: Path) -> dict[str, str]:
    """tritonserver's flags for listening in ``socket_dir``, and the addresses the edge dials.

    Triton appends ":<port>" to a gRPC address (the socket is ``grpc:0``), not to the HTTP ones.
    """
    return {
        "http_flag": f"unix:{socket_dir}/http",
        "grpc_flag": f"unix:{socket_dir}/grpc",
        "metrics_flag": f"unix:{socket_dir}/metrics",
        "http": str(Path(socket_dir) / "http"),
        "metrics": str(Path(socket_dir) / "metrics"),
        "grpc": f"unix:{socket_dir}/grpc:0",
    }
