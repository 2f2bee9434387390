"""The edge process: public HTTP, gRPC and metrics ports in front of a tritonserver on private sockets.

Run by trt_plugin_kit.serving.server.TritonServer (``python -m trt_plugin_kit.serving.edge ...``). Keys come
from the
environment, never the command line (other users can read command lines): $TRITON_ADMIN_KEY, the
operator's key a client must send for the restricted APIs (unset: they are closed), and
$TRT_PLUGIN_KIT_INTERNAL_KEY, the random per-start key tritonserver was given, which only this process
sends. Exit codes: 0 stopped, 3 a model stopped answering (the supervisor restarts tritonserver), 4
tritonserver never became ready.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from aiohttp import web

from trt_plugin_kit.interface import ADMIN_KEY_ENV
from trt_plugin_kit.serving.edge import limits
from trt_plugin_kit.serving.edge.budget import mmap_large_buffers
from trt_plugin_kit.serving.edge.contract import EXIT_MODEL_DOWN, EXIT_NEVER_READY, INTERNAL_KEY_ENV
from trt_plugin_kit.serving.edge.grpc_front import GrpcFront
from trt_plugin_kit.serving.edge.http_front import HttpFront, metrics_handler
from trt_plugin_kit.serving.edge.native_front import NativeGrpcFront, configuration, native_binary
from trt_plugin_kit.serving.edge.upstream import Upstream

try:  # aiohttp's recommended loop: measured here, about 8 % less of the edge's CPU per HTTP request
    from uvloop import run as run_loop
except ImportError:  # pragma: no cover - a platform without uvloop (it is a dependency elsewhere)
    from asyncio import run as run_loop

log = logging.getLogger("trt_plugin_kit.serving.edge")


def _endpoint(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


async def serve(args: argparse.Namespace) -> int:
    mmap_large_buffers()
    upstream = Upstream(args.socket_dir, os.environ[INTERNAL_KEY_ENV])
    admin_key = os.environ.get(ADMIN_KEY_ENV) or None
    state = {"why_not_ready": "tritonserver is starting", "exit": 0}
    stop = asyncio.Event()

    def ready() -> str | None:
        return state["why_not_ready"]

    def model_down(model: str, reason: str) -> None:
        state["why_not_ready"] = f"model {model!r} stopped answering"
        state["exit"] = EXIT_MODEL_DOWN
        say_why(args, f"model {model!r} stopped answering: {reason}")
        stop.set()

    upstream.on_model_down = model_down
    await upstream.open()
    http_front = HttpFront(upstream, admin_key, ready)
    grpc_front = GrpcFront(upstream, admin_key, ready)
    await grpc_front.open()

    http_host, http_port = _endpoint(args.http)
    http_runner = web.ServerRunner(http_front.server())
    await http_runner.setup()
    await web.TCPSite(http_runner, http_host, http_port, backlog=limits.MAX_HTTP_CONNECTIONS).start()
    metrics_host, metrics_port = _endpoint(args.metrics)
    metrics_runner = web.ServerRunner(
        web.Server(
            lambda request: metrics_handler(upstream, request), keepalive_timeout=limits.HEADER_TIMEOUT_S
        )
    )
    await metrics_runner.setup()
    await web.TCPSite(metrics_runner, metrics_host, metrics_port).start()
    binary = native_binary()
    grpc_server = grpc_front.server(public=binary is None)
    grpc_host, grpc_port = _endpoint(args.grpc)
    address = f"[{grpc_host}]:{grpc_port}" if ":" in grpc_host else args.grpc
    native, private_dir = None, None
    if binary is not None:
        # The compiled front holds the public port; this one answers what it relays, on a private socket.
        private_dir = tempfile.mkdtemp(prefix="trt-edge-")
        relay = f"unix:{private_dir}/grpc-front"
        if not grpc_server.add_insecure_port(relay):
            raise OSError(f"cannot listen on {relay} (the native gRPC front's relay)")
        await grpc_server.start()
        relayed = sorted(set(grpc_front.handlers()) - {"ModelInfer"})
        config = configuration(address, upstream.paths["grpc"], relay, relayed, grpc_tls_files(args))
        native = NativeGrpcFront(binary, config, lambda model: upstream.record(model, False))
        try:
            await native.start()
        except OSError as error:
            raise OSError(f"cannot listen on {args.grpc} (gRPC): {error}") from None
    else:
        log.warning(
            "the native gRPC front is not built (make edge-native, with libnghttp2-dev): gRPC is served by "
            "the Python front, at several times the CPU per call"
        )
        credentials = grpc_tls_credentials(args)
        try:
            if credentials is None:
                bound = grpc_server.add_insecure_port(address)
            else:
                bound = grpc_server.add_secure_port(address, credentials)
        except RuntimeError:
            bound = 0
        if bound != grpc_port:
            raise OSError(
                f"cannot listen on {args.grpc} (gRPC): the port is taken or the address is not local"
            )
        await grpc_server.start()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        try:
            await asyncio.wait_for(upstream.load_models(args.ready_timeout), args.ready_timeout + 5)
            if native is not None:
                native.set_models(upstream.models)
            state["why_not_ready"] = None
            if args.models_file is not None:
                args.models_file.write_text(json.dumps(sorted(upstream.models)) + "\n")
        except (TimeoutError, asyncio.TimeoutError, OSError) as error:
            say_why(args, str(error))
            state["exit"] = EXIT_NEVER_READY
            stop.set()
        await stop.wait()
    finally:
        if native is not None:
            await native.stop()
        if private_dir is not None:
            shutil.rmtree(private_dir, ignore_errors=True)
        await grpc_server.stop(grace=1)
        await http_runner.cleanup()
        await metrics_runner.cleanup()
        await grpc_front.close()
        await upstream.close()
    return state["exit"]


def say_why(args: argparse.Namespace, why: str) -> None:
    """Why the edge stops: on stderr and in --status-file, where the supervisor reads it."""
    print(f"edge: {why}", file=sys.stderr, flush=True)
    if args.status_file is not None:
        args.status_file.write_text(why + "\n")


def grpc_tls_files(args: argparse.Namespace) -> dict | None:
    """Triton's own --grpc-* TLS flags as the native front takes them (it reads the files itself)."""
    if not (args.grpc_use_ssl or args.grpc_use_ssl_mutual):
        return None
    return {
        "cert": args.grpc_server_cert.resolve(),
        "key": args.grpc_server_key.resolve(),
        "root": args.grpc_root_cert.resolve() if args.grpc_root_cert else None,
        "mutual": args.grpc_use_ssl_mutual,
    }


def grpc_tls_credentials(args: argparse.Namespace):
    """Server credentials from Triton's own --grpc-* TLS flags, which the edge takes in Triton's place."""
    import grpc  # noqa: PLC0415

    if not (args.grpc_use_ssl or args.grpc_use_ssl_mutual):
        return None
    return grpc.ssl_server_credentials(
        [(args.grpc_server_key.read_bytes(), args.grpc_server_cert.read_bytes())],
        root_certificates=args.grpc_root_cert.read_bytes() if args.grpc_root_cert else None,
        require_client_auth=args.grpc_use_ssl_mutual,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trt_plugin_kit.serving.edge", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--http", required=True, help="HOST:PORT of the public HTTP port")
    parser.add_argument("--grpc", required=True, help="HOST:PORT of the public gRPC port")
    parser.add_argument("--metrics", required=True, help="HOST:PORT of the public metrics port")
    parser.add_argument("--socket-dir", type=Path, required=True, help="tritonserver's private sockets")
    parser.add_argument("--ready-timeout", type=float, default=300.0)
    parser.add_argument("--status-file", type=Path, help="where to write why the edge stopped")
    parser.add_argument("--models-file", type=Path, help="where to write the served models (JSON list)")
    # TLS on the public gRPC port: tritonserver's own flags (TritonServer moves them here from Triton's).
    truth = {"true": True, "1": True, "false": False, "0": False}
    parser.add_argument("--grpc-use-ssl", type=lambda v: truth[v.lower()], default=False)
    parser.add_argument("--grpc-use-ssl-mutual", type=lambda v: truth[v.lower()], default=False)
    parser.add_argument("--grpc-server-cert", type=Path)
    parser.add_argument("--grpc-server-key", type=Path)
    parser.add_argument("--grpc-root-cert", type=Path)
    args = parser.parse_args(argv)
    if INTERNAL_KEY_ENV not in os.environ:
        parser.error(f"${INTERNAL_KEY_ENV} must hold the key tritonserver was started with")
    logging.basicConfig(level=logging.WARNING, format="edge: %(message)s", stream=sys.stderr)
    try:
        return run_loop(serve(args))
    except OSError as error:
        say_why(args, f"cannot listen: {error}")
        return 1
