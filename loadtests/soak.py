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
next to Triton's own statistics, which count differently (loadtests/soak_report.py says how). Results go to
OUT/NAME.json, OUT/NAME.md and OUT/NAME.png (throughput, memory and latency over time).

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
import json
import os
import platform
import random
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from tritonclient.utils import InferenceServerException

from loadtests import soak_report
from loadtests.runner import parse_duration
from loadtests.workloads import (
    PROTOCOLS,
    L2NormTask,
    MnistBatchTask,
    MnistPipelineTask,
    ResponseCheckError,
    TritonTask,
    digit_source,
    png_pool,
)
from trt_plugin_kit.interface import L2NORM, MNIST, MNIST_PIPELINE
from trt_plugin_kit.serving.server import Ports, ServingError, TritonServer, choose_variant
from trt_plugin_kit.triton import options as cli_options
from trt_plugin_kit.triton.metrics import REQUEST_FAILURE, REQUEST_SUCCESS, read_metrics
from trt_plugin_kit.triton.options import ServerLocation, converter, positive_int, positive_seconds
from trt_plugin_kit.triton.protocol import Connection, NotReady, wait_until_ready

MODELS = (MNIST, MNIST_PIPELINE, L2NORM)
METRICS = (REQUEST_SUCCESS, REQUEST_FAILURE)
EXIT_PASSED, EXIT_FAILED, EXIT_ERROR = 0, 1, 2
MIB = 1024.0 * 1024.0
DEFAULT_TIMEOUT_S = 60.0


# ------------------------------------------------------------------------------------------ arguments


def duration(text: str) -> float:
    return parse_duration(text)


def share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"--bad-share must be in [0, 1), got {text}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m loadtests.soak",
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
    load.add_argument("--duration", type=converter(duration), default=600.0, help="how long to load (10m)")
    load.add_argument("--workers", type=converter(positive_int), default=4, help="client threads (4)")
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
        type=converter(duration),
        default=None,
        help="first part left out of the memory drift (default: 10%% of the duration, at most 60s)",
    )
    record.add_argument(
        "--max-drift-mib",
        type=float,
        default=64.0,
        help="largest accepted growth of the server's memory, last third vs first third (64)",
    )
    record.add_argument("--out", type=Path, default=Path("reports/soak"), help="folder for the results")
    record.add_argument("--name", default=None, help="file name stem (default soak-YYYYMMDD)")
    args = parser.parse_args(argv)
    if args.warmup is None:
        args.warmup = min(0.1 * args.duration, 60.0)
    args.name = args.name or f"soak-{datetime.now(timezone.utc):%Y%m%d}"
    return args


# ------------------------------------------------------------------------------------------ requests


@dataclass(frozen=True)
class BadRequest:
    """A request that must be refused with an error mentioning `fragment`."""

    label: str
    model: str
    inputs: dict[str, np.ndarray]
    fragment: str


def bad_requests(mnist_dir: str | None) -> list[BadRequest]:
    digit_png = png_pool(mnist_dir)[0]

    def image_bytes(blob: bytes) -> dict[str, np.ndarray]:
        return {"image_bytes": np.array([blob], dtype=np.object_).reshape(1, 1)}

    return [
        BadRequest("corrupt PNG", "mnist_pipeline", image_bytes(digit_png[:60]), "corrupt"),
        BadRequest("not an image", "mnist_pipeline", image_bytes(b"hello, triton"), "PNG or JPEG"),
        BadRequest("wrong shape", "mnist", {"image": np.zeros((1, 28, 28), np.float32)}, "shape"),
        BadRequest("NaN vector", "l2norm", {"vector": np.array([[1.0, np.nan, 2.0]], np.float32)}, "NaN"),
        BadRequest(
            "batch above max_batch_size", "mnist", {"image": np.zeros((65, 1, 28, 28), np.float32)}, "batch"
        ),
        BadRequest(
            "unknown model", "no_such_model", {"image": np.zeros((1, 1, 28, 28), np.float32)}, "unknown"
        ),
    ]


def good_tasks(mnist_dir: str | None) -> list[TritonTask]:
    """A spread of batch sizes and vector lengths over the three served models."""
    return [
        MnistBatchTask(mnist_dir, batch=1),
        MnistBatchTask(mnist_dir, batch=8),
        MnistBatchTask(mnist_dir, batch=32),
        MnistPipelineTask(mnist_dir, batch=1),
        MnistPipelineTask(mnist_dir, batch=4),
        L2NormTask(dim=16, batch=1),
        L2NormTask(dim=128, batch=8),
        L2NormTask(dim=1000, batch=4),
    ]


@dataclass
class Tally:
    """What the workers observed; shared, guarded by `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    good_ok: Counter = field(default_factory=Counter)  # (protocol, model) -> count
    good_failed: Counter = field(default_factory=Counter)
    bad_refused: Counter = field(default_factory=Counter)  # (protocol, label) -> count
    bad_wrong: Counter = field(default_factory=Counter)  # accepted, or refused without naming the problem
    bad_accepted: Counter = field(default_factory=Counter)  # of those: answered as if good
    latencies: dict = field(default_factory=lambda: defaultdict(list))  # model -> [seconds] (good requests)
    failures: list = field(default_factory=list)  # first messages
    events: list = field(default_factory=list)  # (finished at, good?, ok?, seconds) for the time series

    def note_failure(self, text: str) -> None:
        if len(self.failures) < 50:
            self.failures.append(text)


def worker(
    index: int,
    args: argparse.Namespace,
    location: ServerLocation,
    tasks: list[TritonTask],
    bad: list[BadRequest],
    tally: Tally,
    stop: threading.Event,
    start_time: float,
) -> None:
    rng = random.Random(args.seed * 1000 + index)
    random.seed(args.seed * 1000 + index)  # the task pools pick their batch slices with `random`
    protocols = [p for p in PROTOCOLS if args.protocol[p] > 0]
    weights = [args.protocol[p] for p in protocols]
    clients = {p: Connection(p, location.address(p), args.timeout) for p in protocols}
    try:
        while not stop.is_set():
            (protocol,) = rng.choices(protocols, weights)
            client = clients[protocol]
            if rng.random() < args.bad_share:
                request = rng.choice(bad)
                try:
                    client.infer(request.model, request.inputs)
                    verdict, message = False, f"{protocol} {request.label}: accepted (must be refused)"
                except InferenceServerException as error:
                    text = str(error)
                    verdict = request.fragment.lower() in text.lower()
                    message = f"{protocol} {request.label}: refused without naming the problem: {text[:300]}"
                except Exception as error:  # noqa: BLE001 - a broken connection is a failed check too
                    verdict, message = False, f"{protocol} {request.label}: {type(error).__name__}: {error}"
                with tally.lock:
                    (tally.bad_refused if verdict else tally.bad_wrong)[(protocol, request.label)] += 1
                    if message.endswith("accepted (must be refused)"):
                        tally.bad_accepted[(protocol, request.label)] += 1
                    tally.events.append((time.monotonic() - start_time, False, verdict, 0.0))
                    if not verdict:
                        tally.note_failure(message)
                continue
            task = rng.choice(tasks)
            inputs = task.make_inputs()
            started = time.perf_counter()
            try:
                outputs = client.infer(task.model, inputs, task.output_names)
                elapsed = time.perf_counter() - started
                task.check(inputs, outputs)
                ok, message = True, ""
            except (InferenceServerException, ResponseCheckError) as error:
                elapsed = time.perf_counter() - started
                ok, message = False, f"{protocol} {task!r}: {type(error).__name__}: {str(error)[:300]}"
            except Exception as error:  # noqa: BLE001 - any failure of a good request is counted
                elapsed = time.perf_counter() - started
                ok, message = False, f"{protocol} {task!r}: {type(error).__name__}: {str(error)[:300]}"
            with tally.lock:
                (tally.good_ok if ok else tally.good_failed)[(protocol, task.model)] += 1
                tally.events.append((time.monotonic() - start_time, True, ok, elapsed))
                if ok:
                    tally.latencies[task.model].append(elapsed)
                else:
                    tally.note_failure(message)
    finally:
        for client in clients.values():
            client.close()


# ------------------------------------------------------------------------------------------ sampling


def sampler(
    args: argparse.Namespace,
    pid: int | None,
    metrics_url: str,
    tally: Tally,
    samples: list,
    stop: threading.Event,
    start_time: float,
) -> None:
    while True:
        now = time.monotonic() - start_time
        sample = {"t": round(now, 2)}
        if pid is not None:
            rss = soak_report.process_tree_rss(pid)
            if rss is not None:
                sample["server_rss_mib"] = round(rss[0] / MIB, 2)
                sample["total_rss_mib"] = round(rss[1] / MIB, 2)
                sample["processes"] = rss[2]
        try:
            sample["metrics"] = read_metrics(metrics_url, METRICS)
        except OSError as error:
            sample["metrics_error"] = str(error)
        with tally.lock:
            sample["good_ok"] = sum(tally.good_ok.values())
            sample["good_failed"] = sum(tally.good_failed.values())
            sample["bad_refused"] = sum(tally.bad_refused.values())
            sample["bad_wrong"] = sum(tally.bad_wrong.values())
        samples.append(sample)
        if stop.wait(args.sample_interval):
            break


# ------------------------------------------------------------------------------------------ results


# ------------------------------------------------------------------------------------------ main


def run(args: argparse.Namespace) -> int:
    server = None
    log_dir = None
    try:
        source = digit_source(str(args.mnist_dir) if args.mnist_dir else None)
        if source.note:
            print(f"soak: note: {source.note}", flush=True)
        if args.start_server:
            variant, reason = choose_variant(args.server_variant)
            log_dir = Path(tempfile.mkdtemp(prefix="soak_triton_"))
            server = TritonServer(variant=variant, ports=Ports.free(), log_file=log_dir / "tritonserver.log")
            print(f"soak: starting the {variant} server ({reason}); log {server.log_file}", flush=True)
            server.start()
            ports = server.ports
            location = ServerLocation("127.0.0.1", ports.http, ports.grpc, ports.metrics)
            pid = server.process.pid
            server_info = {
                "variant": variant,
                "description": f"{server.describe_variant()}, started by the soak",
            }
        else:
            location = ServerLocation.from_args(args)
            pid = args.server_pid
            server_info = {"variant": "external", "description": f"running server at {location.describe()}"}

        def server_exited() -> str | None:
            if server is None or server.is_running():
                return None
            return f"tritonserver exited before it was ready; last lines:\n{server.log_tail()}"

        metadata = wait_until_ready(
            location,
            models=MODELS,
            timeout_s=300.0 if server else args.wait_for_server,
            stopped=server_exited,
        )
        server_info["triton_version"] = metadata.get("version")
        ensembles = soak_report.ensemble_models(location)
        counts_before = soak_report.triton_request_counts(location)
        mnist_dir = str(args.mnist_dir) if args.mnist_dir else None
        tasks, bad = good_tasks(mnist_dir), bad_requests(mnist_dir)
    except (ServingError, OSError, NotReady, InferenceServerException) as error:
        print(f"soak: cannot run: {error}", file=sys.stderr)
        if server is not None:
            server.stop()
        return EXIT_ERROR

    tally = Tally()
    samples: list[dict] = []
    stop = threading.Event()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    start_time = time.monotonic()
    print(
        f"soak: {args.duration:.0f} s, {args.workers} workers, "
        f"protocols {soak_report.weights_text(args.protocol)}, "
        f"{args.bad_share:.0%} bad requests; memory and metrics every {args.sample_interval:g} s",
        flush=True,
    )
    threads = [
        threading.Thread(
            target=sampler,
            args=(args, pid, location.metrics_url, tally, samples, stop, start_time),
            daemon=True,
        )
    ]
    threads += [
        threading.Thread(
            target=worker, args=(i, args, location, tasks, bad, tally, stop, start_time), daemon=True
        )
        for i in range(args.workers)
    ]
    for thread in threads:
        thread.start()
    try:
        next_report = 60.0
        while time.monotonic() - start_time < args.duration:
            time.sleep(min(1.0, max(0.0, args.duration - (time.monotonic() - start_time))))
            elapsed = time.monotonic() - start_time
            if elapsed >= next_report:
                next_report += 60.0
                with tally.lock:
                    good, failed = sum(tally.good_ok.values()), sum(tally.good_failed.values())
                    refused, wrong = sum(tally.bad_refused.values()), sum(tally.bad_wrong.values())
                rss = samples[-1].get("total_rss_mib", "?") if samples else "?"
                print(
                    f"soak: {elapsed:5.0f} s  good ok {good}  good failed {failed}  bad refused {refused}  "
                    f"bad wrong {wrong}  server RSS {rss} MiB",
                    flush=True,
                )
    except KeyboardInterrupt:
        print("soak: interrupted; writing what was measured", flush=True)
    stop.set()
    load_seconds = time.monotonic() - start_time
    for thread in threads:
        thread.join(timeout=args.timeout + 30)
    duration = time.monotonic() - start_time
    alive = server.is_running() if server is not None else True
    try:
        counts_after = settled_request_counts(location) if alive else {}
    except Exception as error:  # noqa: BLE001 - the record says so instead of losing the run
        print(f"soak: cannot read Triton's statistics at the end: {error}", flush=True)
        counts_after = {}
    log_tail = server.log_tail(40) if server is not None and not alive else ""
    if server is not None:
        server.stop()

    # ---- results
    throughput = soak_report.throughput_series(tally.events, args.sample_interval, load_seconds)
    totals = {
        "good_ok": sum(tally.good_ok.values()),
        "good_failed": sum(tally.good_failed.values()),
        "bad_refused": sum(tally.bad_refused.values()),
        "bad_wrong": sum(tally.bad_wrong.values()),
    }
    totals["requests_per_s"] = round(sum(totals.values()) / max(duration, 1e-9), 2)
    memory = {
        "server_rss": soak_report.memory_drift(samples, args.warmup, "server_rss_mib"),
        "total_rss": soak_report.memory_drift(samples, args.warmup, "total_rss_mib"),
    }
    by_request = []
    for protocol in PROTOCOLS:
        for model in MODELS:
            by_request.append(
                {
                    "protocol": protocol,
                    "request": model,
                    "ok": tally.good_ok[(protocol, model)],
                    "failed": tally.good_failed[(protocol, model)],
                }
            )
        for label in sorted({b.label for b in bad}):
            by_request.append(
                {
                    "protocol": protocol,
                    "request": f"bad: {label}",
                    "ok": tally.bad_refused[(protocol, label)],
                    "failed": tally.bad_wrong[(protocol, label)],
                    "accepted": tally.bad_accepted[(protocol, label)],
                }
            )
    bad_targets = {b.label: b.model for b in bad}
    requests_by_model = soak_report.requests_by_model(
        by_request, bad_targets, soak_report.count_delta(counts_before, counts_after), ensembles
    )
    violations = []
    if totals["good_failed"]:
        violations.append(f"{totals['good_failed']} good requests failed")
    if totals["bad_wrong"]:
        violations.append(f"{totals['bad_wrong']} bad requests were accepted or refused unclearly")
    if totals["good_ok"] == 0:
        violations.append("no good request succeeded")
    if args.bad_share > 0 and totals["bad_refused"] == 0:
        violations.append("no bad request was sent and refused")
    if not alive:
        violations.append("the server exited during the soak")
    drift = memory["total_rss"]
    if drift is not None and drift["drift_mib"] > args.max_drift_mib:
        violations.append(f"server memory drift {drift['drift_mib']} MiB > {args.max_drift_mib} MiB")
    if pid is not None and drift is None:
        violations.append("too few memory samples after the warm-up to judge the drift (run longer)")
    result = {
        "name": args.name,
        "started": started,
        "duration_s": round(duration, 1),
        "command": " ".join(["python -m loadtests.soak", *sys.argv[1:]]),
        "config": {
            "workers": args.workers,
            "bad_share": args.bad_share,
            "sample_interval_s": args.sample_interval,
            "warmup_s": round(args.warmup, 1),
            "max_drift_mib": args.max_drift_mib,
            "seed": args.seed,
            "good_requests": [repr(t) for t in tasks],
            "bad_requests": [f"{b.label} -> {b.model} (error must mention {b.fragment!r})" for b in bad],
            "bad_request_models": bad_targets,
            "protocols": args.protocol,
            "digits": source.description,
        },
        "host": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "server": {**server_info, "alive_at_end": alive},
        "passed": not violations,
        "violations": violations,
        "totals": totals,
        "by_request": by_request,
        "requests_by_model": requests_by_model,
        "triton_counting": soak_report.TRITON_COUNTING,
        "latency": {model: soak_report.percentiles(values) for model, values in tally.latencies.items()},
        "memory": memory,
        "metrics_delta": soak_report.metric_deltas(samples, METRICS),
        "throughput": throughput,
        "samples": samples,
        "failures": tally.failures,
        "server_log_tail": log_tail,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / f"{args.name}.json"
    json_path.write_text(json.dumps(result, indent=1) + "\n")
    (args.out / f"{args.name}.md").write_text(soak_report.markdown(result))
    soak_report.write_chart(args.out / f"{args.name}.png", result)
    print(
        f"soak: {'PASS' if result['passed'] else 'FAIL'} — good ok {totals['good_ok']}, good failed "
        f"{totals['good_failed']}, bad refused {totals['bad_refused']}, bad wrong {totals['bad_wrong']}, "
        f"{totals['requests_per_s']:.1f} req/s, memory drift "
        f"{drift['drift_mib'] if drift else 'n/a'} MiB; results in {json_path.with_suffix('.*')}",
        flush=True,
    )
    for violation in violations:
        print(f"soak: FAIL {violation}", flush=True)
    for failure in tally.failures[:10]:
        print(f"soak:   {failure}", flush=True)
    if log_dir is not None and alive:
        for path in log_dir.glob("*"):
            path.unlink()
        log_dir.rmdir()
    return EXIT_PASSED if result["passed"] else EXIT_FAILED


def settled_request_counts(location, settle_s: float = 0.5, limit_s: float = 10.0) -> dict:
    """Triton's per-model counts once they stop moving: Triton updates its statistics when it releases a
    request, which can come a moment after the client has its response, so a read right after the last
    answer can be a request or two short."""
    counts = soak_report.triton_request_counts(location)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(settle_s)
        again = soak_report.triton_request_counts(location)
        if again == counts:
            break
        counts = again
    return counts


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
