"""`python -m loadtests.soak`: a sustained mixed load against Triton, with the server's memory and counters
sampled (the serving soak; records in records/soak/).

Starts the server the way `make serve` does (--start-server: the TensorRT variant on a GPU host, PyTriton's
CPU tritonserver elsewhere), or uses one already running at --host / --http-port / --grpc-port /
--metrics-port (the shared flags and TRITON_* variables of every tool; --server-pid for memory samples).
Worker threads then send, for `--duration`:

  good requests, over the protocols of --protocol: mnist (raw FP32 batches), mnist_pipeline (PNG bytes),
    l2norm (vectors), each answer checked (probability rows sum to 1, vectors match the NumPy reference);
  bad requests (a `--bad-share` of all): corrupt PNG, bytes that are no image, wrong shape, NaN vector,
    batch above max_batch_size, unknown model; each must be refused with an error that names the problem.

Every `--sample-interval` seconds it records the server's resident memory (tritonserver and its child
processes, e.g. the Python backend stubs), Triton's Prometheus counters and the throughput. Requests are
counted per model the way a user reads them (sent, answered, refused: one refused request is one failure)
next to Triton's own statistics, which count differently (loadtests/soak/report.py says how). The record
goes to OUT/NAME.json, OUT/NAME.md and OUT/NAME.png (throughput, memory and latency over time); OUT is
records/soak unless --out says otherwise.

Passes (exit 0) when no good request failed, every bad request was refused cleanly, the server stayed up and
the memory drift (mean of the last third of the samples after the warm-up minus the mean of the first third)
is at most --max-drift-mib. Exit 1: a check failed; 2: the soak could not run.

Examples:
  python -m loadtests.soak --start-server --duration 10m --out records/soak        # own server, 10 minutes
  python -m loadtests.soak --start-server --duration 60s --workers 4 --bad-share 0.2 # the CI size
  python -m loadtests.soak --grpc-port 9001 --http-port 9000 --metrics-port 9002 \\
      --server-pid "$(pgrep -f bin/tritonserver)"                                     # a running server
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from tritonclient.utils import InferenceServerException

from loadtests.options import parse_duration
from loadtests.record import RECORDS_DIR, Record
from loadtests.soak.page import summary_lines, write_results
from loadtests.soak.report import Measured, count_delta, soak_figures, weights_text
from loadtests.soak.requests import MODELS, BadRequest, bad_requests, good_tasks
from loadtests.soak.server import SoakServer, ensemble_models, settled_request_counts, triton_request_counts
from loadtests.soak.workers import Mix, Sampler, Tally, Worker, run_load
from loadtests.workloads import digit_source
from trt_plugin_kit.serving.host import ServingError
from trt_plugin_kit.tritonserver import options as cli_options
from trt_plugin_kit.tritonserver.options import (
    ServerLocation,
    converter,
    positive_int,
    positive_seconds,
    requests_per_second,
)
from trt_plugin_kit.tritonserver.protocol import NotReady

STUDY = "soak"
PROGRAM = "python -m loadtests.soak"
EXIT_PASSED, EXIT_FAILED, EXIT_ERROR = 0, 1, 2
DEFAULT_TIMEOUT_S = 60.0


# ------------------------------------------------------------------------------------------ arguments


def share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"--bad-share must be in [0, 1), got {text}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    location = cli_options.add_server_location_arguments(parser, metrics=True)
    location.add_argument(
        "--start-server", action="store_true", help="start Triton like `make serve`, on free loopback ports"
    )
    cli_options.add_server_variant_argument(location)
    location.add_argument(
        "--server-pid", type=converter(positive_int), help="a running server's PID, for memory samples"
    )
    location.add_argument(
        "--wait-for-server",
        type=converter(positive_seconds),
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for a running server and its models to be ready (30)",
    )
    load = parser.add_argument_group("load")
    load.add_argument(
        "--duration", type=converter(parse_duration), default=600.0, help="how long to load (10m)"
    )
    load.add_argument("--workers", type=converter(positive_int), default=4, help="client threads (4)")
    load.add_argument(
        "--rate",
        type=converter(requests_per_second),
        default=None,
        metavar="REQUESTS_PER_S",
        help="at most this many requests per second, over all workers (default: each worker sends its next "
        "request as soon as the last is answered)",
    )
    load.add_argument(
        "--bad-share",
        type=converter(share),
        default=0.1,
        help="share of requests that are bad on purpose (0.1)",
    )
    cli_options.add_protocol_argument(load, mix=True)
    cli_options.add_timeout_argument(load, DEFAULT_TIMEOUT_S)
    cli_options.add_mnist_dir_argument(load, "to send")
    load.add_argument("--seed", type=int, default=0, help="seed of the request mix (0)")
    record = parser.add_argument_group("measurements and results")
    record.add_argument(
        "--sample-interval",
        type=converter(positive_seconds),
        default=5.0,
        help="seconds between memory/metrics samples (5)",
    )
    record.add_argument(
        "--warmup",
        type=converter(parse_duration),
        default=None,
        help="first part left out of the memory drift (default: 10%% of the duration, at most 60s)",
    )
    record.add_argument(
        "--max-drift-mib",
        type=float,
        default=64.0,
        help="largest accepted growth of the server's memory, last third vs first third (64)",
    )
    record.add_argument(
        "--out", type=Path, default=RECORDS_DIR / STUDY, help="folder for the record (records/soak)"
    )
    record.add_argument("--name", default=None, help="file name stem (default soak-YYYYMMDD)")
    args = parser.parse_args(argv)
    if args.warmup is None:
        args.warmup = min(0.1 * args.duration, 60.0)
    args.name = args.name or f"soak-{datetime.now(timezone.utc):%Y%m%d}"
    return args


# ------------------------------------------------------------------------------------------ the run


def settings(args: argparse.Namespace, tasks: list, bad: list[BadRequest], digits: str) -> dict:
    """The soak's settings as its record keeps them."""
    return {
        "workers": args.workers,
        "rate_per_s": args.rate,
        "bad_share": args.bad_share,
        "sample_interval_s": args.sample_interval,
        "warmup_s": round(args.warmup, 1),
        "max_drift_mib": args.max_drift_mib,
        "seed": args.seed,
        "good_requests": [repr(t) for t in tasks],
        "bad_requests": [b.describe() for b in bad],
        "bad_request_models": {b.label: b.model for b in bad},
        "protocols": args.protocol,
        "digits": digits,
    }


def prepare(args: argparse.Namespace) -> tuple[SoakServer, dict, list, list[BadRequest], dict, list[str]]:
    """The server ready, what to send, and what must be read from the server before the load: (server,
    settings, good tasks, bad requests, Triton's counts so far, the ensembles)."""
    mnist_dir = str(args.mnist_dir) if args.mnist_dir else None
    source = digit_source(mnist_dir)
    if source.note:
        print(f"soak: note: {source.note}", flush=True)
    if args.start_server:
        server = SoakServer.start(args.server_variant)
    else:
        server = SoakServer.attach(ServerLocation.from_args(args), args.server_pid)
    try:
        server.wait_ready(MODELS, args.wait_for_server)
        ensembles = ensemble_models(server.location)
        counts_before = triton_request_counts(server.location)
        tasks, bad = good_tasks(mnist_dir), bad_requests(mnist_dir)
    except BaseException:
        server.stop()
        raise
    return server, settings(args, tasks, bad, source.description), tasks, bad, counts_before, ensembles


def run(args: argparse.Namespace) -> int:
    record = Record.begin(STUDY, PROGRAM)
    try:
        server, config, tasks, bad, counts_before, ensembles = prepare(args)
    except (ServingError, OSError, NotReady, InferenceServerException) as error:
        print(f"soak: cannot run: {error}", file=sys.stderr)
        return EXIT_ERROR
    record.where["server"] = server.info["description"]
    print(
        f"soak: {args.duration:.0f} s, {args.workers} workers"
        f"{f' at {args.rate:g} requests/s' if args.rate else ''}, protocols {weights_text(args.protocol)}, "
        f"{args.bad_share:.0%} bad requests; memory and metrics every {args.sample_interval:g} s",
        flush=True,
    )
    start = time.monotonic()

    def clock() -> float:
        return time.monotonic() - start

    tally = Tally()
    sampler = Sampler(server.rss, server.location.metrics_url, args.sample_interval, tally, clock)
    mix = Mix(args.protocol, tasks, bad, args.bad_share, args.timeout, args.seed)
    rate = args.rate / args.workers if args.rate else None
    workers = [Worker(i, server.location, mix, tally, clock, rate) for i in range(args.workers)]
    load_seconds = run_load(workers, sampler, args.duration, args.timeout + 30, clock)
    duration_s, alive = clock(), server.alive()
    try:
        counts_after = settled_request_counts(server.location) if alive else {}
    except Exception as error:  # noqa: BLE001 - the record says so instead of losing the run
        print(f"soak: cannot read Triton's statistics at the end: {error}", flush=True)
        counts_after = {}
    measured = Measured(
        tally=tally,
        samples=sampler.samples,
        load_seconds=load_seconds,
        duration_s=duration_s,
        server={k: v for k, v in server.info.items() if k != "description"},
        alive=alive,
        triton_counts=count_delta(counts_before, counts_after),
        ensembles=ensembles,
        memory_sampled=server.pid is not None,
        log_tail=server.stop(),
    )
    record.figures = soak_figures(args.name, config, measured, bad)
    json_path = write_results(record, args.out)
    print(*summary_lines(record, json_path), sep="\n", flush=True)
    return EXIT_PASSED if record.figures["passed"] else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))
