"""`python -m loadtests.baseline`: measure what a server sustains, per request type, at a few user counts,
and write it down (records/baseline/baseline-YYYYMMDD.md + .png) as the reference later changes are compared
against.

Each request type (protocol x model) runs on its own at each user count, so every figure is that request
type's own throughput and latency, not a share of a mix. The machine is described in the file (CPU, cores,
memory, CPU use by other work just before each run: such work lowers the figures).

    python -m loadtests.baseline --start-server                 # the CPU server, as `make serve` starts it
    python -m loadtests.baseline --users 1,4,16 --run-time 30s  # a running server (--host, --http-port, ...)
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from loadtests import report
from loadtests.options import add_workload_arguments, workload_from_args
from loadtests.runner import (
    EXIT_ERROR,
    EXIT_PASSED,
    EXIT_THRESHOLDS,
    REPO_ROOT,
    LoadTestError,
    RunPlan,
    parse_user_counts,
    run_locust,
    run_time,
    start_server,
    wait_for_server,
)
from loadtests.workloads import PROTOCOLS, REQUEST_KINDS
from trt_plugin_kit.serving.server import ServingError, choose_variant
from trt_plugin_kit.triton.options import (
    ServerLocation,
    add_server_location_arguments,
    add_server_variant_argument,
    converter,
)

DEFAULT_OUTPUT = REPO_ROOT / "records" / "baseline" / f"baseline-{datetime.now(timezone.utc):%Y%m%d}.md"
Results = list[tuple[int, report.RunSummary, float | None]]  # (users, summary, CPU busy % before the run)


def machine_description() -> dict[str, str]:
    cpu_model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_kib = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        memory = f"{mem_kib / 1024**2:.0f} GiB"
    except (OSError, IndexError, ValueError):
        memory = "unknown"
    return {
        "cpu": cpu_model,
        "cores (nproc)": str(os.cpu_count()),
        "memory": memory,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "locust": metadata.version("locust"),
        "tritonclient": metadata.version("tritonclient"),
    }


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def measurement_record(stamp: datetime, server: str, command: str, argv: list[str] | None) -> dict:
    """When, on which commit, server and machine, and with which command line a measurement was taken (the
    head of BASELINE.md and QUEUE_SIGNAL.md)."""
    return {
        "date": stamp.strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "server": server,
        "machine": machine_description(),
        "command": " ".join([command, *(argv if argv is not None else sys.argv[1:])]),
    }


def cpu_busy_percent(seconds: float = 2.0) -> float | None:
    """Share of all cores busy over `seconds` (from /proc/stat). Sampled while the server under test is
    idle, just before a run, it shows how much other work the machine was doing."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields), idle

    try:
        total_before, idle_before = sample()
        time.sleep(seconds)
        total_after, idle_after = sample()
    except (OSError, ValueError, IndexError):
        return None
    elapsed = total_after - total_before
    return 100.0 * (1 - (idle_after - idle_before) / elapsed) if elapsed > 0 else None


def wait_until_quiet(max_busy_percent: float, max_wait_s: float) -> float | None:
    """Waits (up to max_wait_s) for the machine's CPU use to fall to max_busy_percent, so that other work
    does not eat into the figures; returns the last CPU use seen (reported next to the run's figures)."""
    deadline = time.monotonic() + max_wait_s
    while True:
        busy = cpu_busy_percent()
        if busy is None or busy <= max_busy_percent or time.monotonic() >= deadline:
            return busy


def baseline_table(results: Results) -> list[str]:
    """One row per request type and user count, grouped by request type."""
    rows = sorted(
        (
            (stats.name, users, stats, busy)
            for users, summary, busy in results
            for stats in summary.request_types
        ),
        key=lambda row: (row[0], row[1]),
    )
    lines = [
        "| request type | users | req/s | items/s | p50 ms | p95 ms | p99 ms | requests | failures | busy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, users, stats, busy in rows:
        cells = [
            name,
            str(users),
            f"{stats.requests_per_s:.1f}",
            f"{stats.items_per_s:.1f}" if stats.items_per_s is not None else "n/a",
            *[f"{v:.0f}" if v is not None else "n/a" for v in (stats.p50_ms, stats.p95_ms, stats.p99_ms)],
            str(stats.requests),
            str(stats.failures),
            f"{busy:.0f}%" if busy is not None else "n/a",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def baseline_markdown(results: Results, info: dict, chart_name: str) -> str:
    """The BASELINE.md text: how it was measured, then the figures."""
    lines = [
        "# Load-test baseline",
        "",
        "What the serving path sustains on the machine below: each request type alone, closed loop (every",
        "simulated user sends its next request as soon as the previous one returns), at each user count.",
        "Later changes are compared against these figures: rerun the command on the same kind of machine",
        "(`--output /tmp/new.md` keeps this file) and compare the tables.",
        "",
        f"- date: {info['date']}",
        f"- commit: {info['commit']}",
        f"- server: {info['server']}",
        *[f"- {key}: {value}" for key, value in info["machine"].items()],
        f"- command: `{info['command']}`",
        "- load generator: Locust on the same machine as the server (loopback), so both share the cores.",
        "- items/s = req/s x batch (digits or vectors per second); percentiles are Locust's (whole ms);",
        "  busy = CPU use of the whole machine in the 2 s before the run, while the server idles: other",
        "  work on the machine, which lowers that run's figures (each run first waited up to",
        f"  {info['quiet_wait']:g} s for it to fall to {info['quiet_below']:g}%).",
        "",
        *baseline_table(results),
        "",
        f"![requests/s and p99 by number of users]({chart_name})",
        "",
    ]
    broken = [f"- {users} users: {v}" for users, summary, _ in results for v in summary.violations]
    if broken:
        lines += ["Thresholds broken during the measurement (failure ratio 0):", "", *broken, ""]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m loadtests.baseline", description=__doc__.split("\n\n")[0]
    )
    add_server_location_arguments(parser)
    parser.add_argument(
        "--start-server", action="store_true", help="start Triton like `make serve` (free ports)"
    )
    add_server_variant_argument(parser)
    parser.add_argument(
        "--users", type=converter(parse_user_counts), default=[1, 4, 16], help="user counts (1,4,16)"
    )
    parser.add_argument(
        "--run-time", type=converter(run_time), default="30s", help="per request type and user count (30s)"
    )
    # --protocol and --mix as for `python -m loadtests`; here every protocol and kind they give a weight
    # is measured on its own.
    add_workload_arguments(parser)
    parser.add_argument(
        "--quiet-below",
        type=float,
        default=25.0,
        help="before each run, wait until the machine's CPU use is at most this many percent (25)",
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=300.0,
        help="longest wait for that, seconds; then run anyway (300)",
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="markdown file (chart beside it)")
    parser.add_argument("--reports-dir", type=Path, default=None, help="Locust reports of every run")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    user_counts = args.users
    base = workload_from_args(args)
    protocols = [p for p in PROTOCOLS if base.protocols[p] > 0]
    kinds = [k for k in REQUEST_KINDS if base.mix[k] > 0]
    try:
        base.build_tasks()
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR

    stamp = datetime.now(timezone.utc)
    reports_dir = args.reports_dir or REPO_ROOT / "reports" / f"baseline-{stamp:%Y%m%d-%H%M%S}"
    results: Results = []
    with ExitStack() as stack:
        try:
            if args.start_server:
                variant, _ = choose_variant(args.server_variant)
                location = stack.enter_context(start_server(variant, reports_dir / "server.log"))
                server = f"{variant} variant, started by this command as `make serve` starts it"
            else:
                location = ServerLocation.from_args(args)
                server = location.describe()
            version = wait_for_server(location, kinds, 30)
            server += f"; Triton {version}"
            grid = [(users, p, k) for users in user_counts for p in protocols for k in kinds]
            for index, (users, protocol, kind) in enumerate(grid, start=1):
                workload = replace(
                    base,
                    protocols={p: int(p == protocol) for p in PROTOCOLS},
                    mix={k: int(k == kind) for k in REQUEST_KINDS},
                )
                plan = RunPlan.measurement(
                    location,
                    workload,
                    users,
                    args.run_time,
                    args.timeout,
                    out_dir=reports_dir / f"users-{users}-{protocol}-{kind}",
                )
                busy = wait_until_quiet(args.quiet_below, args.quiet_wait)
                summary = run_locust(plan, f"{index}/{len(grid)} {protocol} {kind} x{users}")
                print(*report.console_lines(summary)[:1], sep="\n")
                results.append((users, summary, busy))
        except (LoadTestError, ServingError) as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_ERROR

    info = measurement_record(stamp, server, "python -m loadtests.baseline", argv)
    info.update(quiet_below=args.quiet_below, quiet_wait=args.quiet_wait)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    chart = args.output.with_suffix(".png")
    report.plot_sweep(
        [(users, summary) for users, summary, _ in results], chart, "baseline: each request type alone"
    )
    args.output.write_text(baseline_markdown(results, info, chart.name))
    print(f"baseline written to {args.output} (+ {chart.name}); Locust reports in {reports_dir}")
    return EXIT_PASSED if all(summary.passed for _, summary, _ in results) else EXIT_THRESHOLDS


if __name__ == "__main__":
    sys.exit(main())
