"""Locust users for Triton over HTTP and gRPC, built on tritonclient.

Run through `python -m loadtests` (reports, thresholds) or directly with Locust, e.g.

    locust -f loadtests/locustfile.py --headless -u 4 -r 4 -t 30s --triton-host 127.0.0.1

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
import time  # noqa: E402

import gevent  # noqa: E402
import numpy as np  # noqa: E402
import tritonclient.grpc  # noqa: E402
import tritonclient.http  # noqa: E402
import tritonclient.utils  # noqa: E402
from locust import User, constant, events  # noqa: E402
from locust.stats import StatsError  # noqa: E402

from loadtests.workloads import (  # noqa: E402
    PROTOCOLS,
    REQUEST_KINDS,
    RequestFailure,
    TritonTask,
    WorkloadConfig,
    is_retryable,
    parse_weights,
    request_name,
)


@events.init_command_line_parser.add_listener
def _add_arguments(parser) -> None:
    group = parser.add_argument_group("Triton", "What the Triton users send and where (loadtests/)")
    group.add_argument("--triton-host", default="127.0.0.1", env_var="TRITON_HOST", help="Triton host name")
    group.add_argument("--triton-http-port", type=int, default=8000, env_var="TRITON_HTTP_PORT")
    group.add_argument("--triton-grpc-port", type=int, default=8001, env_var="TRITON_GRPC_PORT")
    group.add_argument(
        "--protocol-mix",
        default="http=1,grpc=1",
        env_var="LOADTEST_PROTOCOLS",
        help="relative share of users per protocol, e.g. http=3,grpc=1",
    )
    group.add_argument(
        "--request-mix",
        default="mnist_pipeline=1,mnist=1,l2norm=1",
        env_var="LOADTEST_MIX",
        help="relative share of requests per kind: " + ", ".join(REQUEST_KINDS),
    )
    group.add_argument("--mnist-batch", type=int, default=8, env_var="LOADTEST_BATCH_SIZE")
    group.add_argument("--l2norm-batch", type=int, default=4, env_var="LOADTEST_L2NORM_BATCH")
    group.add_argument("--l2norm-dim", type=int, default=128, env_var="LOADTEST_L2NORM_DIM")
    group.add_argument(
        "--request-timeout",
        type=float,
        default=10.0,
        env_var="LOADTEST_REQUEST_TIMEOUT",
        help="seconds before a request counts as failed",
    )
    group.add_argument(
        "--retries",
        type=int,
        default=0,
        env_var="LOADTEST_RETRIES",
        help="times a request is sent again, on a new connection, after an error of the path to a server "
        "(connection refused, reset or closed, HTTP 502/503/504, gRPC UNAVAILABLE): inference is "
        "idempotent (0)",
    )
    group.add_argument("--mnist-images", default=None, env_var="MNIST_IMAGES", help="IDX images (.gz)")
    group.add_argument(
        "--final-stats",
        default=None,
        help="write the statistics at the end of the run to this JSON file (python -m loadtests reads it)",
    )


@events.init.add_listener
def _configure_users(environment, **_kwargs) -> None:
    # Command-line options exist only once Locust has parsed them, so the mix is applied here, before
    # any user is spawned (Locust reads `weight` and `tasks` when it starts users).
    options = environment.parsed_options
    if options is None:
        raise RuntimeError("loadtests/locustfile.py is configured from Locust's command line options")
    config = WorkloadConfig(
        protocols=parse_weights(options.protocol_mix, PROTOCOLS, "protocol"),
        mix=parse_weights(options.request_mix, REQUEST_KINDS, "request kind"),
        mnist_batch=options.mnist_batch,
        l2norm_batch=options.l2norm_batch,
        l2norm_dim=options.l2norm_dim,
        images_path=options.mnist_images,
    )
    tasks = config.build_tasks()
    for user_class in (HttpTritonUser, GrpcTritonUser):
        user_class.tasks = tasks
        user_class.weight = config.protocols[user_class.protocol]
        user_class.triton_host = options.triton_host
        user_class.request_timeout = options.request_timeout
        user_class.retries = options.retries
    HttpTritonUser.port = options.triton_http_port
    GrpcTritonUser.port = options.triton_grpc_port
    # Building the payload pools above blocked the event loop for a moment, and gevent's loop keeps the
    # time of its last iteration: without a refresh, Locust's --run-time timer (armed next) would count
    # that moment as part of the run and end it early.
    gevent.get_hub().loop.update_now()
    # A protocol of weight 0 gets no users: drop its class, as Locust does for classes declared so.
    environment.user_classes[:] = [cls for cls in environment.user_classes if cls.weight > 0]
    if not environment.user_classes:
        raise ValueError(f"--protocol-mix {options.protocol_mix!r} leaves no user class to run")


@events.test_stop.add_listener
def _write_final_stats(environment, **_kwargs) -> None:
    # Locust's --csv files are snapshots taken every second, so they miss the last moments of a run
    # (a failure there would go unnoticed). test_stop fires once every user has stopped: these are final.
    options = environment.parsed_options
    if options is None or not options.final_stats:
        return
    stats = environment.stats

    def entry(stats_entry) -> dict:
        has_requests = stats_entry.num_requests > 0
        return {
            "type": stats_entry.method or "",
            "name": stats_entry.name,
            "requests": stats_entry.num_requests,
            "failures": stats_entry.num_failures,
            "requests_per_s": stats_entry.total_rps,
            "avg_ms": stats_entry.avg_response_time if has_requests else None,
            "max_ms": stats_entry.max_response_time if has_requests else None,
            "avg_response_bytes": stats_entry.avg_content_length if has_requests else None,
            **{
                key: stats_entry.get_response_time_percentile(fraction) if has_requests else None
                for key, fraction in (("p50_ms", 0.50), ("p95_ms", 0.95), ("p99_ms", 0.99))
            },
        }

    final = {
        "request_types": [entry(e) for _, e in sorted(stats.entries.items())],
        "total": entry(stats.total),
        "errors": [
            {"name": e.name, "error": StatsError.parse_error(e.error), "occurrences": e.occurrences}
            for e in stats.errors.values()
        ],
        "exceptions": [
            {"count": e["count"], "message": e["msg"]} for e in (environment.runner.exceptions or {}).values()
        ],
        # Requests sent again after an error of the path (--retries), by request name, with those errors.
        "retries": dict(sorted(RETRIES.items())),
        "retried_errors": dict(sorted(RETRIED_ERRORS.items())),
    }
    with open(options.final_stats, "w") as handle:
        json.dump(final, handle, indent=2)


RETRIES: dict[str, int] = {}  # requests sent again (--retries), by request name
RETRIED_ERRORS: dict[str, int] = {}  # the errors that made them


class TritonUser(User):
    """One simulated client: one connection, one request at a time, the next as soon as one returns."""

    abstract = True
    protocol: str
    port: int
    triton_host = "127.0.0.1"
    request_timeout = 10.0
    retries = 0
    # Closed loop with no think time: each user measures what the server sustains, not what a human does.
    wait_time = constant(0)

    def on_start(self) -> None:
        self.client = self.connect(f"{self.triton_host}:{self.port}")

    def on_stop(self) -> None:
        self.client.close()

    def connect(self, url: str):
        raise NotImplementedError

    def send(self, task: TritonTask, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Runs one inference; returns the requested outputs by name."""
        raise NotImplementedError

    def send_with_retries(self, task: TritonTask, inputs: dict[str, np.ndarray], name: str):
        """send(), again on a new connection after an error of the path, up to `retries` times. The time
        reported is the whole, retries included: what the client waited."""
        for attempt in range(self.retries + 1):
            try:
                return self.send(task, inputs)
            except Exception as error:
                if attempt == self.retries or not is_retryable(error):
                    raise
                RETRIES[name] = RETRIES.get(name, 0) + 1
                kind = f"{type(error).__name__}: {str(error)[:80]}"
                RETRIED_ERRORS[kind] = RETRIED_ERRORS.get(kind, 0) + 1
                self.client.close()
                self.client = self.connect(f"{self.triton_host}:{self.port}")
                gevent.sleep(0.05 * (attempt + 1))
        raise AssertionError("not reached")

    def infer(self, task: TritonTask, inputs: dict[str, np.ndarray]) -> None:
        """Sends one request and reports it to Locust; every exception counts as a failure."""
        exception = None
        response_length = 0
        response_time_ms = None
        name = request_name(self.protocol, task.model, task.batch)
        start = time.perf_counter()
        try:
            outputs = self.send_with_retries(task, inputs, name)
            response_time_ms = (time.perf_counter() - start) * 1000.0
            response_length = sum(array.nbytes for array in outputs.values())
            task.check(inputs, outputs)
        # Any error (tritonclient's, a socket's, a wrong answer) is a failed request, not a crashed user.
        # gevent's GreenletExit, which stops users, derives from BaseException and passes through.
        except Exception as error:
            exception = RequestFailure.wrap(error)
            if response_time_ms is None:
                response_time_ms = (time.perf_counter() - start) * 1000.0
        self.environment.events.request.fire(
            request_type=self.protocol,
            name=name,
            response_time=response_time_ms,
            response_length=response_length,
            exception=exception,
            context={"protocol": self.protocol, "model": task.model, "batch": task.batch},
        )


class HttpTritonUser(TritonUser):
    """KServe v2 over HTTP/REST (binary tensor extension), via tritonclient.http (gevent-native)."""

    protocol = "http"
    port = 8000

    def connect(self, url: str):
        return tritonclient.http.InferenceServerClient(
            url, connection_timeout=self.request_timeout, network_timeout=self.request_timeout
        )

    def send(self, task: TritonTask, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        infer_inputs = []
        for input_name, array in inputs.items():
            infer_input = tritonclient.http.InferInput(input_name, list(array.shape), _triton_dtype(array))
            infer_input.set_data_from_numpy(array, binary_data=True)
            infer_inputs.append(infer_input)
        requested = [tritonclient.http.InferRequestedOutput(n, binary_data=True) for n in task.output_names]
        return _outputs(self.client.infer(task.model, infer_inputs, outputs=requested), task.output_names)


class GrpcTritonUser(TritonUser):
    """KServe v2 over gRPC, via tritonclient.grpc (made gevent-cooperative at the top of this file)."""

    protocol = "grpc"
    port = 8001

    def connect(self, url: str):
        return tritonclient.grpc.InferenceServerClient(url)

    def send(self, task: TritonTask, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        infer_inputs = []
        for input_name, array in inputs.items():
            infer_input = tritonclient.grpc.InferInput(input_name, list(array.shape), _triton_dtype(array))
            infer_input.set_data_from_numpy(array)
            infer_inputs.append(infer_input)
        requested = [tritonclient.grpc.InferRequestedOutput(n) for n in task.output_names]
        result = self.client.infer(
            task.model, infer_inputs, outputs=requested, client_timeout=self.request_timeout
        )
        return _outputs(result, task.output_names)


def _triton_dtype(array: np.ndarray) -> str:
    return "BYTES" if array.dtype == np.object_ else tritonclient.utils.np_to_triton_dtype(array.dtype)


def _outputs(result, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    # Missing outputs are left out here and reported by the task's check.
    arrays = {name: result.as_numpy(name) for name in names}
    return {name: array for name, array in arrays.items() if array is not None}
