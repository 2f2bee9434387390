"""The options that say what the simulated users send, defined once for `python -m loadtests`, the Locust
file (Locust's own parser), the studies and the soak, with the shared vocabulary of
trt_plugin_kit/tritonserver/options.py; and how long and how many (durations, user counts) in Locust's own
terms.

The runner hands its settings to Locust as the very same flags (`locust_arguments`), and the tests parse
them back with the locustfile's definitions: no second set of names to drift apart.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

from loadtests import any_model
from loadtests.workloads import REQUEST_KINDS, WorkloadConfig
from trt_plugin_kit.tritonserver import options as cli_options
from trt_plugin_kit.tritonserver.options import (
    non_negative_int,
    parse_weights,
    positive_int,
    requests_per_second,
)

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MIX = ",".join(f"{kind}=1" for kind in REQUEST_KINDS)


def _locust_parse_timespan():
    """Locust's own parse_timespan (how `locust --run-time` reads a duration), loaded from its file: importing
    the locust package would monkey-patch this whole process for gevent."""
    package = importlib.util.find_spec("locust")  # finds the package without importing it
    path = Path(package.submodule_search_locations[0]) / "util" / "timespan.py"
    spec = importlib.util.spec_from_file_location("loadtests._locust_timespan", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.parse_timespan


parse_timespan = _locust_parse_timespan()


def parse_duration(text: str) -> float:
    """Locust's own time spans ("90", "30s", "2m", "1h30m") -> seconds, at least 1."""
    try:
        seconds = parse_timespan(str(text).strip())
    except ValueError:
        raise ValueError(f"bad duration {str(text)!r}: use e.g. 30s, 2m, 1h30m") from None
    if seconds <= 0:
        raise ValueError(f"duration {str(text)!r} must be longer than zero")
    return float(seconds)


def parse_user_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in str(text).split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--users takes whole numbers separated by commas, got {str(text)!r}") from None
    if not counts or any(count < 1 for count in counts):
        raise ValueError(f"--users needs at least one count, each >= 1; got {str(text)!r}")
    return counts


def run_time(text: str) -> str:
    parse_duration(text)
    return str(text).strip()


def milliseconds(text: str) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ValueError(f"expected a number of milliseconds, got {str(text)!r}") from None
    if not value > 0:
        raise ValueError(f"must be more than 0 ms, got {text}")
    return value


def request_mix(text: str) -> dict[str, int]:
    # Names besides our kinds are models of the server (loadtests/any_model.py).
    return parse_weights(text, REQUEST_KINDS + any_model.extra_kinds(text, REQUEST_KINDS), "request kind")


def add_workload_arguments(parser: Any) -> None:
    """--protocol, --mix, --batch-size, --l2norm-batch, --l2norm-dim, --timeout, --retries, --user-rate,
    --mnist-dir."""
    group = parser.add_argument_group("what the users send")
    cli_options.add_protocol_argument(group, mix=True)
    cli_options.add_env_argument(
        group,
        "--mix",
        variable="LOADTEST_MIX",
        default=DEFAULT_MIX,
        convert=request_mix,
        metavar="MIX",
        help=f"share of requests per kind ({', '.join(REQUEST_KINDS)}, or the name of any model the server "
        "serves), e.g. mnist=3,l2norm=1",
    )
    for flag, variable, default, what in (
        ("--batch-size", "LOADTEST_BATCH_SIZE", 8, "digits per request to `mnist`"),
        ("--l2norm-batch", "LOADTEST_L2NORM_BATCH", 4, "vectors per request to `l2norm`"),
        ("--l2norm-dim", "LOADTEST_L2NORM_DIM", 128, "vector length"),
    ):
        cli_options.add_env_argument(
            group, flag, variable=variable, default=default, convert=positive_int, metavar="N", help=what
        )
    cli_options.add_timeout_argument(group, DEFAULT_TIMEOUT_S, "LOADTEST_TIMEOUT")
    cli_options.add_env_argument(
        group,
        "--retries",
        variable="LOADTEST_RETRIES",
        default=0,
        convert=non_negative_int,
        metavar="N",
        help="times a request is sent again, on a new connection, after an error of the path to a server "
        "(connection refused, reset or closed; HTTP 502/503/504; gRPC UNAVAILABLE): inference is "
        "idempotent. A wrong answer or a model's error is never retried",
    )
    cli_options.add_env_argument(
        group,
        "--user-rate",
        variable="LOADTEST_USER_RATE",
        default=None,
        convert=requests_per_second,
        metavar="REQUESTS_PER_S",
        help="each user sends at most this many requests per second (Locust's constant_throughput); by "
        "default the next as soon as one returns, to measure what the server sustains",
    )
    any_model.add_arguments(group, cli_options)
    cli_options.add_mnist_dir_argument(
        group, "to send (without one and none in the default folder: the 10 sample digits of samples/digits/)"
    )


def workload_from_args(args: argparse.Namespace) -> WorkloadConfig:
    return WorkloadConfig(
        protocols=args.protocol,
        mix=args.mix,
        mnist_batch=args.batch_size,
        l2norm_batch=args.l2norm_batch,
        l2norm_dim=args.l2norm_dim,
        mnist_dir=str(args.mnist_dir) if args.mnist_dir else None,
        retries=args.retries,
        user_rate=args.user_rate,
        model_data=any_model.options_from_args(args),
    )


def weights_text(weights: dict[str, int]) -> str:
    return ",".join(f"{name}={weight}" for name, weight in weights.items())


def locust_arguments(workload: WorkloadConfig, timeout_s: float) -> list[str]:
    """The workload as the flags add_workload_arguments defines (what the Locust subprocess parses)."""
    arguments = [
        "--protocol",
        weights_text(workload.protocols),
        "--mix",
        weights_text(workload.mix),
        "--batch-size",
        str(workload.mnist_batch),
        "--l2norm-batch",
        str(workload.l2norm_batch),
        "--l2norm-dim",
        str(workload.l2norm_dim),
        "--timeout",
        f"{timeout_s:g}",
        "--retries",
        str(workload.retries),
    ]
    if workload.user_rate:
        arguments += ["--user-rate", repr(workload.user_rate)]
    if workload.mnist_dir:
        arguments += ["--mnist-dir", workload.mnist_dir]
    return arguments + any_model.locust_arguments(workload.model_data)
