"""`python -m loadtests.queue_signal`: the Kubernetes autoscaler's metric on one replica under load.

The HorizontalPodAutoscaler of deploy/kubernetes scales on `triton_queue_time_per_request_us`, which
prometheus-adapter computes per pod as rate(nv_inference_queue_duration_us) /
rate(nv_inference_request_success), summed over the pod's models. This runs the Locust mix (both
protocols, every request type) against one server, started as `make serve` starts it (the CPU variant
here; the TensorRT one on a GPU host), at each user count, reads Triton's counters before and after each
run, and writes the same ratio over the run next to throughput and latency (records/queue-signal/):
the figures to set the autoscaler's target from.

    python -m loadtests.queue_signal --users 1,2,4,8,16,32 --run-time 30s
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from loadtests import report
from loadtests.options import parse_duration, parse_user_counts
from loadtests.record import Record, add_output_argument, write_record
from loadtests.runner import EXIT_ERROR, EXIT_PASSED, LoadTestError, RunPlan, run_locust, wait_for_server
from loadtests.studies.quiet import wait_until_quiet
from loadtests.workloads import PROTOCOLS, REQUEST_KINDS, WorkloadConfig, digit_source
from trt_plugin_kit.interface import REPO_ROOT
from trt_plugin_kit.serving.host import Ports, ServingError, choose_variant
from trt_plugin_kit.serving.server import TritonServer
from trt_plugin_kit.tritonserver import metrics
from trt_plugin_kit.tritonserver.options import add_server_variant_argument

STUDY = "queue-signal"
PROGRAM = "python -m loadtests.queue_signal"
QUEUE_COUNTER, SUCCESS_COUNTER = metrics.QUEUE_DURATION_US, metrics.REQUEST_SUCCESS


def read_counters(metrics_url: str) -> dict[str, dict[str, float]]:
    """{counter: {model: value}} for the two counters the adapter rule uses."""
    return metrics.read_metrics(metrics_url, (QUEUE_COUNTER, SUCCESS_COUNTER))


@dataclass
class SignalPoint:
    users: int
    summary: report.RunSummary
    queue_us_per_request: float  # the autoscaler's metric over the run
    per_model: dict[str, float]  # the same ratio per model
    busy: float | None


def queue_ratio(before: dict, after: dict) -> tuple[float, dict[str, float]]:
    def delta(counter: str, model: str) -> float:
        return after[counter].get(model, 0.0) - before[counter].get(model, 0.0)

    models = sorted(after[SUCCESS_COUNTER])
    per_model = {
        m: delta(QUEUE_COUNTER, m) / delta(SUCCESS_COUNTER, m)
        for m in models
        if delta(SUCCESS_COUNTER, m) > 0
    }
    total_success = sum(delta(SUCCESS_COUNTER, m) for m in models)
    total_queue = sum(delta(QUEUE_COUNTER, m) for m in models)
    # clamp_min(..., 0.001) in the adapter rule: an idle window reads 0.
    return total_queue / max(total_success, 0.001), per_model


def signal_figures(points: list[SignalPoint]) -> dict:
    """The record's figures: one point per user count."""
    rows = []
    for p in points:
        total = p.summary.total
        rows.append(
            {
                "users": p.users,
                "requests_per_s": round(total.requests_per_s, 1),
                "p50_ms": total.p50_ms,
                "p99_ms": total.p99_ms,
                "failures": total.failures,
                "queue_us_per_request": round(p.queue_us_per_request, 1),
                "queue_us_per_request_by_model": {m: round(v, 1) for m, v in p.per_model.items()},
                "busy_percent": round(p.busy, 1) if p.busy is not None else None,
            }
        )
    return {"points": rows}


def signal_markdown(record: Record) -> str:
    points = record.figures["points"]
    models = sorted({m for p in points for m in p["queue_us_per_request_by_model"]})
    lines = [
        "# The autoscaler's signal on one replica",
        "",
        "`triton_queue_time_per_request_us` (deploy/kubernetes/prometheus-adapter/values.yaml) computed",
        "over each run from Triton's own counters, as prometheus-adapter computes it per pod, next to the",
        "load that caused it: the Locust mix (HTTP and gRPC; `mnist_pipeline`, `mnist` b8, `l2norm` b4),",
        "closed loop, one server.",
        "",
        *record.head_lines(),
        "- load generator: Locust on the same machine (loopback); busy = CPU use just before the run.",
        "",
        "| users | req/s | p50 ms | p99 ms | failures | queue µs/request (all models) | "
        + " | ".join(f"{m} µs" for m in models)
        + " | busy |",
        "|---:|---:|---:|---:|---:|---:|" + "---:|" * len(models) + "---:|",
    ]
    for p in points:
        by_model = p["queue_us_per_request_by_model"]
        cells = [
            str(p["users"]),
            f"{p['requests_per_s']:.0f}",
            *[f"{p[key]:.0f}" if p[key] is not None else "n/a" for key in ("p50_ms", "p99_ms")],
            str(p["failures"]),
            f"{p['queue_us_per_request']:.0f}",
            *[f"{by_model[m]:.0f}" if m in by_model else "n/a" for m in models],
            f"{p['busy_percent']:.0f}%" if p["busy_percent"] is not None else "n/a",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", default="1,2,4,8,16,32", help="user counts, one run each (1,2,4,8,16,32)")
    parser.add_argument("--run-time", default="30s", help="per run (30s)")
    # --variant: this tool's earlier spelling, still accepted.
    add_server_variant_argument(parser, "--variant", when="")
    add_output_argument(parser, STUDY)
    parser.add_argument("--reports-dir", type=Path, default=None, help="Locust reports of every run")
    args = parser.parse_args(argv)
    try:
        user_counts = parse_user_counts(args.users)
        parse_duration(args.run_time)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    stamp = datetime.now(timezone.utc)
    record = Record.begin(STUDY, PROGRAM, argv, stamp=stamp)
    reports_dir = args.reports_dir or REPO_ROOT / "reports" / f"queue-signal-{stamp:%Y%m%d-%H%M%S}"
    workload = WorkloadConfig(protocols=dict.fromkeys(PROTOCOLS, 1), mix=dict.fromkeys(REQUEST_KINDS, 1))
    points: list[SignalPoint] = []
    try:
        digits = digit_source(workload.mnist_dir).description
        log_file = reports_dir / "server.log"
        log_file.parent.mkdir(parents=True, exist_ok=True)
        variant, _ = choose_variant(args.server_variant)
        with TritonServer(variant=variant, ports=Ports.free(), log_file=log_file) as server:
            location = server.location
            version = wait_for_server(location, list(REQUEST_KINDS), 30)
            for index, users in enumerate(user_counts, start=1):
                plan = RunPlan.measurement(
                    location,
                    workload,
                    users,
                    args.run_time,
                    10.0,
                    out_dir=reports_dir / f"users-{users}",
                    digits=digits,
                )
                busy = wait_until_quiet(25.0, 120.0)
                before = read_counters(server.metrics_url)
                summary = run_locust(plan, f"{index}/{len(user_counts)} mix x{users}")
                ratio, per_model = queue_ratio(before, read_counters(server.metrics_url))
                points.append(SignalPoint(users, summary, ratio, per_model, busy))
                print(
                    f"{users} users: {summary.total.requests_per_s:.0f} req/s, queue {ratio:.0f} µs/request"
                )
    except (LoadTestError, ServingError, ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    record.where["server"] = f"{variant} variant, started as `make serve` starts it; Triton {version}"
    record.figures = signal_figures(points)
    write_record(record, args.output, signal_markdown(record))
    print(f"written to {args.output} (+ .json); Locust reports in {reports_dir}")
    return EXIT_PASSED


if __name__ == "__main__":
    sys.exit(main())
