#!/usr/bin/env python3
"""Serving soak: a sustained mixed load against Triton, with the server's memory and metrics sampled.

Starts the server the way `make serve` does (scripts/serve.py's TritonServer: the TensorRT variant on a GPU
host, PyTriton's CPU tritonserver elsewhere), or uses one already running (`--http-url` with `--grpc-url`,
`--metrics-url` and, for memory, `--server-pid`). Worker threads then send, for `--duration`:

  good requests, over HTTP and gRPC: mnist (raw FP32 batches), mnist_pipeline (PNG bytes), l2norm (vectors),
    each answer checked (probability rows sum to 1, vectors match the NumPy reference);
  bad requests (a `--bad-share` of all): corrupt PNG, bytes that are no image, wrong shape, NaN vector,
    batch above max_batch_size, unknown model; each must be refused with an error that names the problem.

Every `--sample-interval` seconds it records the server's resident memory (tritonserver and its child
processes, e.g. the Python backend stubs), Triton's Prometheus counters (nv_inference_request_success /
_failure per model) and the throughput. Results go to OUT/NAME.json, OUT/NAME.md and OUT/NAME.png (chart:
throughput, memory and latency over time).

Passes (exit 0) when no good request failed, every bad request was refused cleanly, the server stayed up and
the memory drift (mean of the last third of the samples after the warm-up minus the mean of the first third)
is at most --max-drift-mib. Exit 1: a check failed; 2: the soak could not run.

Examples:
  python scripts/soak.py --duration 10m --out docs/reliability            # own server, 10 minutes
  python scripts/soak.py --duration 60s --workers 4 --bad-share 0.2        # the CI size
  python scripts/soak.py --http-url 127.0.0.1:8000 --grpc-url 127.0.0.1:8001 \\
      --metrics-url http://127.0.0.1:8002/metrics --server-pid "$(pgrep -f bin/tritonserver)"  # make serve
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import numpy as np  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException, np_to_triton_dtype  # noqa: E402

from loadtests.workloads import (  # noqa: E402
    L2NormTask,
    MnistBatchTask,
    MnistPipelineTask,
    ResponseCheckError,
    TritonTask,
    png_pool,
)
from trt_plugin_kit.serving import Ports, ServingError, TritonServer, choose_variant  # noqa: E402

PROTOCOLS = ("http", "grpc")
MODELS = ("mnist", "mnist_pipeline", "l2norm")
METRICS = ("nv_inference_request_success", "nv_inference_request_failure")
EXIT_PASSED, EXIT_FAILED, EXIT_ERROR = 0, 1, 2
MIB = 1024.0 * 1024.0


# ------------------------------------------------------------------------------------------ arguments


def parse_duration(text: str) -> float:
    """ "90", "90s", "10m", "1h", "1m30s" -> seconds."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        seconds = float(text)
    else:
        match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
        if not match or not any(match.groups()):
            raise argparse.ArgumentTypeError(f"bad duration {text!r}: use e.g. 60s, 10m, 1h")
        hours, minutes, secs = (int(g) if g else 0 for g in match.groups())
        seconds = float(hours * 3600 + minutes * 60 + secs)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"duration {text!r} must be longer than zero")
    return seconds


def share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"--bad-share must be in [0, 1), got {text}")
    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    parser.add_argument(
        "--duration", type=parse_duration, default=600.0, help="how long to load (default 10m)"
    )
    parser.add_argument("--workers", type=positive_int, default=4, help="client threads (default 4)")
    parser.add_argument(
        "--bad-share", type=share, default=0.1, help="share of requests that are bad on purpose (default 0.1)"
    )
    parser.add_argument(
        "--sample-interval",
        type=float,
        default=5.0,
        help="seconds between memory/metrics samples (default 5)",
    )
    parser.add_argument(
        "--warmup",
        type=parse_duration,
        default=None,
        help="first part left out of the memory drift (default: 10%% of the duration, at most 60s)",
    )
    parser.add_argument(
        "--max-drift-mib",
        type=float,
        default=64.0,
        help="largest accepted growth of the server's memory, last third vs first third (default 64)",
    )
    parser.add_argument("--out", type=Path, default=Path("reports/soak"), help="folder for the results")
    parser.add_argument("--name", default=None, help="file name stem (default soak-YYYYMMDD)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the request mix (default 0)")
    parser.add_argument(
        "--request-timeout", type=float, default=60.0, help="seconds per request (default 60)"
    )
    parser.add_argument(
        "--variant",
        choices=("auto", "tensorrt", "cpu"),
        default=os.environ.get("TRITON_VARIANT", "auto"),
        help="server variant to start, as `make serve` (default auto)",
    )
    parser.add_argument("--http-url", help="use a running server: host:port of its HTTP endpoint")
    parser.add_argument("--grpc-url", help="with --http-url: host:port of its gRPC endpoint")
    parser.add_argument(
        "--metrics-url", help="with --http-url: its Prometheus URL (http://host:port/metrics)"
    )
    parser.add_argument(
        "--server-pid", type=int, help="with --http-url: tritonserver's PID, for memory samples"
    )
    parser.add_argument(
        "--mnist-images", default=None, help="MNIST dev images (default: ../shared/data/mnist)"
    )
    args = parser.parse_args(argv)
    if args.http_url and not (args.grpc_url and args.metrics_url):
        parser.error("--http-url needs --grpc-url and --metrics-url too")
    if args.sample_interval <= 0:
        parser.error("--sample-interval must be > 0")
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


def bad_requests(images_path: str | None) -> list[BadRequest]:
    digit_png = png_pool(images_path)[0]

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


def good_tasks(images_path: str | None) -> list[TritonTask]:
    """A spread of batch sizes and vector lengths over the three served models."""
    return [
        MnistBatchTask(images_path, batch=1),
        MnistBatchTask(images_path, batch=8),
        MnistBatchTask(images_path, batch=32),
        MnistPipelineTask(images_path, batch=1),
        MnistPipelineTask(images_path, batch=4),
        L2NormTask(dim=16, batch=1),
        L2NormTask(dim=128, batch=8),
        L2NormTask(dim=1000, batch=4),
    ]


class Client:
    """One connection per protocol; `infer` returns the outputs by name or raises."""

    def __init__(self, protocol: str, url: str, timeout: float):
        self.protocol = protocol
        self.timeout = timeout
        if protocol == "http":
            self.module = httpclient
            self.client = httpclient.InferenceServerClient(
                url, connection_timeout=timeout, network_timeout=timeout
            )
        else:
            self.module = grpcclient
            self.client = grpcclient.InferenceServerClient(url)

    def infer(self, model: str, inputs: dict[str, np.ndarray], output_names: tuple[str, ...] = ()):
        tensors = []
        for name, array in inputs.items():
            datatype = "BYTES" if array.dtype == np.object_ else np_to_triton_dtype(array.dtype)
            tensor = self.module.InferInput(name, list(array.shape), datatype)
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        outputs = [self.module.InferRequestedOutput(n) for n in output_names] or None
        if self.protocol == "http":
            result = self.client.infer(model, tensors, outputs=outputs)
        else:
            result = self.client.infer(model, tensors, outputs=outputs, client_timeout=self.timeout)
        return {name: result.as_numpy(name) for name in output_names if result.as_numpy(name) is not None}

    def close(self) -> None:
        self.client.close()


@dataclass
class Tally:
    """What the workers observed; shared, guarded by `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    good_ok: Counter = field(default_factory=Counter)  # (protocol, model) -> count
    good_failed: Counter = field(default_factory=Counter)
    bad_refused: Counter = field(default_factory=Counter)  # (protocol, label) -> count
    bad_wrong: Counter = field(default_factory=Counter)  # accepted, or refused without naming the problem
    latencies: dict = field(default_factory=lambda: defaultdict(list))  # model -> [seconds] (good requests)
    failures: list = field(default_factory=list)  # first messages
    events: list = field(default_factory=list)  # (finished at, good?, ok?, seconds) for the time series

    def note_failure(self, text: str) -> None:
        if len(self.failures) < 50:
            self.failures.append(text)


def worker(
    index: int,
    args: argparse.Namespace,
    urls: dict[str, str],
    tasks: list[TritonTask],
    bad: list[BadRequest],
    tally: Tally,
    stop: threading.Event,
    start_time: float,
) -> None:
    rng = random.Random(args.seed * 1000 + index)
    random.seed(args.seed * 1000 + index)  # the task pools pick their batch slices with `random`
    clients = {p: Client(p, urls[p], args.request_timeout) for p in PROTOCOLS}
    try:
        while not stop.is_set():
            protocol = rng.choice(PROTOCOLS)
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


def process_tree_rss(pid: int) -> tuple[float, float, int] | None:
    """(RSS of pid, RSS of pid and all its descendants, number of processes) in bytes, or None if gone."""
    try:
        import psutil  # noqa: PLC0415 - optional

        try:
            root = psutil.Process(pid)
            processes = [root, *root.children(recursive=True)]
            rss = []
            for process in processes:
                try:
                    rss.append(process.memory_info().rss)
                except psutil.NoSuchProcess:
                    rss.append(0)
            return float(rss[0]), float(sum(rss)), len(processes)
        except psutil.NoSuchProcess:
            return None
    except ImportError:
        pass

    def rss_of(p: int) -> float:
        with open(f"/proc/{p}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return float(line.split()[1]) * 1024.0
        return 0.0

    def children(p: int) -> list[int]:
        found = []
        for task in Path(f"/proc/{p}/task").glob("*"):
            text = (task / "children").read_text().split() if (task / "children").exists() else []
            found += [int(c) for c in text]
        return found

    try:
        tree, queue = [], [pid]
        while queue:
            current = queue.pop()
            tree.append(current)
            queue += children(current)
        sizes = [rss_of(p) for p in tree]
        return sizes[0], sum(sizes), len(tree)
    except OSError:
        return None


def read_metrics(url: str) -> dict[str, dict[str, float]]:
    """{metric: {model: value summed over the model's series}} for METRICS."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    values: dict[str, dict[str, float]] = {name: defaultdict(float) for name in METRICS}
    pattern = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$", re.MULTILINE)
    for name, labels, value in pattern.findall(text):
        if name in values:
            model = re.search(r'model="([^"]*)"', labels)
            if model:
                values[name][model.group(1)] += float(value)
    return {name: dict(per_model) for name, per_model in values.items()}


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
            rss = process_tree_rss(pid)
            if rss is not None:
                sample["server_rss_mib"] = round(rss[0] / MIB, 2)
                sample["total_rss_mib"] = round(rss[1] / MIB, 2)
                sample["processes"] = rss[2]
        try:
            sample["metrics"] = read_metrics(metrics_url)
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


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    array = np.array(values) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(array, 50)), 2),
        "p95_ms": round(float(np.percentile(array, 95)), 2),
        "p99_ms": round(float(np.percentile(array, 99)), 2),
        "max_ms": round(float(array.max()), 2),
    }


def memory_drift(samples: list[dict], warmup: float, key: str) -> dict | None:
    """Mean of the last third minus mean of the first third of the samples taken after the warm-up."""
    values = [(s["t"], s[key]) for s in samples if key in s and s["t"] >= warmup]
    if len(values) < 3:
        return None
    third = len(values) // 3
    first = float(np.mean([v for _, v in values[:third]]))
    last = float(np.mean([v for _, v in values[-third:]]))
    return {
        "first_third_mib": round(first, 2),
        "last_third_mib": round(last, 2),
        "drift_mib": round(last - first, 2),
        "min_mib": round(min(v for _, v in values), 2),
        "max_mib": round(max(v for _, v in values), 2),
        "samples": len(values),
    }


def throughput_series(events: list, interval: float, duration: float) -> list[dict]:
    """Per window of `interval` seconds: good and bad requests per second, good failures, p95 latency.

    The last window absorbs the remainder of `duration` and the requests still in flight at the end."""
    bins = max(1, int(round(duration / interval)))
    good = np.zeros(bins)
    bad = np.zeros(bins)
    failed = np.zeros(bins)
    latencies: list[list[float]] = [[] for _ in range(bins)]
    for t, is_good, ok, seconds in events:
        i = min(int(t // interval), bins - 1)
        if is_good:
            good[i] += 1
            failed[i] += 0 if ok else 1
            if ok:
                latencies[i].append(seconds)
        else:
            bad[i] += 1
    series = []
    for i in range(bins):
        end = duration if i == bins - 1 else (i + 1) * interval
        width = max(end - i * interval, 1e-9)
        series.append(
            {
                "t_end": round(end, 1),
                "good_rps": round(good[i] / width, 2),
                "bad_rps": round(bad[i] / width, 2),
                "good_failed": int(failed[i]),
                "good_p95_ms": round(float(np.percentile(latencies[i], 95)) * 1000.0, 2)
                if latencies[i]
                else None,
            }
        )
    return series


def metric_deltas(samples: list[dict]) -> dict:
    with_metrics = [s["metrics"] for s in samples if "metrics" in s]
    if len(with_metrics) < 2:
        return {}
    first, last = with_metrics[0], with_metrics[-1]
    deltas = {}
    for name in METRICS:
        models = set(first.get(name, {})) | set(last.get(name, {}))
        deltas[name] = {
            m: last.get(name, {}).get(m, 0.0) - first.get(name, {}).get(m, 0.0) for m in sorted(models)
        }
    return deltas


def write_chart(path: Path, result: dict) -> None:
    import matplotlib  # noqa: PLC0415 - only needed for the chart

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    series = result["throughput"]
    samples = result["samples"]
    figure, axes = plt.subplots(3, 1, figsize=(10, 10), sharex=True)
    t = [s["t_end"] for s in series]
    axes[0].plot(t, [s["good_rps"] for s in series], label="good requests/s")
    axes[0].plot(t, [s["bad_rps"] for s in series], label="bad requests/s (refused)")
    failed_t = [s["t_end"] for s in series if s["good_failed"]]
    if failed_t:
        axes[0].scatter(failed_t, [0] * len(failed_t), color="red", marker="x", label="good requests failed")
    axes[0].set_ylabel("requests / s")
    axes[0].legend(loc="lower right")
    axes[0].set_title(
        f"Soak {result['name']}: {result['duration_s']:.0f} s, {result['config']['workers']} workers, "
        f"{result['server']['variant']} server — good failed: {result['totals']['good_failed']}, "
        f"bad not refused cleanly: {result['totals']['bad_wrong']}"
    )
    warmup = result["config"]["warmup_s"]
    spread = [5.0]
    for key, label in (("server_rss_mib", "tritonserver"), ("total_rss_mib", "with child processes")):
        points = [(s["t"], s[key]) for s in samples if key in s]
        settled = [v for t, v in points if t >= warmup]
        if not settled:
            continue
        # Relative to the mean after the warm-up, so that a drift of a few MiB is visible next to ~300 MiB.
        base = float(np.mean(settled))
        spread.append(max(abs(v - base) for v in settled) + 2.0)
        axes[1].plot(
            [t for t, _ in points], [v - base for _, v in points], label=f"{label} (mean {base:.1f} MiB)"
        )
    axes[1].axvline(warmup, color="grey", linestyle=":", label="end of warm-up")
    axes[1].set_ylim(-max(spread), max(spread))  # fits the samples after the warm-up (start-up is lower)
    axes[1].set_ylabel("RSS - mean after warm-up (MiB)")
    axes[1].legend(loc="lower right")
    latency = [(s["t_end"], s["good_p95_ms"]) for s in series if s["good_p95_ms"] is not None]
    axes[2].plot(
        [t for t, _ in latency], [p for _, p in latency], label="p95 latency of good requests per window"
    )
    axes[2].set_ylabel("ms")
    axes[2].set_xlabel("seconds since start")
    axes[2].legend(loc="upper right")
    for axis in axes:
        axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def markdown(result: dict) -> str:
    totals = result["totals"]
    drift = result["memory"].get("total_rss") or {}
    lines = [
        f"# Serving soak {result['name']}",
        "",
        f"Result: **{'PASS' if result['passed'] else 'FAIL'}**"
        + ("" if result["passed"] else " — " + "; ".join(result["violations"])),
        "",
        f"- started {result['started']}, ran {result['duration_s']:.0f} s, "
        f"{result['config']['workers']} client threads, {result['config']['bad_share']:.0%} bad requests, "
        f"seed {result['config']['seed']}",
        f"- server: {result['server']['description']}",
        f"- client host: {result['host']['cpus']} CPUs, {result['host']['platform']}",
        f"- command: `{result['command']}`",
        "",
        "| | count |",
        "|---|---:|",
        f"| good requests answered correctly | {totals['good_ok']} |",
        f"| good requests failed | {totals['good_failed']} |",
        f"| bad requests refused with a clear error | {totals['bad_refused']} |",
        f"| bad requests accepted or refused unclearly | {totals['bad_wrong']} |",
        f"| mean throughput (all requests) | {totals['requests_per_s']:.1f} /s |",
        "",
        "Memory of the server (resident set of tritonserver and its child processes, MiB; drift = mean "
        "of the last third minus mean of the first third of the samples after the "
        f"{result['config']['warmup_s']:.0f} s warm-up):",
        "",
        "| | first third | last third | drift | min | max | samples |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in (("server_rss", "tritonserver"), ("total_rss", "with children")):
        m = result["memory"].get(key)
        if m:
            lines.append(
                f"| {label} | {m['first_third_mib']} | {m['last_third_mib']} | {m['drift_mib']} "
                f"| {m['min_mib']} | {m['max_mib']} | {m['samples']} |"
            )
    if not drift:
        lines.append("| (not sampled) | | | | | | |")
    lines += [
        "",
        "Latency of good requests by model (ms):",
        "",
        "| model | p50 | p95 | p99 | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for model, p in sorted(result["latency"].items()):
        lines.append(f"| {model} | {p['p50_ms']} | {p['p95_ms']} | {p['p99_ms']} | {p['max_ms']} |")
    lines += [
        "",
        "Requests by protocol and model / bad-request kind:",
        "",
        "| protocol | request | ok | failed |",
        "|---|---|---:|---:|",
    ]
    for row in result["by_request"]:
        lines.append(f"| {row['protocol']} | {row['request']} | {row['ok']} | {row['failed']} |")
    lines += ["", "Triton's Prometheus counters over the run (increase per model):", ""]
    for name, per_model in result["metrics_delta"].items():
        lines.append(f"- `{name}`: " + ", ".join(f"{m} +{v:.0f}" for m, v in per_model.items()))
    if result["failures"]:
        lines += ["", "First failures:", ""] + [f"- {f}" for f in result["failures"][:20]]
    lines += ["", f"![throughput, memory and latency over time]({result['name']}.png)", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ main


def run(args: argparse.Namespace) -> int:
    server = None
    log_dir = None
    try:
        if args.http_url:
            urls = {"http": args.http_url, "grpc": args.grpc_url}
            metrics_url = args.metrics_url
            pid = args.server_pid
            server_info = {"variant": "external", "description": f"running server at {args.http_url}"}
        else:
            variant, reason = choose_variant(args.variant)
            log_dir = Path(tempfile.mkdtemp(prefix="soak_triton_"))
            server = TritonServer(variant=variant, ports=Ports.free(), log_file=log_dir / "tritonserver.log")
            print(f"soak: starting the {variant} server ({reason}); log {server.log_file}", flush=True)
            server.start()
            server.wait_until_ready(300.0)
            urls = {"http": server.http_url, "grpc": server.grpc_url}
            metrics_url = server.metrics_url
            pid = server.process.pid
            server_info = {
                "variant": variant,
                "description": f"{server.describe_variant()}, started by soak.py",
            }
        probe = httpclient.InferenceServerClient(urls["http"])
        try:
            metadata = probe.get_server_metadata()
            server_info["triton_version"] = metadata.get("version")
        finally:
            probe.close()
        tasks = good_tasks(args.mnist_images)
        bad = bad_requests(args.mnist_images)
    except (ServingError, OSError, InferenceServerException) as error:
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
        f"soak: {args.duration:.0f} s, {args.workers} workers over HTTP and gRPC, "
        f"{args.bad_share:.0%} bad requests; memory and metrics every {args.sample_interval:g} s",
        flush=True,
    )
    threads = [
        threading.Thread(
            target=sampler, args=(args, pid, metrics_url, tally, samples, stop, start_time), daemon=True
        )
    ]
    threads += [
        threading.Thread(
            target=worker, args=(i, args, urls, tasks, bad, tally, stop, start_time), daemon=True
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
        thread.join(timeout=args.request_timeout + 30)
    duration = time.monotonic() - start_time
    alive = server.is_running() if server is not None else True
    log_tail = server.log_tail(40) if server is not None and not alive else ""
    if server is not None:
        server.stop()

    # ---- results
    throughput = throughput_series(tally.events, args.sample_interval, load_seconds)
    totals = {
        "good_ok": sum(tally.good_ok.values()),
        "good_failed": sum(tally.good_failed.values()),
        "bad_refused": sum(tally.bad_refused.values()),
        "bad_wrong": sum(tally.bad_wrong.values()),
    }
    totals["requests_per_s"] = round(sum(totals.values()) / max(duration, 1e-9), 2)
    memory = {
        "server_rss": memory_drift(samples, args.warmup, "server_rss_mib"),
        "total_rss": memory_drift(samples, args.warmup, "total_rss_mib"),
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
                }
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
        "command": " ".join(["python", "scripts/soak.py", *sys.argv[1:]]),
        "config": {
            "workers": args.workers,
            "bad_share": args.bad_share,
            "sample_interval_s": args.sample_interval,
            "warmup_s": round(args.warmup, 1),
            "max_drift_mib": args.max_drift_mib,
            "seed": args.seed,
            "good_requests": [repr(t) for t in tasks],
            "bad_requests": [f"{b.label} -> {b.model} (error must mention {b.fragment!r})" for b in bad],
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
        "latency": {model: percentiles(values) for model, values in tally.latencies.items()},
        "memory": memory,
        "metrics_delta": metric_deltas(samples),
        "throughput": throughput,
        "samples": samples,
        "failures": tally.failures,
        "server_log_tail": log_tail,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / f"{args.name}.json"
    json_path.write_text(json.dumps(result, indent=1) + "\n")
    (args.out / f"{args.name}.md").write_text(markdown(result))
    write_chart(args.out / f"{args.name}.png", result)
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


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
