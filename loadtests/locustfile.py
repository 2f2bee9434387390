"""Locust users for Triton over HTTP and gRPC, built on tritonclient.

Run through `python -m loadtests` (reports, thresholds) or directly with Locust, e.g.

    locust -f loadtests/locustfile.py --headless -u 4 -r 4 -t 30s --host 127.0.0.1 --grpc-port 8001

Layout: TritonUser (abstract) times every call and reports it to Locust; HttpTritonUser and
GrpcTritonUser only say how to connect and how to send; the task classes in loadtests.workloads say
what to send and check what comes back.
"""

# Locust has monkey-patched the standard library for gevent by the time it imports this file. gRPC's
# own event loop does not know about gevent: hook it in now, before any channel exists, or gRPC calls
# block the whole process and every simulated user with it.
import grpc.experimental.gevent

grpc.experimental.gevent.init_gevent()

import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

import gevent  # noqa: E402
import numpy as np  # noqa: E402
from locust import User, constant, constant_throughput, events  # noqa: E402
from locust.stats import StatsError  # noqa: E402

from loadtests.options import add_workload_arguments, workload_from_args  # noqa: E402
from loadtests.outcomes import RequestFailure, locust_name  # noqa: E402
from loadtests.workloads import TritonTask, is_retryable  # noqa: E402
from trt_plugin_kit.interface import DEFAULT_HOST, HOST_ENV  # noqa: E402
from trt_plugin_kit.tritonserver.options import ServerLocation, add_server_location_arguments  # noqa: E402
from trt_plugin_kit.tritonserver.protocol import Connection  # noqa: E402

LIVE_STATS_INTERVAL_S = 1.0


@events.init_command_line_parser.add_listener
def _add_arguments(parser) -> None:
    # The flags of `python -m loadtests` (loadtests/options.py), so that a run can be repeated with Locust
    # alone. The server's host is Locust's own --host (-H); without it $TRITON_HOST, else 127.0.0.1.
    group = parser.add_argument_group("Triton", "Where the Triton server is (loadtests/, same flags)")
    add_server_location_arguments(group, host=False)
    add_workload_arguments(parser)
    reports = parser.add_argument_group("loadtests reports")
    reports.add_argument(
        "--final-stats",
        default=None,
        help="write the statistics at the end of the run to this JSON file (python -m loadtests reads it)",
    )
    reports.add_argument(
        "--live-stats",
        default=None,
        help=f"rewrite the running totals to this JSON file every {LIVE_STATS_INTERVAL_S:g} s (progress)",
    )


def triton_host(locust_host: str | None) -> str:
    """Locust's --host as a host name: "http://h:8000" or "h" -> "h"."""
    host = locust_host or os.environ.get(HOST_ENV) or DEFAULT_HOST
    return urlsplit(host if "://" in host else f"//{host}").hostname or host


@events.init.add_listener
def _configure_users(environment, **_kwargs) -> None:
    # Command-line options exist only once Locust has parsed them, so the mix is applied here, before
    # any user is spawned (Locust reads `weight` and `tasks` when it starts users).
    options = environment.parsed_options
    if options is None:
        raise RuntimeError("loadtests/locustfile.py is configured from Locust's command line options")
    config = workload_from_args(options)
    tasks = config.build_tasks()
    location = ServerLocation(triton_host(options.host), options.http_port, options.grpc_port)
    for user_class in (HttpTritonUser, GrpcTritonUser):
        user_class.tasks = tasks
        user_class.weight = config.protocols[user_class.protocol]
        user_class.address = location.address(user_class.protocol)
        user_class.timeout_s = options.timeout
        user_class.retries = config.retries
        if config.user_rate:  # paced (--user-rate); else the class's closed loop with no think time
            user_class.wait_time = constant_throughput(config.user_rate)
    # Building the payload pools above blocked the event loop for a moment, and gevent's loop keeps the
    # time of its last iteration: without a refresh, Locust's --run-time timer (armed next) would count
    # that moment as part of the run and end it early.
    gevent.get_hub().loop.update_now()
    # A protocol of weight 0 gets no users: drop its class, as Locust does for classes declared so.
    environment.user_classes[:] = [cls for cls in environment.user_classes if cls.weight > 0]
    if not environment.user_classes:
        raise ValueError(f"--protocol {options.protocol!r} leaves no user class to run")
    if options.live_stats:
        gevent.spawn(_write_live_stats, environment, options.live_stats)


def _entry(stats_entry) -> dict:
    """One row of Locust's statistics (its stats API), as the reports read it."""
    has_requests = stats_entry.num_requests > 0
    return {
        "type": stats_entry.method or "",
        "name": stats_entry.name,
        "requests": stats_entry.num_requests,
        "failures": stats_entry.num_failures,
        "requests_per_s": stats_entry.total_rps,
        "current_requests_per_s": stats_entry.current_rps,
        "avg_ms": stats_entry.avg_response_time if has_requests else None,
        "max_ms": stats_entry.max_response_time if has_requests else None,
        "avg_response_bytes": stats_entry.avg_content_length if has_requests else None,
        **{
            key: stats_entry.get_response_time_percentile(fraction) if has_requests else None
            for key, fraction in (("p50_ms", 0.50), ("p95_ms", 0.95), ("p99_ms", 0.99))
        },
    }


def _write_json(path: str, data: dict) -> None:
    # Written aside and renamed: the runner never reads half a file.
    partial = f"{path}.partial"
    with open(partial, "w") as handle:
        json.dump(data, handle, indent=2)
    os.replace(partial, path)


def _write_live_stats(environment, path: str) -> None:
    while True:
        total = environment.stats.total
        _write_json(path, {"total": _entry(total), "users": environment.runner.user_count})
        gevent.sleep(LIVE_STATS_INTERVAL_S)


@events.test_stop.add_listener
def _write_final_stats(environment, **_kwargs) -> None:
    # Locust's --csv files are snapshots taken every second, so they miss the last moments of a run
    # (a failure there would go unnoticed). test_stop fires once every user has stopped: these are final.
    options = environment.parsed_options
    if options is None or not options.final_stats:
        return
    stats = environment.stats
    final = {
        "request_types": [
            _entry(e) for e in sorted(stats.entries.values(), key=lambda e: (e.method, e.name))
        ],
        "total": _entry(stats.total),
        "errors": [
            {
                "name": _report_name(e.method, e.name),
                "error": StatsError.parse_error(e.error),
                "occurrences": e.occurrences,
            }
            for e in stats.errors.values()
        ],
        "exceptions": [
            {"count": e["count"], "message": e["msg"]} for e in (environment.runner.exceptions or {}).values()
        ],
        # Requests sent again after an error of the path (--retries), by request name, and those errors.
        "retries": dict(sorted(RETRIES.items())),
        "retried_errors": dict(sorted(RETRIED_ERRORS.items())),
    }
    _write_json(options.final_stats, final)
    if options.live_stats:  # the last progress line shows the figures of the report
        _write_json(options.live_stats, {"total": final["total"], "users": 0, "final": True})


def _report_name(request_type: str | None, name: str) -> str:
    return f"{request_type} {name}" if request_type else name


RETRIES: dict[str, int] = {}  # requests sent again (--retries), by report name
RETRIED_ERRORS: dict[str, int] = {}  # the errors that made them


class TritonUser(User):
    """One simulated client: one connection, one request at a time, the next as soon as one returns."""

    abstract = True
    protocol: str
    address = ""
    timeout_s = 10.0
    retries = 0
    # Closed loop with no think time: each user measures what the server sustains, not what a human does.
    wait_time = constant(0)

    def on_start(self) -> None:
        self.connection = Connection(self.protocol, self.address, self.timeout_s)

    def on_stop(self) -> None:
        self.connection.close()

    def infer_with_retries(self, task: TritonTask, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One inference, sent again on a new connection after an error of the path, up to `retries` times.
        The time reported is the whole, retries included: what the client waited."""
        for attempt in range(self.retries + 1):
            try:
                return self.connection.infer(task.model, inputs, task.output_names)
            except Exception as error:
                if attempt == self.retries or not is_retryable(error):
                    raise
                name = _report_name(self.protocol, locust_name(task.model, task.batch))
                RETRIES[name] = RETRIES.get(name, 0) + 1
                kind = f"{type(error).__name__}: {str(error)[:80]}"
                RETRIED_ERRORS[kind] = RETRIED_ERRORS.get(kind, 0) + 1
                self.connection.close()
                self.connection = Connection(self.protocol, self.address, self.timeout_s)
                gevent.sleep(0.05 * (attempt + 1))
        raise AssertionError("not reached")

    def infer(self, task: TritonTask, inputs: dict[str, np.ndarray]) -> None:
        """Sends one request and reports it to Locust; every exception counts as a failure."""
        exception = None
        response_length = 0
        response_time_ms = None
        start = time.perf_counter()
        try:
            outputs = self.infer_with_retries(task, inputs)
            response_time_ms = (time.perf_counter() - start) * 1000.0
            response_length = sum(array.nbytes for array in outputs.values())
            task.check(inputs, outputs)
        # Any error (tritonclient's, a socket's, a wrong answer) is a failed request, not a crashed user.
        # gevent's GreenletExit, which stops users, derives from BaseException and passes through.
        except Exception as error:
            exception = RequestFailure.wrap(error)
            if response_time_ms is None:
                response_time_ms = (time.perf_counter() - start) * 1000.0
        # Locust shows the type (the protocol) and the name side by side: "grpc  mnist b8".
        self.environment.events.request.fire(
            request_type=self.protocol,
            name=locust_name(task.model, task.batch),
            response_time=response_time_ms,
            response_length=response_length,
            exception=exception,
            context={"protocol": self.protocol, "model": task.model, "batch": task.batch},
        )


class HttpTritonUser(TritonUser):
    """KServe v2 over HTTP/REST (binary tensor extension), via tritonclient.http (gevent-native)."""

    protocol = "http"


class GrpcTritonUser(TritonUser):
    """KServe v2 over gRPC, via tritonclient.grpc (made gevent-cooperative at the top of this file)."""

    protocol = "grpc"
