#!/usr/bin/env python3
"""Serve this repository's models with NVIDIA Triton Inference Server (`make serve`).

Picks the variant by itself (--variant auto):
  tensorrt  NVIDIA GPU + TensorRT runtime + a tritonserver install (e.g. NVIDIA's tritonserver container):
            builds the plugin library and the engines if missing, starts Triton with the library in
            LD_PRELOAD on the default (TensorRT) model configurations.
  cpu       anywhere else: the tritonserver binary from the nvidia-pytriton wheel, Python backend on the CPU
            configurations (--model-config-name=cpu).
Waits until every model is ready, prints the endpoints, and stops cleanly on Ctrl-C or SIGTERM.

Examples:
  make serve
  make serve SERVE_ARGS="--http-port 9000 --grpc-port 9001 --metrics-port 9002"
  python scripts/serve.py --variant cpu --host 0.0.0.0 -- --log-verbose=1   # after --: tritonserver flags
Ports and address also come from TRITON_HTTP_PORT, TRITON_GRPC_PORT, TRITON_METRICS_PORT, TRITON_HOST.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from trt_plugin_kit.serving import (  # noqa: E402
    ADMIN_HEADER,
    DEFAULT_GRPC_PORT,
    DEFAULT_HTTP_PORT,
    DEFAULT_METRICS_PORT,
    MODEL_NAMES,
    MODEL_REPOSITORY,
    Ports,
    ServingError,
    TritonServer,
    choose_variant,
)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"serve.py: {name}={value!r} is not a port number") from None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--variant",
        choices=("auto", "tensorrt", "cpu"),
        default=os.environ.get("TRITON_VARIANT", "auto"),
        help="which model configurations to serve (default: auto-detect; env TRITON_VARIANT)",
    )
    parser.add_argument(
        "--host",
        default=os.environ.get("TRITON_HOST", "127.0.0.1"),
        help="address to bind (default 127.0.0.1, this machine only; 0.0.0.0 for all interfaces)",
    )
    parser.add_argument("--http-port", type=int, default=_env_int("TRITON_HTTP_PORT", DEFAULT_HTTP_PORT))
    parser.add_argument("--grpc-port", type=int, default=_env_int("TRITON_GRPC_PORT", DEFAULT_GRPC_PORT))
    parser.add_argument(
        "--metrics-port", type=int, default=_env_int("TRITON_METRICS_PORT", DEFAULT_METRICS_PORT)
    )
    parser.add_argument("--model-repository", type=Path, default=MODEL_REPOSITORY)
    parser.add_argument(
        "--plugin-library",
        type=Path,
        default=Path(os.environ["TRT_PLUGIN_LIBRARY"]) if os.environ.get("TRT_PLUGIN_LIBRARY") else None,
        help="TensorRT variant: libtrt_plugin_kit.so to preload (default: build/trt-<version>/, built if "
        "missing; env TRT_PLUGIN_LIBRARY)",
    )
    parser.add_argument("--log-file", type=Path, help="write Triton's log there instead of the console")
    parser.add_argument("--log-verbose", type=int, default=0, help="Triton's verbose log level (0 = off)")
    parser.add_argument("--ready-timeout", type=float, default=300.0, help="seconds to wait for readiness")
    parser.add_argument("tritonserver_args", nargs="*", help="after --: extra flags passed to tritonserver")
    return parser.parse_args(argv)


class _Stop(Exception):
    """Raised from the signal handler so that every wait unwinds into the shutdown path."""


def _raise_stop(signum, _frame):
    raise _Stop(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, _raise_stop)
    signal.signal(signal.SIGTERM, _raise_stop)
    server = None
    try:
        variant, reason = choose_variant(args.variant)
        print(f"serve.py: variant {variant} ({reason})", flush=True)
        server = TritonServer(
            variant=variant,
            ports=Ports(args.http_port, args.grpc_port, args.metrics_port),
            host=args.host,
            model_repository=args.model_repository,
            log_file=args.log_file,
            log_verbose=args.log_verbose,
            plugin_library=args.plugin_library,
            extra_args=args.tritonserver_args,
        )
        server.start()
        server.wait_until_ready(args.ready_timeout)
        print_banner(server, args.host)
        returncode = server.process.wait()
        print(f"serve.py: tritonserver exited by itself with code {returncode}", file=sys.stderr)
        return returncode or 1
    except _Stop as stop:
        print(f"\nserve.py: {stop} received, stopping Triton ...", flush=True)
        return 0
    except ServingError as error:
        print(f"serve.py: error: {error}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            # A second Ctrl-C must not interrupt the shutdown half-way.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            server.stop()
            print("serve.py: Triton stopped.", flush=True)


def print_banner(server: TritonServer, host: str) -> None:
    lines = [
        "",
        "Triton Inference Server is ready.",
        f"  variant:  {server.describe_variant()}",
        f"  HTTP:     http://{server.http_url}",
        f"  gRPC:     {server.grpc_url}",
        f"  metrics:  {server.metrics_url}",
        f"  models:   {', '.join(MODEL_NAMES)}",
        f"  bound to: {host}" + ("" if host not in ("0.0.0.0", "::") else " (all interfaces)"),
        f"  admin APIs (model repository, shared memory, trace, logging) need the header '{ADMIN_HEADER}' "
        "with $TRITON_ADMIN_KEY; closed when it is unset.",
        "Stop with Ctrl-C.",
    ]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
