"""Serve this repository's models with NVIDIA Triton Inference Server (`make serve`), and keep them served.

Picks the variant by itself (--variant auto):
  tensorrt  NVIDIA GPU + TensorRT runtime + a tritonserver install (e.g. NVIDIA's tritonserver container):
            builds the plugin library and the engines if missing, starts Triton with the library in
            LD_PRELOAD on the default (TensorRT) model configurations.
  cpu       anywhere else: the tritonserver binary from the nvidia-pytriton wheel, Python backend on the CPU
            configurations (--model-config-name=cpu).
Waits until every model is ready, prints the endpoints, and supervises the server: when tritonserver dies
(a crash, the kernel's OOM killer), it says why, removes what the dead server left in /dev/shm, and starts
it again after a back-off (1 s, doubling up to 30 s; reset once a server has stayed up 60 s). Stops cleanly
on Ctrl-C or SIGTERM.

Examples:
  make serve
  make serve SERVE_ARGS="--http-port 9000 --grpc-port 9001 --metrics-port 9002"
  make serve SERVE_ARGS="--models mnist_pipeline,l2norm"   # some models only (and what their ensembles run)
  trt-plugin-kit serve --variant cpu --host 0.0.0.0 -- --log-verbose=1  # after --: Triton flags
Ports and address also come from TRITON_HTTP_PORT, TRITON_GRPC_PORT, TRITON_METRICS_PORT, TRITON_HOST.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import time
from pathlib import Path

from trt_plugin_kit.interface import (
    ADMIN_HEADER,
    ADMIN_KEY_ENV,
    MODEL_NAMES,
    MODEL_REPOSITORY,
    VARIANT_ENV,
    VARIANTS,
)
from trt_plugin_kit.serving.host import Ports, PortTaken, ServingError, choose_variant
from trt_plugin_kit.serving.server import EDGE_MODES, EXPECTED_CPU_ERROR_LINES, TritonServer
from trt_plugin_kit.tritonserver.options import add_server_location_arguments

MODELS_ENV = "TRITON_SERVE_MODELS"
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
EXIT_STACKS_AFTER_S = 10  # a stopped serve that has not exited by then says where it waits
EARLY_CRASH_RETRIES = 2  # starts killed by a signal before the server was ever ready, tried again
STABLE_AFTER_S = 60.0  # a server that stayed up this long resets the back-off


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="trt-plugin-kit serve",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--variant",
        choices=("auto", *VARIANTS),
        default=os.environ.get(VARIANT_ENV, "auto"),
        help=f"which model configurations to serve (default: auto-detect; env {VARIANT_ENV})",
    )
    # The same --host/--*-port flags and TRITON_* variables as the clients and load tests.
    add_server_location_arguments(parser, metrics=True, bind=True)
    parser.add_argument("--model-repository", type=Path, default=MODEL_REPOSITORY)
    parser.add_argument(
        "--models",
        type=lambda text: tuple(name.strip() for name in text.split(",") if name.strip()),
        default=tuple(n for n in os.environ.get(MODELS_ENV, "").split(",") if n.strip()),
        metavar="NAME,...",
        help="serve only these models of the repository (and the models their ensembles run), e.g. the kit's "
        f"while one of yours is not ready; default: all (env {MODELS_ENV})",
    )
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
    parser.add_argument(
        "--edge",
        choices=EDGE_MODES,
        default="on",
        help="on (default): the edge holds the public ports and tritonserver listens on private sockets "
        "only (docs/SECURITY.md); off: tritonserver on the public ports, for measuring the edge's cost only",
    )
    # The first hardening round's flag: --http-guard off is --edge off; auto and on are the edge.
    parser.add_argument("--http-guard", choices=("auto", "on", "off"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--restart",
        choices=("always", "never"),
        default="always",
        help="restart tritonserver when it dies (default always; 'never' exits with its code)",
    )
    parser.add_argument("tritonserver_args", nargs="*", help="after --: extra flags passed to tritonserver")
    return parser.parse_args(argv)


class _Stop(Exception):
    """Raised from the signal handler so that every wait unwinds into the shutdown path."""


def _raise_stop(signum, _frame):
    raise _Stop(signal.Signals(signum).name)


def _say(message: str, error: bool = False) -> None:
    print(f"trt-plugin-kit serve: {message}", file=sys.stderr if error else sys.stdout, flush=True)


def make_server(args: argparse.Namespace, variant: str) -> TritonServer:
    return TritonServer(
        variant=variant,
        ports=Ports(args.http_port, args.grpc_port, args.metrics_port),
        host=args.host,
        model_repository=args.model_repository,
        log_file=args.log_file,
        log_verbose=args.log_verbose,
        plugin_library=args.plugin_library,
        extra_args=args.tritonserver_args,
        edge="off" if args.http_guard == "off" else args.edge,
        models=args.models,
    )


def supervise(args: argparse.Namespace, variant: str) -> int:
    """Start, watch and restart tritonserver until a stop signal; returns the exit code of serve.py."""
    backoff, restarts, served, early_crashes = BACKOFF_FIRST_S, 0, False, 0
    while True:
        server = make_server(args, variant)
        try:
            server.start()
            server.wait_until_ready(args.ready_timeout)
            if not served:
                print_banner(server, args.host)
                served = True
            else:
                _say(f"tritonserver is serving again (restart {restarts}).")
            started = time.monotonic()
            reason = server.wait_for_exit()
        except ServingError as error:
            # A server that never came up, a port another process holds: configuration, not a crash. But
            # Triton 2.51 can abort while its models load under load (a Boost.Interprocess lock_exception in
            # the Python backend, seen in CI at cbaf18e): a first start killed by a signal is tried again.
            crash = server.killed_by_signal() and early_crashes < EARLY_CRASH_RETRIES
            if isinstance(error, PortTaken) or (not served and not crash):
                raise
            early_crashes += not served
            reason, started = str(error), time.monotonic()
        finally:
            log_tail = server.log_tail(20)
            # A second Ctrl-C must not interrupt the shutdown half-way.
            previous = (
                signal.signal(signal.SIGINT, signal.SIG_IGN),
                signal.signal(signal.SIGTERM, signal.SIG_IGN),
            )
            server.stop()  # also removes the dead server's /dev/shm regions and leftover backend stubs
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])
        _say(f"{reason}. Last lines of its log:\n{log_tail}", error=True)
        if args.restart == "never":
            return 1
        if time.monotonic() - started >= STABLE_AFTER_S:
            backoff = BACKOFF_FIRST_S
        restarts += 1
        _say(f"restarting tritonserver in {backoff:.0f} s (restart {restarts}) ...", error=True)
        time.sleep(backoff)
        backoff = min(backoff * 2, BACKOFF_MAX_S)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, _raise_stop)
    signal.signal(signal.SIGTERM, _raise_stop)
    try:
        variant, reason = choose_variant(args.variant)
        _say(f"variant {variant} ({reason})")
        return supervise(args, variant)
    except _Stop as stop:
        _say(f"\n{stop} received, stopping Triton ...".lstrip("\n"))
        _say("Triton stopped.")
        # Everything it started has ended; a process still here after EXIT_STACKS_AFTER_S prints where each of
        # its threads waits (seen once in CI: "Triton stopped." and no exit within 30 s).
        faulthandler.dump_traceback_later(EXIT_STACKS_AFTER_S)
        return 0
    except ServingError as error:
        _say(f"error: {error}", error=True)
        return 1


def print_banner(server: TritonServer, host: str) -> None:
    edge = (
        f"on: every request is checked and re-encoded; tritonserver listens on {server.isolation}"
        if server.guarded
        else "OFF (--edge off): tritonserver itself on the public ports; for measurements, not for clients"
    )
    lines = [
        "",
        "Triton Inference Server is ready.",
        f"  variant:  {server.describe_variant()}",
        f"  HTTP:     http://{server.http_url}",
        f"  edge:     {edge}",
        f"  gRPC:     {server.grpc_url}",
        f"  metrics:  {server.metrics_url}",
        f"  models:   {', '.join(server.loaded_models() or MODEL_NAMES)}",
        f"  bound to: {host}" + ("" if host not in ("0.0.0.0", "::") else " (all interfaces)"),
        f"  admin APIs (model repository, shared memory, trace, logging) need the header '{ADMIN_HEADER}' "
        f"with ${ADMIN_KEY_ENV}; " + ("open to that key." if server.admin_key else "closed: it is unset."),
        "  supervised: a server that dies is restarted (back-off 1 s .. 30 s).",
    ]
    if server.variant == "cpu":
        lines.append(
            "  expected on a CPU host: two 'E' lines at start ("
            + "; ".join(f"'{line}'" for line in EXPECTED_CPU_ERROR_LINES)
            + "): Triton's GPU build probing for a CUDA driver; harmless (docs/serving.md)."
        )
    lines.append("Stop with Ctrl-C.")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
